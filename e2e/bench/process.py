"""The operator as the benchmark runs it: the harness's ``OperatorProcess.measured`` (a process of
its own, so its CPU time and memory are its own and the load generator does not share its event
loop), sampled for memory every second and, with ``--py-spy``, by py-spy for the whole run
(``--format raw``: collapsed stacks, which ``figures.top_frames`` ranks).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from e2e.harness.launcher import OperatorProcess, memory_mib


@dataclass
class ProfiledOperator:
    """A measured operator process, with its memory samples and optional py-spy profile."""

    operator: OperatorProcess
    profile_path: Path | None = None
    profiler: asyncio.subprocess.Process | None = None
    rss_samples: list[tuple[float, float]] = field(default_factory=list)
    _sampler: asyncio.Task[None] | None = None

    @classmethod
    def create(cls, kubeconfig: str, run_id: str, log_path: Path,
               profile_path: Path | None = None, workers: int = 8) -> ProfiledOperator:
        return cls(OperatorProcess.measured(kubeconfig, run_id, log_path, workers=workers),
                   profile_path)

    @property
    def namespace(self) -> str:
        return self.operator.namespace

    @property
    def configurations(self) -> tuple[str, str]:
        return self.operator.configurations

    async def start(self) -> None:
        """Start and wait until ``/readyz`` answers 200 (certificates issued, webhooks
        registered); the caller then waits until the API server reaches them."""
        await self.operator.start()
        print(f"[bench] operator pid {self.operator.pid}", file=sys.stderr, flush=True)
        self._sampler = asyncio.create_task(self._sample_memory())

    async def start_profiler(self, rate: int = 50) -> None:
        """Sample every thread of the operator with py-spy until ``stop``."""
        assert self.profile_path is not None
        py_spy = Path(sys.executable).with_name("py-spy")
        self.profiler = await asyncio.create_subprocess_exec(
            str(py_spy), "record", "--pid", str(self.operator.pid), "--rate", str(rate),
            "--nonblocking", "--format", "raw", "--output", str(self.profile_path),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)

    async def _sample_memory(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                self.rss_samples.append((time.monotonic(), memory_mib(self.operator.pid)["rss"]))
            await asyncio.sleep(1.0)

    def cpu(self) -> float:
        return self.operator.cpu()

    def memory(self) -> dict[str, float]:
        return self.operator.memory()

    async def metrics(self) -> str:
        return await self.operator.metrics()

    async def stop(self) -> int | None:
        """SIGINT to the profiler (it writes its file), SIGTERM to the operator (it removes its
        webhook registrations); SIGKILL whatever does not stop in time. The exit code."""
        if self._sampler is not None:
            self._sampler.cancel()
        if self.profiler is not None and self.profiler.returncode is None:
            self.profiler.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(self.profiler.wait(), 30)
            except TimeoutError:
                self.profiler.kill()
        return await self.operator.stop(30)
