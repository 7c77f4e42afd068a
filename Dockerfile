# The lws-operator image: Python 3.11 slim, dependencies from the hash-locked requirements.lock,
# non-root, entrypoint `lws-operator run` (the Helm chart passes only flags).
#
#   docker build -t lws-operator:0.1.0 .
#
# The virtualenv is built by hack/image-venv.sh, which tests/chart/test_image_venv.py runs too.
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY requirements.lock build-requirements.lock pyproject.toml README.md ./
COPY hack/image-venv.sh ./hack/
COPY lws_operator ./lws_operator
# Bytecode of the level the operator runs at (PYTHONOPTIMIZE, below).
RUN PYTHON=python sh hack/image-venv.sh /venv . && /venv/bin/python -m compileall -q -o 2 /venv

FROM ${PYTHON_IMAGE}
LABEL org.opencontainers.image.title="lws-operator" \
      org.opencontainers.image.description="LeaderWorkerSet operator (leaderworkerset.x-k8s.io/v1)" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /venv /venv
ENV PATH=/venv/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
# Docstrings and asserts dropped from the bytecode: about 3.5 MiB less across the operator and
# its admission child, at rest and at the peak (docs/performance.md, "Memory"). The standard
# library is compiled at that level too (the base image ships it without bytecode, or with
# bytecode of level 0 only), else every start would compile it in the process.
ENV PYTHONOPTIMIZE=2
RUN python -m compileall -q -o 2 -x '/(test|tests|idle_test|idlelib)/' \
        "$(python -c 'import sysconfig; print(sysconfig.get_path("stdlib"))')"
# Two malloc arenas instead of glibc's 8 per core: the operator's threads (its loop, kopf's per
# controller, the executor's) each grew an arena of their own. Measured with the cold-start
# benchmark at 5,000 pods: 148 MiB at rest and 157 MiB peak, against 163 and 163.
ENV MALLOC_ARENA_MAX=2
# frozenlist's pure-Python class: its C++ extension maps libstdc++ (about 1 MiB resident) for
# lists aiohttp walks once per probe or scrape (lws_operator/kube/extensions.py).
ENV FROZENLIST_NO_EXTENSIONS=1
# Non-root, numeric so that runAsNonRoot can verify it; owns nothing in the image.
USER 65532:65532
# Webhooks, health probes, metrics (HTTPS).
EXPOSE 9443 8081 8443
ENTRYPOINT ["lws-operator", "run"]
