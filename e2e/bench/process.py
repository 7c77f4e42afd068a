"""The operator as the benchmark runs it: ``lws-operator run`` in a process of its own, so its CPU
time and memory are its own and the load generator does not share its event loop.

It runs in local mode (webhooks registered by URL on 127.0.0.1) with configuration names unique
to the run; metrics come from its plain-HTTP health port. ``py-spy`` can sample it for the whole
run (``--format raw``: collapsed stacks, which ``figures.top_frames`` ranks).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from e2e.cluster.launcher import free_port
from e2e.operator_process import answers_ready

REPO = Path(__file__).resolve().parents[2]
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of ``pid`` so far (``/proc/<pid>/stat`` fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def memory_mib(pid: int) -> dict[str, float]:
    """Resident memory now and at its peak (``VmRSS``, ``VmHWM``), in MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out["rss" if key == "VmRSS" else "peak_rss"] = round(int(value.split()[0]) / 1024, 1)
    return out


@dataclass
class OperatorProcess:
    kubeconfig: str
    run_id: str
    log_path: Path
    profile_path: Path | None = None
    workers: int = 8
    extra_args: list[str] = field(default_factory=list)  # further `lws-operator run` flags
    health_port: int = field(default_factory=free_port)
    webhook_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    process: asyncio.subprocess.Process | None = None
    profiler: asyncio.subprocess.Process | None = None
    rss_samples: list[tuple[float, float]] = field(default_factory=list)
    _sampler: asyncio.Task[None] | None = None

    @property
    def namespace(self) -> str:
        return f"lws-bench-system-{self.run_id}"

    @property
    def configurations(self) -> tuple[str, str]:
        return (f"lws-bench-mutating-{self.run_id}", f"lws-bench-validating-{self.run_id}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def start(self, timeout: float = 90.0) -> None:  # noqa: ASYNC109
        """Start and wait until ``/readyz`` answers 200 (certificates issued, webhooks
        registered); the caller then waits until the API server reaches them."""
        mutating, validating = self.configurations
        argv = [sys.executable, "-m", "lws_operator", "run", "--kubeconfig", self.kubeconfig,
                "--namespace", self.namespace, "--webhook-host", "127.0.0.1",
                "--webhook-port", str(self.webhook_port), "--health-port", str(self.health_port),
                "--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
                "--metrics-secure=false",
                "--webhook-secret", f"lws-bench-cert-{self.run_id}",
                "--mutating-webhook-configuration", mutating,
                "--validating-webhook-configuration", validating,
                "--workers", str(self.workers), "--log-format", "text", "--log-level", "info",
                *self.extra_args]
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        log = self.log_path.open("wb")
        try:
            self.process = await asyncio.create_subprocess_exec(
                *argv, cwd=REPO, stdout=log, stderr=log, start_new_session=True)
        finally:
            log.close()
        print(f"[bench] operator pid {self.process.pid}", file=sys.stderr, flush=True)
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(self._ready):
            if self.process.returncode is not None:
                raise RuntimeError(f"the operator exited with {self.process.returncode}; "
                                   f"see {self.log_path}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"the operator was not ready after {timeout}s; "
                                   f"see {self.log_path}")
            await asyncio.sleep(0.25)
        self._sampler = asyncio.create_task(self._sample_memory())

    def _ready(self) -> bool:
        return answers_ready(self.health_port)

    async def start_profiler(self, rate: int = 50) -> None:
        """Sample every thread of the operator with py-spy until ``stop``."""
        assert self.profile_path is not None
        py_spy = Path(sys.executable).with_name("py-spy")
        self.profiler = await asyncio.create_subprocess_exec(
            str(py_spy), "record", "--pid", str(self.pid), "--rate", str(rate), "--nonblocking",
            "--format", "raw", "--output", str(self.profile_path),
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)

    async def _sample_memory(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                self.rss_samples.append((time.monotonic(), memory_mib(self.pid)["rss"]))
            await asyncio.sleep(1.0)

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def memory(self) -> dict[str, float]:
        return memory_mib(self.pid)

    async def metrics(self) -> str:
        def get() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                        timeout=10) as answer:
                return str(answer.read().decode())
        return await asyncio.to_thread(get)

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
        if self.process is None or self.process.returncode is not None:
            return None if self.process is None else self.process.returncode
        self.process.send_signal(signal.SIGTERM)
        try:
            return await asyncio.wait_for(self.process.wait(), 30)
        except TimeoutError:
            self.process.kill()
            return await self.process.wait()
