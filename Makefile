# Entry points. `make demo` and `make test` are the two set-up commands of the README.
SHELL := /bin/bash
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
TIER ?= full
NODES ?= 16
GPUS ?= 8
TPU_NODES ?= 4
READY_DELAY_MS ?= 0
CLUSTER_DIR ?= .cluster
PYTEST_ARGS ?=

.PHONY: help venv build-cluster cluster-up cluster-down demo test lint unit e2e-smoke crd crd-check clean

help:
	@awk -F':.*## ' '/^[a-z-]+:.*## / {printf "%-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BIN)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

venv: $(BIN)/.installed ## create .venv with the package and its dev tools

build-cluster: venv ## build etcd, Kubernetes and kwok into ~/.cache/lws-operator (once per machine)
	$(BIN)/python -m e2e.cluster build

cluster-up: build-cluster ## start the local cluster (TIER=full|api NODES=16); idempotent
	$(BIN)/python -m e2e.cluster --dir $(CLUSTER_DIR) up --tier $(TIER) --nodes $(NODES) \
		--gpus $(GPUS) --tpu-nodes $(TPU_NODES) --ready-delay-ms $(READY_DELAY_MS)

cluster-down: venv ## stop the processes cluster-up started; idempotent
	$(BIN)/python -m e2e.cluster --dir $(CLUSTER_DIR) down

demo: cluster-up ## bring the cluster up and show its nodes (the operator joins in a later issue)
	$(CLUSTER_DIR)/bin/kubectl --kubeconfig $(CLUSTER_DIR)/kubeconfig get nodes \
		-L topology.kubernetes.io/zone,topology.kubernetes.io/rack,cloud.google.com/gke-nodepool
	@echo
	@echo "export KUBECONFIG=$(CURDIR)/$(CLUSTER_DIR)/kubeconfig PATH=$(CURDIR)/$(CLUSTER_DIR)/bin:\$$PATH"
	@echo "stop it with: make cluster-down"

lint: venv ## ruff, mypy and the import-layer contract
	$(BIN)/ruff check .
	$(BIN)/mypy lws_operator e2e tests hack conftest.py
	$(BIN)/lint-imports

unit: venv ## unit tests only (no cluster)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

e2e-smoke: build-cluster ## the control-plane smoke tests (full tier)
	$(BIN)/pytest e2e/smoke $(PYTEST_ARGS)

crd: build-cluster ## regenerate crds/ from the pinned API server's OpenAPI documents
	$(BIN)/python hack/gen_crd.py

crd-check: build-cluster ## fail if crds/ differs from what the generator produces
	$(BIN)/python hack/gen_crd.py --check

test: build-cluster lint ## everything CI runs: lint, unit, integration and end-to-end tests
	$(BIN)/pytest $(PYTEST_ARGS)

clean: cluster-down
	rm -rf $(CLUSTER_DIR)
