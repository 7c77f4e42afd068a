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

.PHONY: help venv build-cluster cluster-up cluster-down demo test lint unit e2e-smoke crd crd-check clean bench

help:
	@awk -F':.*## ' '/^[a-z0-9-]+:.*## / {printf "%-15s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(BIN)/.installed: pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "need $(PYTHON)"; exit 1; }
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

venv: $(BIN)/.installed ## create .venv with the package and its dev tools

build-cluster: venv ## build etcd, Kubernetes and kwok into ~/.cache/lws-operator (once per machine)
	$(BIN)/python -m e2e.cluster build

cluster-up: build-cluster ## start the local cluster (TIER=full|api|node NODES=16); idempotent
	$(BIN)/python -m e2e.cluster --dir $(CLUSTER_DIR) up --tier $(TIER) --nodes $(NODES) \
		--gpus $(GPUS) --tpu-nodes $(TPU_NODES) --ready-delay-ms $(READY_DELAY_MS)

cluster-down: venv ## stop the processes cluster-up started; idempotent
	$(BIN)/python -m e2e.cluster --dir $(CLUSTER_DIR) down

demo: build-cluster ## cluster, CRD, operator, a sample LWS (replicas 2, size 4) shown as a tree
	CLUSTER_DIR=$(CLUSTER_DIR) $(BIN)/python -m e2e.demo

lint: venv ## ruff, mypy and the import-layer contract
	$(BIN)/ruff check .
	$(BIN)/mypy lws_operator e2e tests hack conftest.py
	$(BIN)/lint-imports

unit: venv ## unit tests only (no cluster)
	$(BIN)/pytest tests/unit $(PYTEST_ARGS)

e2e-smoke: build-cluster ## the control-plane smoke tests (full tier)
	$(BIN)/pytest e2e/smoke $(PYTEST_ARGS)

crd: build-cluster ## regenerate crds/ (all three CRDs) from the pinned API server's OpenAPI documents
	$(BIN)/python hack/gen_crd.py

crd-check: build-cluster ## fail if crds/ differs from what the generator produces
	$(BIN)/python hack/gen_crd.py --check

# The reliability scenarios marked chaos_run are left to `make chaos-short` (e2e/chaos/__init__.py).
# The tests start a few hundred interpreters (operators, admission children, the plugin). Where
# PYTHONDONTWRITEBYTECODE is set, as on CI machines, none of them caches what it compiles, so each
# would compile the operator's modules again (a third of an operator start's CPU): compile them
# once first. compileall writes the files whatever that variable says; the interpreters read them.
test: build-cluster lint image ## everything CI runs: lint, unit, integration and end-to-end tests
	$(BIN)/python -m compileall -q -j 0 lws_operator e2e tests hack conftest.py >/dev/null
	$(BIN)/pytest -m "not chaos_run" $(PYTEST_ARGS)

.PHONY: architecture-picture
architecture-picture: venv ## redraw docs/architecture.svg (layers, packages, imports) from the code
	$(BIN)/python hack/architecture_picture.py

# The operator image from the Dockerfile with podman (installed by hack/image-host.sh when missing);
# a locally made Debian base where no registry answers. Tagged by a hash of its inputs: an unchanged
# tree is a no-op. The reference and a docker-archive for containerd are in the cache's latest.json.
.PHONY: image
image: ## build the operator image with podman (LWS_IMAGE_BASE=auto|local|default)
	bash hack/image.sh

.PHONY: chaos-short
chaos-short: build-cluster ## every reliability run at its short size (make test keeps only the operator kills)
	$(BIN)/pytest e2e/chaos $(PYTEST_ARGS)

.PHONY: chaos
chaos: build-cluster ## reliability runs at full size (operator kills, API and webhook faults, fuzzing, group-safety fuzz, load)
	LWS_CHAOS=full $(BIN)/pytest e2e/chaos tests/integration/test_cert_rotation.py -s --timeout 7200 $(PYTEST_ARGS)

.PHONY: e2e-node
e2e-node: build-cluster ## the node tier (a real kubelet node; root, host changes undone at down) and its tests
	$(BIN)/pytest e2e/node $(PYTEST_ARGS)

# `make test` runs e2e/helm's short form (one install, the example, an upgrade) on the node tier.
.PHONY: e2e-helm
e2e-helm: build-cluster image helm ## helm install on the node tier: short form plus failover, reinstall, late namespace
	LWS_E2E_HELM=full $(BIN)/pytest e2e/helm $(PYTEST_ARGS)

.PHONY: demo-helm
demo-helm: build-cluster image helm ## `make demo` through helm install: the image, the node tier, the chart (root)
	CLUSTER_DIR=$(CLUSTER_DIR) $(BIN)/python -m e2e.demo_helm

.PHONY: e2e-metrics
e2e-metrics: build-cluster ## Prometheus scraping the operator (plain and authenticated), the chart's dashboard and alerts, upgrade safety
	$(BIN)/pytest e2e/metrics e2e/upgrade $(PYTEST_ARGS)

.PHONY: dashboard-png
dashboard-png: build-cluster ## draw docs/dashboard.png: the chart's dashboard panels from a live run's Prometheus
	LWS_DASHBOARD_PNG=docs/dashboard.png $(BIN)/pytest e2e/metrics/test_dashboard.py $(PYTEST_ARGS)

