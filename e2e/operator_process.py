"""``lws-operator run`` as a separate process, from this checkout or from any installed copy.

The metrics and upgrade tests need the operator exactly as a user runs it: its command line,
its own ports, and (for upgrades) another version's code in another virtualenv. The process
registers its webhooks by URL on 127.0.0.1 under configuration names of its own, and removes
them when it gets SIGTERM. ``ReplicaProcess`` is the other shape: a replica in Service mode, as
the HA and chaos tests run several of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from e2e.cluster.launcher import free_port
from e2e.kube import wait_for

CURRENT = Path(sys.executable).with_name("lws-operator")  # this checkout (editable install)
REPO = Path(__file__).resolve().parents[1]
LEASE = "b8b2488c.x-k8s.io"  # the operator's leader-election Lease


async def reaped(proc: asyncio.subprocess.Process, grace: float) -> int:
    """Wait for ``proc`` to exit after a signal, SIGKILL it after ``grace`` seconds; its exit
    code."""
    try:
        return await asyncio.wait_for(proc.wait(), grace)
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        return await proc.wait()


def answers_ready(health_port: int) -> bool:
    """Whether an operator process's ``/readyz`` on 127.0.0.1 answers 200."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{health_port}/readyz",
                                    timeout=2) as answer:
            return bool(answer.status == 200)
    except OSError:
        return False


@dataclass
class OperatorProcess:
    kubeconfig: str
    run_id: str
    log_path: Path
    executable: Path = CURRENT
    extra_args: list[str] = field(default_factory=list)
    health_port: int = field(default_factory=free_port)
    webhook_port: int = field(default_factory=free_port)
    process: asyncio.subprocess.Process | None = None

    @property
    def namespace(self) -> str:
        """The operator's own namespace (certificate Secret); created by the caller."""
        return f"lws-system-{self.run_id}"

    def argv(self) -> list[str]:
        return [str(self.executable), "run", "--kubeconfig", self.kubeconfig,
                "--namespace", self.namespace, "--webhook-host", "127.0.0.1",
                "--webhook-port", str(self.webhook_port), "--health-port", str(self.health_port),
                "--mutating-webhook-configuration", f"lws-mutating-{self.run_id}",
                "--validating-webhook-configuration", f"lws-validating-{self.run_id}",
                "--log-format", "text", *self.extra_args]

    async def start(self, timeout: float = 90.0) -> None:  # noqa: ASYNC109
        """Start it and wait until ``/readyz`` answers 200 (certificate issued, webhooks
        registered)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            # cwd: the log's folder, so `-m`-style path lookups never pick up this checkout.
            self.process = await asyncio.create_subprocess_exec(
                *self.argv(), cwd=self.log_path.parent, stdout=log, stderr=log,
                stdin=asyncio.subprocess.DEVNULL, start_new_session=True)
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(self._ready):
            if self.process.returncode is not None:
                raise RuntimeError(f"the operator exited with {self.process.returncode}:\n"
                                   + self.log_tail())
            if time.monotonic() > deadline:
                raise TimeoutError(f"the operator was not ready after {timeout}s:\n"
                                   + self.log_tail())
            await asyncio.sleep(0.25)

    def _ready(self) -> bool:
        return answers_ready(self.health_port)

    def log_tail(self, chars: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    async def stop(self, grace: float = 30.0) -> int | None:
        """SIGTERM (it unregisters its webhooks and exits), SIGKILL after ``grace``."""
        proc = self.process
        if proc is None or proc.returncode is not None:
            return None if proc is None else proc.returncode
        proc.send_signal(signal.SIGTERM)
        return await reaped(proc, grace)


@dataclass
class ReplicaProcess:
    """One ``lws-operator run`` of this checkout (``python -m lws_operator``) as a replica of
    the chart runs it: Service mode (no webhook configuration registered), JSON logs, its own
    health, webhook and plain-HTTP metrics ports; for the tests that kill, stop and fail over
    replicas."""

    name: str
    kubeconfig: str
    namespace: str
    log_path: Path
    extra_args: list[str] = field(default_factory=list)
    health_port: int = field(default_factory=free_port)
    webhook_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    process: asyncio.subprocess.Process | None = None

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "lws_operator", "run", "--kubeconfig", self.kubeconfig,
                "--namespace", self.namespace, "--bind-address", "127.0.0.1",
                "--webhook-port", str(self.webhook_port), "--health-port", str(self.health_port),
                "--webhook-secret", "lws-webhook-server-cert",
                # Service mode: no configuration of these names exists, none is registered.
                "--mutating-webhook-configuration", f"unused-{self.namespace}",
                "--validating-webhook-configuration", f"unused-{self.namespace}",
                "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
                "--metrics-secure=false", "--log-format", "json", *self.extra_args]

    async def start(self) -> None:
        """Start it (appending to its log) and wait until ``/readyz`` answers."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv(), cwd=REPO, stdout=log, stderr=log,
                stdin=asyncio.subprocess.DEVNULL, start_new_session=True)
        await wait_for(self._ready, timeout=120, what=f"operator {self.name} ready")

    def _get(self, path: str, port: int) -> str | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
                return str(answer.read().decode())
        except OSError:
            return None

    async def _ready(self) -> bool:
        assert self.process is not None
        if self.process.returncode is not None:
            raise AssertionError(f"operator {self.name} exited with {self.process.returncode}:"
                                 f"\n{self.log_tail()}")
        return await asyncio.to_thread(answers_ready, self.health_port)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` without waiting for the process to exit."""
        assert self.process is not None
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(sig)

    async def kill(self) -> None:
        """SIGKILL, and reap it."""
        assert self.process is not None
        self.signal(signal.SIGKILL)
        await self.process.wait()

    async def terminate(self) -> int | None:
        """SIGTERM (passes in flight finish, the Lease is released); SIGKILL after 60 s. The
        exit code (None if it never ran)."""
        if self.process is None:
            return None
        if self.alive:
            self.signal(signal.SIGTERM)
        return await self.exited()

    async def exited(self) -> int:
        """Wait for the process to exit after a signal; SIGKILL it after 60 s. Its exit code."""
        assert self.process is not None
        return await reaped(self.process, 60)

    async def samples(self, family: str) -> list[tuple[dict[str, str], float]]:
        """The samples of one metric family on ``/metrics`` (none when it does not answer)."""
        text = await asyncio.to_thread(self._get, "/metrics", self.metrics_port)
        return [] if text is None else [
            (s.labels, s.value) for f in text_string_to_metric_families(text)
            if f.name == family for s in f.samples]

    async def leading(self) -> bool:
        return any(labels.get("name") == LEASE and value == 1.0
                   for labels, value in await self.samples("leader_election_master_status"))

    def log_entries(self) -> list[dict[str, Any]]:
        """The JSON log lines (others skipped)."""
        out = []
        for line in self._log_lines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    out.append(entry)
        return out

    def _log_lines(self) -> list[str]:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text.splitlines()

    def log_tail(self, lines: int = 30) -> str:
        return "\n".join(self._log_lines()[-lines:])

    def failures(self) -> list[str]:
        """Log lines at error level or above, and tracebacks: what a run must not produce."""
        out = []
        for line in self._log_lines():
            try:
                entry = json.loads(line)
            except ValueError:
                if "Traceback" in line:
                    out.append(line)
                continue
            if isinstance(entry, dict) and (entry.get("level") in ("error", "critical")
                                            or "Traceback" in json.dumps(entry)):
                out.append(line)
        return out
