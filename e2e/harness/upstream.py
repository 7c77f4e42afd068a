"""The upstream Go controller as a process, for the handover tests: its manager binary, run
against the test cluster with our CRDs, its controllers only.

The binary and its manifests live outside the repository (``$LWS_UPSTREAM_DIR``, else a
``shared/upstream-controller`` folder beside the checkout or one of its parents); without them
the tests that need it are skipped, saying so. The binary is unpacked once into
``~/.cache/lws-operator/upstream/<sha256 of the binary>/manager``.

Its webhooks are not registered: a handover that restarts nothing creates no pod and admits no
set, and our pod webhook, confined to the test's namespace, labels any pod exactly as upstream's
would. Its webhook server still starts (the manager insists), on 127.0.0.1 with a certificate
made for the run. It watches the DisaggregatedSet CRDs too and will not start without them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import lzma
import os
import shutil
import tempfile
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from e2e.cluster.launcher import free_port
from e2e.harness.admission import serving_keypair

ENV = "LWS_UPSTREAM_DIR"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lws-operator" / \
    "upstream"
REPO = Path(__file__).resolve().parents[2]


def source_dir() -> Path | None:
    """Where ``manager.xz`` is: ``$LWS_UPSTREAM_DIR``, else ``shared/upstream-controller``
    beside the checkout or one of its parents; None when nowhere."""
    configured = os.environ.get(ENV)
    candidates = [Path(configured)] if configured else [
        parent / "shared" / "upstream-controller" for parent in REPO.parents]
    return next((c for c in candidates if (c / "manager.xz").is_file()), None)


def binary(source: Path, cache: Path = CACHE) -> Path:
    """The unpacked manager binary, from the cache when there."""
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=cache, delete=False) as out:
        with lzma.open(source / "manager.xz") as packed:
            shutil.copyfileobj(packed, out)
        unpacked = Path(out.name)
    digest = hashlib.sha256(unpacked.read_bytes()).hexdigest()
    target = cache / digest / "manager"
    if target.is_file():
        unpacked.unlink()
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        unpacked.chmod(0o755)
        shutil.move(unpacked, target)
    return target


CONFIGURATION = """\
apiVersion: config.lws.x-k8s.io/v1alpha1
kind: Configuration
leaderElection: {{leaderElect: false}}
internalCertManagement: {{enable: false}}
webhook: {{port: {webhook}, host: 127.0.0.1, certDir: {certs}}}
metrics: {{bindAddress: "127.0.0.1:{metrics}"}}
health: {{healthProbeBindAddress: "127.0.0.1:{health}"}}
"""


@dataclass
class UpstreamController:
    """One run of the upstream manager against ``kubeconfig``; its log in ``workdir``."""

    manager: Path
    kubeconfig: str
    workdir: Path
    health: int = field(default_factory=free_port)
    process: asyncio.subprocess.Process | None = None

    async def start(self, timeout: float = 60.0) -> None:  # noqa: ASYNC109
        """Started and answering ``/readyz``."""
        certs = self.workdir / "certs"
        certs.mkdir(parents=True, exist_ok=True)
        pair = serving_keypair()
        (certs / "tls.crt").write_bytes(pair["tls.crt"])
        (certs / "tls.key").write_bytes(pair["tls.key"])
        config = self.workdir / "config.yaml"
        config.write_text(CONFIGURATION.format(webhook=free_port(), certs=certs,
                                               metrics=free_port(), health=self.health))
        log = (self.workdir / "manager.log").open("wb")
        self.process = await asyncio.create_subprocess_exec(
            str(self.manager), f"--config={config}", "--zap-log-level=info",
            env={**os.environ, "KUBECONFIG": self.kubeconfig}, stdout=log, stderr=log)
        deadline = asyncio.get_running_loop().time() + timeout
        while not await asyncio.to_thread(self._ready):
            if self.process.returncode is not None:
                raise RuntimeError(f"the upstream manager exited ({self.process.returncode}); "
                                   f"see {self.workdir / 'manager.log'}")
            if asyncio.get_running_loop().time() > deadline:
                raise TimeoutError(f"the upstream manager not ready after {timeout}s")
            await asyncio.sleep(0.5)

    def _ready(self) -> bool:
        url = f"http://127.0.0.1:{self.health}/readyz"
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as answer:
            return bool(answer.status == 200)
        return False

    async def stop(self) -> None:
        """SIGTERM, then SIGKILL if it lingers; waited for."""
        if self.process is None or self.process.returncode is not None:
            return
        self.process.terminate()
        try:
            await asyncio.wait_for(self.process.wait(), 30)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()

    def log(self) -> str:
        return (self.workdir / "manager.log").read_text(errors="replace")
