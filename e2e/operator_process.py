"""``lws-operator run`` as a separate process, from this checkout or from any installed copy.

The metrics and upgrade tests need the operator exactly as a user runs it: its command line,
its own ports, and (for upgrades) another version's code in another virtualenv. The process
registers its webhooks by URL on 127.0.0.1 under configuration names of its own, and removes
them when it gets SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from e2e.cluster.launcher import free_port

CURRENT = Path(sys.executable).with_name("lws-operator")  # this checkout (editable install)


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
        try:
            return await asyncio.wait_for(proc.wait(), grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            return await proc.wait()