.PHONY: e2e-ds
e2e-ds: build-cluster ## the DisaggregatedSet end-to-end catalogue (make test runs its short part)
	LWS_E2E_DS=full $(BIN)/pytest e2e/controllers/test_disaggregatedset.py \
		e2e/controllers/test_disaggregatedset_catalogue.py \
		e2e/controllers/test_disaggregatedset_processes.py $(PYTEST_ARGS)

BENCH_ARGS ?=
# `make bench`: raw StatefulSets, the operator and the upstream Go controller in one run
# (docs/benchmark.md; BENCH_ARGS="--sides raw,ours" leaves upstream out); the issues' table with targets, upstream's
# figures and the change since the last run of the same size; a py-spy flame graph per phase (needs
# ptrace permission; BENCH_ARGS=--no-py-spy skips it); summaries in e2e/bench/results/ (latest.json,
# history/<time>.json).
bench: build-cluster ## scale benchmark, operator vs upstream vs plain StatefulSets (BENCH_ARGS="--profile large --repeat 5")
	$(BIN)/python -m e2e.bench $(BENCH_ARGS)

.PHONY: bench-coldstart
bench-coldstart: build-cluster ## operator cold start over 5k/20k/50k existing pods, API tier (BENCH_ARGS="--pods 5000")
	$(BIN)/python -m e2e.bench.coldstart $(BENCH_ARGS)

.PHONY: bench-ds
bench-ds: build-cluster ## DisaggregatedSets vs the same LeaderWorkerSets applied directly (BENCH_ARGS="--sets 2")
	$(BIN)/python -m e2e.bench.disaggregated $(BENCH_ARGS)

clean: cluster-down
	rm -rf $(CLUSTER_DIR)

# `make run`: the operator in the foreground on this machine, against the cluster in
# $(CLUSTER_DIR) (started with `make cluster-up` if it does not answer), webhooks registered by URL
# at https://127.0.0.1:$(WEBHOOK_PORT); Ctrl-C removes the registrations again.
RUN_NAMESPACE ?= lws-system
WEBHOOK_PORT ?= 9443
HEALTH_PORT ?= 8081
METRICS_PORT ?= 8080
RUN_ARGS ?=
CRD_FILE := crds/leaderworkerset.x-k8s.io_leaderworkersets.yaml
# Every CRD the operator serves: LeaderWorkerSet, DisaggregatedSet, DisaggregatedSetRoleScaler.
CRD_FILES := $(wildcard crds/*.yaml)
KUBECTL := $(CLUSTER_DIR)/bin/kubectl --kubeconfig $(CLUSTER_DIR)/kubeconfig

.PHONY: run
run: venv ## run the operator locally against $(CLUSTER_DIR) (webhooks on 127.0.0.1)
	@$(KUBECTL) get --raw /readyz >/dev/null 2>&1 || $(MAKE) cluster-up
	@if [ -f $(CRD_FILE) ]; then \
		for crd in $(CRD_FILES); do $(KUBECTL) apply --server-side --force-conflicts -f $$crd || exit 1; done; \
	else echo "$(CRD_FILE) not generated yet: running without the CRD"; fi
	$(KUBECTL) create namespace $(RUN_NAMESPACE) --dry-run=client -o yaml | $(KUBECTL) apply -f -
	exec $(BIN)/lws-operator run --kubeconfig $(CLUSTER_DIR)/kubeconfig \
		--namespace $(RUN_NAMESPACE) --webhook-host 127.0.0.1 --webhook-port $(WEBHOOK_PORT) \
		--health-port $(HEALTH_PORT) --metrics-bind-address 127.0.0.1:$(METRICS_PORT) \
		--metrics-secure=false $(RUN_ARGS)

.PHONY: run-starts
run-starts: venv ## `make run` right after `kubectl apply -f crds/`, 20 times: it must never exit
	CLUSTER_DIR=$(CLUSTER_DIR) bash hack/run_starts.sh

# The Helm chart, the image's lock files (see docs/helm.md).
HELM_VERSION := $(shell sed -n 's/^HELM_VERSION=//p' e2e/cluster/versions.env)
HELM := $(or $(LWS_CACHE),$(HOME)/.cache/lws-operator)/helm/v$(HELM_VERSION)/bin/helm
CHART := charts/lws-operator

.PHONY: helm chart-lint chart-golden lock
helm: ## build the pinned helm into ~/.cache/lws-operator/helm (once per machine)
	bash e2e/cluster/build.sh helm

chart-lint: helm ## helm lint the chart; fail if its CRDs differ from crds/
	$(HELM) lint --strict $(CHART)
	diff -r crds $(CHART)/crds

chart-golden: helm venv ## rewrite tests/chart/golden/ from the chart (review the diff)
	$(BIN)/python -m e2e.harness.chart

lock: ## regenerate requirements.lock and build-requirements.lock (pip-tools in a throwaway venv)
	@tmp=$$(mktemp -d) && trap 'rm -rf $$tmp' EXIT && $(PYTHON) -m venv $$tmp && \
	$$tmp/bin/pip install --quiet pip-tools && \
	for out in "requirements.lock" "build-requirements.lock --only-build-deps --build-deps-for wheel"; do \
		CUSTOM_COMPILE_COMMAND="make lock" $$tmp/bin/pip-compile --quiet --generate-hashes \
			--allow-unsafe --strip-extras --no-emit-index-url --no-emit-trusted-host \
			--no-emit-find-links --output-file $$out pyproject.toml || exit 1; \
	done
