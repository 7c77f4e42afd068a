"""The operator as the benchmark runs it: the harness's ``OperatorProcess.measured`` (a process of
its own, so its CPU time and memory are its own and the load generator does not share its event
loop), sampled for memory every second and, unless ``--no-py-spy``, by py-spy one phase at a time:
each phase gets its own recording, which py-spy renders as a flame graph (SVG) when it stops.

py-spy reads the operator's memory (``process_vm_readv``, ptrace's permission), which a container
or a Yama ``ptrace_scope`` above 0 can forbid; ``check_py_spy`` tries it on a child of its own
before anything is created, so a run that cannot profile fails at once with the reason.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from e2e.harness.launcher import OperatorProcess, cpu_seconds, memory_mib, shared_memory_mib

PY_SPY = Path(sys.executable).with_name("py-spy")
SAMPLE_RATE = 50  # per second: enough for a flame graph, little CPU taken from the cluster


def children_of(pid: int) -> list[int]:
    """The live child processes of ``pid`` (``/proc/<pid>/task/*/children``): the operator's
    admission process, which serves the webhooks beside it."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found.extend(int(c) for c in (task / "children").read_text().split())
    return found


class ProfilerError(Exception):
    """py-spy cannot profile a process on this machine."""


def check_py_spy() -> None:
    """Attach py-spy to a Python child of ours (``py-spy dump``), as it will attach to the
    operator: raise ``ProfilerError`` with the reason when it cannot."""
    if not PY_SPY.is_file():
        raise ProfilerError(f"py-spy is not installed next to {sys.executable} "
                            f"(`make venv` installs it); or run with --no-py-spy")
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"],
                             stdin=subprocess.DEVNULL)
    try:
        # The child must be running Python code before py-spy can find its interpreter.
        time.sleep(0.5)
        done = subprocess.run([str(PY_SPY), "dump", "--pid", str(child.pid)],
                              capture_output=True, text=True, timeout=30, check=False)
    finally:
        child.kill()
        child.wait()
    if done.returncode != 0:
        lines = [line for line in (done.stderr or done.stdout).splitlines() if line.strip()]
        reason = " / ".join(lines[:3]) or f"exit code {done.returncode}"
        raise ProfilerError(
            f"py-spy cannot read another process's memory here ({reason}). It needs ptrace "
            f"permission: run as root or with CAP_SYS_PTRACE (a container: --cap-add "
            f"SYS_PTRACE), or set kernel.yama.ptrace_scope to 0; or run with --no-py-spy")


@dataclass
class Recording:
    """One phase's py-spy process and the flame graph it writes when stopped."""

    phase: str
    path: Path
    process: asyncio.subprocess.Process
    log: Path


@dataclass
class ProfiledOperator:
    """A measured operator process, with its memory samples and, when ``flame_dir`` is set, one
    py-spy flame graph per phase (``<flame_prefix>-<phase>.svg``)."""

    operator: OperatorProcess
    flame_dir: Path | None = None
    flame_prefix: str = "flame"
    flame_graphs: dict[str, Path | None] = field(default_factory=dict)
    rss_samples: list[tuple[float, float]] = field(default_factory=list)
    # The same observations counted the way a container's memory (its cgroup) counts them: the
    # operator's RSS plus each child's USS, so the pages they share count once (``memory``).
    shared_once_samples: list[tuple[float, float]] = field(default_factory=list)
    # The last CPU seconds seen of each child process (a restarted child's time stays counted).
    child_cpu: dict[int, float] = field(default_factory=dict)
    _recording: Recording | None = None
    _sampler: asyncio.Task[None] | None = None

    @classmethod
    def create(cls, kubeconfig: str, run_id: str, log_path: Path,
               flame_dir: Path | None = None, flame_prefix: str = "flame",
               workers: int = 8) -> ProfiledOperator:
        return cls(OperatorProcess.measured(kubeconfig, run_id, log_path, workers=workers),
                   flame_dir, flame_prefix)

    @property
    def namespace(self) -> str:
        return self.operator.namespace

    @property
    def configurations(self) -> tuple[str, str]:
        return self.operator.configurations

    @property
    def profiling(self) -> bool:
        return self.flame_dir is not None

    async def start(self) -> None:
        """Start and wait until ``/readyz`` answers 200 (certificates issued, webhooks
        registered); the caller then waits until the API server reaches them."""
        await self.operator.start()
        print(f"[bench] operator pid {self.operator.pid}", file=sys.stderr, flush=True)
        self._sampler = asyncio.create_task(self._sample_memory())

    def profiler_cpu(self) -> float | None:
        """CPU seconds so far of the py-spy recording the current phase, None when none runs:
        it samples the operator 50 times a second, on the operator side only, so its share of
        the machine is reported rather than left inside the machine's figure."""
        recording = self._recording
        if recording is None or recording.process.returncode is not None:
            return None
        try:
            return cpu_seconds(recording.process.pid)
        except OSError:
            return None

    async def profile_phase(self, phase: str | None) -> None:
        """End the current phase's recording (py-spy writes its flame graph) and, unless
        ``phase`` is None, start recording ``phase``. Without ``flame_dir``, nothing."""
        if self.flame_dir is None:
            return
        await self._end_recording()
        if phase is None:
            return
        path = self.flame_dir / f"{self.flame_prefix}-{phase}.svg"
        log = path.with_suffix(".log")
        with log.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                str(PY_SPY), "record", "--pid", str(self.operator.pid),
                "--rate", str(SAMPLE_RATE), "--nonblocking", "--subprocesses",
                "--format", "flamegraph",
                "--output", str(path), stdin=asyncio.subprocess.DEVNULL, stdout=out,
                stderr=out)
        self._recording = Recording(phase, path, process, log)
        # The phase starts once py-spy samples (it says so), so its first moments are in it.
        deadline = time.monotonic() + 10
        while b"Sampling process" not in await asyncio.to_thread(log.read_bytes):
            if process.returncode is not None or time.monotonic() > deadline:
                print(f"[bench] py-spy is not sampling {phase} (see {log})", file=sys.stderr,
                      flush=True)
                break
            await asyncio.sleep(0.05)

    async def _end_recording(self) -> None:
        """SIGINT (py-spy writes its file on it); SIGKILL after 30 s. A phase without a single
        sample still gets an SVG (py-spy writes one saying so, and exits 1); a recording that
        wrote nothing is None in ``flame_graphs`` and its log stays for the reason."""
        recording, self._recording = self._recording, None
        if recording is None:
            return
        process = recording.process
        if process.returncode is None:
            process.send_signal(signal.SIGINT)
            try:
                await asyncio.wait_for(process.wait(), 30)
            except TimeoutError:
                process.kill()
                await process.wait()
        written = recording.path.is_file() and recording.path.stat().st_size > 0
        self.flame_graphs[recording.phase] = recording.path if written else None
        if written:
            recording.log.unlink(missing_ok=True)
        else:
            print(f"[bench] py-spy wrote no flame graph for {recording.phase} (exit code "
                  f"{process.returncode}; see {recording.log})", file=sys.stderr, flush=True)

    async def _sample_memory(self) -> None:
        while True:
            with contextlib.suppress(OSError):
                self.memory()  # the observation joins rss_samples
            await asyncio.sleep(1.0)

    def cpu(self) -> float:
        """CPU seconds of the operator and its admission process together (the webhooks are
        served by a child process: their cost is the operator's)."""
        for child in children_of(self.operator.pid):
            with contextlib.suppress(OSError, ValueError, IndexError):
                self.child_cpu[child] = cpu_seconds(child)
        return self.operator.cpu() + sum(self.child_cpu.values())

    def memory(self) -> dict[str, float]:
        """RSS of the operator and its admission process together, now (``rss``), and the sum
        of their peaks (``peak_rss``, an upper bound: they need not peak at once); the sampled
        peak of the sum is ``max(rss_samples)``, which every call joins: a short-lived child (the
        certificate planner, at start) counts while it lives, and no figure taken (``at_start``)
        can exceed the reported peak. ``operator_rss``/``admission_rss``: each (the latter is
        every child's).

        ``rss_shared_once`` and ``peak_rss_shared_once`` are the same observations with the
        pages the processes share (the interpreter, the libraries, what a child inherits)
        counted once: the operator's RSS plus each child's USS (``smaps_rollup``), about what a
        memory limit on the pod's container sees, short of the page cache. They are reported
        next to the RSS sum; the target is held to the RSS sum (``peak_rss``)."""
        own = self.operator.memory()
        rss, peak, admission = own.get("rss", 0.0), own.get("peak_rss", 0.0), 0.0
        unique = 0.0
        for child in children_of(self.operator.pid):
            with contextlib.suppress(OSError, ValueError, KeyError):
                child_memory = memory_mib(child)
                child_unique = shared_memory_mib(child)["uss"]
                admission += child_memory["rss"]
                peak += child_memory["peak_rss"]
                unique += child_unique
        now = time.monotonic()
        self.rss_samples.append((now, rss + admission))
        self.shared_once_samples.append((now, rss + unique))
        sampled = max(r for _, r in self.rss_samples)
        return {"rss": round(rss + admission, 1), "peak_rss": round(max(peak, sampled), 1),
                "operator_rss": own.get("rss", 0.0), "admission_rss": round(admission, 1),
                "rss_shared_once": round(rss + unique, 1),
                "peak_rss_shared_once": round(max(r for _, r in self.shared_once_samples), 1)}

    def shared_memory(self) -> dict[str, float]:
        """Now, in MiB: the pair's PSS (``pss``), and the operator's RSS plus the admission
        child's USS (``rss_shared_once``: the pages both map counted once, where the RSS sum
        counts them twice); each process's RSS, PSS and USS (``shared_memory_mib``)."""
        own = shared_memory_mib(self.operator.pid)
        child = {"rss": 0.0, "pss": 0.0, "uss": 0.0}
        for pid in children_of(self.operator.pid):
            with contextlib.suppress(OSError, ValueError, KeyError):
                child = {k: child[k] + v for k, v in shared_memory_mib(pid).items()}
        return {"pss": round(own["pss"] + child["pss"], 1),
                "rss_shared_once": round(own["rss"] + child["uss"], 1),
                **{f"operator_{k}": v for k, v in own.items()},
                **{f"admission_{k}": round(v, 1) for k, v in child.items()}}

    async def metrics(self) -> str:
        return await self.operator.metrics()

    async def stop(self) -> int | None:
        """The last recording ends (its flame graph written), then SIGTERM to the operator (it
        removes its webhook registrations); SIGKILL whatever does not stop in time. The exit
        code."""
        if self._sampler is not None:
            self._sampler.cancel()
        await self._end_recording()
        return await self.operator.stop(30)
