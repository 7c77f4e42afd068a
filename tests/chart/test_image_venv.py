"""The image's virtualenv, built without Docker the way the Dockerfile builds it.

``hack/image-venv.sh`` is the Dockerfile's one install step; here it builds the same virtualenv
(same lock files, same commands) with this machine's Python 3.11, and the entrypoint must start:
``lws-operator run --help``, the version, and a real ``lws-operator run`` serving ``/healthz``,
``/readyz`` and ``/metrics`` against the test cluster.

The virtualenv is cached under ``~/.cache/lws-operator/image-venv/<hash>``, keyed by everything
the image build copies in (lock files, script, project metadata, the package's sources): a change
to any of them builds it afresh (about 30 s), otherwise the tests take a few seconds.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from e2e.cluster.launcher import cache_root, free_port
from e2e.harness.chart import REPO, http_get, start, stop
from e2e.harness.clusters import Clusters
from e2e.kube import wait_for

SCRIPT = REPO / "hack" / "image-venv.sh"
LOCK = REPO / "requirements.lock"
# What the image build copies in, less README.md (only the wheel's description: editing it
# must not cost a rebuild).
INPUTS = [LOCK, REPO / "build-requirements.lock", SCRIPT, REPO / "pyproject.toml"]


def image_inputs_digest() -> str:
    digest = hashlib.sha256()
    files = INPUTS + sorted((REPO / "lws_operator").rglob("*.py"))
    for path in files:
        digest.update(str(path.relative_to(REPO)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def dockerfile_install_step() -> str:
    return next(line for line in (REPO / "Dockerfile").read_text().splitlines()
                if line.startswith("RUN ") and "image-venv.sh" in line)


@pytest.fixture(scope="module")
def image_venv() -> Path:
    root = cache_root() / "image-venv"
    root.mkdir(parents=True, exist_ok=True)
    venv = root / image_inputs_digest()
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one build at a time across sessions
        if not (venv / ".complete").exists():
            shutil.rmtree(venv, ignore_errors=True)  # an interrupted build
            subprocess.run(["sh", str(SCRIPT), str(venv), str(REPO)], check=True,
                           env={**os.environ, "PYTHON": sys.executable})
        (venv / ".complete").write_text("")  # also marks it as recently used
        # Other inputs' venvs (older commits, other work trees sharing the cache) once unused
        # for a week.
        for old in root.iterdir():
            marker = old / ".complete"
            if old != venv and old.is_dir() and (
                    not marker.exists() or time.time() - marker.stat().st_mtime > 7 * 86400):
                shutil.rmtree(old, ignore_errors=True)
    return venv


def test_the_dockerfile_uses_the_script_and_the_lock() -> None:
    step = dockerfile_install_step()
    assert "hack/image-venv.sh /venv" in step
    dockerfile = (REPO / "Dockerfile").read_text()
    assert "COPY requirements.lock build-requirements.lock" in dockerfile
    assert 'ENTRYPOINT ["lws-operator", "run"]' in dockerfile
    assert "USER 65532:65532" in dockerfile
    base = next(line for line in dockerfile.splitlines() if line.startswith("ARG PYTHON_IMAGE="))
    assert base.startswith("ARG PYTHON_IMAGE=python:3.11.")
    assert base.endswith("-slim-bookworm")


def test_only_locked_distributions_are_installed(image_venv: Path) -> None:
    locked = {line.split(" ", 1)[0].lower() for line in LOCK.read_text().splitlines()
              if "==" in line and not line.startswith((" ", "#"))}
    frozen = subprocess.run([str(image_venv / "bin" / "pip"), "list", "--format=freeze"],
                            capture_output=True, text=True, check=True).stdout.split()
    installed = {pin.lower().replace("_", "-") for pin in frozen}
    # The venv's own pip is Python's bundled one; everything else is the lock plus us.
    installed = {p for p in installed if not p.startswith(("pip==", "setuptools=="))}
    assert installed == {p.replace("_", "-") for p in locked} | {"lws-operator==0.1.0"}


def test_entrypoint_starts(image_venv: Path) -> None:
    exe = str(image_venv / "bin" / "lws-operator")
    version = subprocess.run([exe, "--version"], capture_output=True, text=True, check=True)
    assert version.stdout.strip() == "lws-operator 0.1.0"
    helped = subprocess.run([exe, "run", "--help"], capture_output=True, text=True, check=True)
    for flag in ("--cert-management", "--kube-api-qps", "--webhook-port", "--health-port"):
        assert flag in helped.stdout


@pytest.mark.full
async def test_run_serves_health_against_the_cluster(image_venv: Path, clusters: Clusters,
                                                     tmp_path: Path) -> None:
    """The real process, controllers off (this shared cluster's LeaderWorkerSets belong to other
    tests) and no webhook registration; it issues its certificate into a Secret of a fresh
    namespace and is then ready."""
    cluster = clusters.get("full")
    namespace = f"image-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", namespace)
    health, metrics_port = free_port(), free_port()
    log_path = tmp_path / "operator.log"
    # /metrics on a port of its own, plain HTTP here (the RBAC run of test_chart_install
    # scrapes the authenticated HTTPS one).
    proc = start([str(image_venv / "bin" / "lws-operator"), "run",
                  f"--kubeconfig={cluster.kubeconfig}", f"--namespace={namespace}",
                  "--webhook-host=127.0.0.1", "--no-register-webhooks", "--disable-controllers",
                  f"--webhook-port={free_port()}", f"--health-port={health}",
                  f"--metrics-bind-address=127.0.0.1:{metrics_port}", "--metrics-secure=false"],
                 {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}, log_path)
    try:
        async def ready() -> bool:
            assert proc.poll() is None, "the operator exited:\n" + log_path.read_text()
            return http_get(f"http://127.0.0.1:{health}/readyz")[0] == 200

        await wait_for(ready, timeout=60, what="/readyz")
        assert http_get(f"http://127.0.0.1:{health}/healthz") == (200, "ok")
        status, metrics = http_get(f"http://127.0.0.1:{metrics_port}/metrics")
        assert status == 200
        assert "rest_client_requests_total" in metrics
    finally:
        code = stop(proc)
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
    assert code == 0, log_path.read_text()
