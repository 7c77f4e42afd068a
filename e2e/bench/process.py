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
from lws_operator.api.constants import DEFAULT_WORKERS

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
class TreeMemory:
    """The memory of a process and its children, sampled (every second while a side runs),
    two ways; ``sample`` says how."""

    rss_samples: list[tuple[float, float]] = field(default_factory=list)
    # The same observations counted the way a container's memory (its cgroup) counts them: the
    # process's RSS plus each child's USS, so the pages they share count once.
    shared_once_samples: list[tuple[float, float]] = field(default_factory=list)
    # Each child's largest sampled USS, by pid.
    child_uss_peaks: dict[int, float] = field(default_factory=dict)

    def sample(self, pid: int, own: dict[str, float]) -> dict[str, float]:
        """``pid`` (``own``: its ``memory_mib``) and its children, now and at their peak.

        ``rss_shared_once``, ``peak_rss_shared_once``: the process's RSS plus each child's USS
        (``smaps_rollup``), so the pages they share (the interpreter, the libraries, what a
        forked child inherited and neither wrote to since) count once: about what the pod's
        memory cgroup charges, and so what a memory limit and ``kubectl top`` see, short of
        the page cache (``docs/benchmark.md``). For one process it is its RSS. The peak is the
        larger of the largest sampled sum and the process's high-water mark (``VmHWM``) plus
        the largest sampled USS of each child alive now (the kernel keeps no high-water mark
        of a USS): a bound in the same spirit as the RSS peak's.

        ``rss``, ``peak_rss``: the RSS sum (shared pages counted in each process), and the sum
        of their high-water marks or the largest sampled sum, whichever is larger (an upper
        bound: they need not peak at once). Every call joins the samples: a short-lived child
        (the certificate planner, at start) counts while it lives, and no figure taken
        (``at_start``) can exceed the reported peak. ``operator_rss``/``admission_rss``: the
        process's and its children's RSS; ``admission_uss``: the children's USS."""
        rss, peak, admission = own.get("rss", 0.0), own.get("peak_rss", 0.0), 0.0
        unique = unique_peaks = 0.0
        for child in children_of(pid):
            with contextlib.suppress(OSError, ValueError, KeyError):
                child_memory = memory_mib(child)
                child_unique = shared_memory_mib(child)["uss"]
                admission += child_memory["rss"]
                peak += child_memory["peak_rss"]
                unique += child_unique
                self.child_uss_peaks[child] = max(self.child_uss_peaks.get(child, 0.0),
                                                  child_unique)
                unique_peaks += self.child_uss_peaks[child]
        now = time.monotonic()
        self.rss_samples.append((now, rss + admission))
        self.shared_once_samples.append((now, rss + unique))
        sampled = max(r for _, r in self.rss_samples)
        shared_once = max(max(r for _, r in self.shared_once_samples),
                          own.get("peak_rss", 0.0) + unique_peaks)
        return {"rss": round(rss + admission, 1), "peak_rss": round(max(peak, sampled), 1),
                "operator_rss": own.get("rss", 0.0), "admission_rss": round(admission, 1),
                "admission_uss": round(unique, 1),
                "rss_shared_once": round(rss + unique, 1),
                "peak_rss_shared_once": round(shared_once, 1)}


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
    tree: TreeMemory = field(default_factory=lambda: TreeMemory())
    # The last CPU seconds seen of each child process (a restarted child's time stays counted).
    child_cpu: dict[int, float] = field(default_factory=dict)
    _recording: Recording | None = None
    _sampler: asyncio.Task[None] | None = None

    @classmethod
    def create(cls, kubeconfig: str, run_id: str, log_path: Path,
               flame_dir: Path | None = None, flame_prefix: str = "flame",
               workers: int = DEFAULT_WORKERS) -> ProfiledOperator:
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
        registered); the caller then waits until the API server reaches them. Memory is
        sampled from the first moment on: ten times a second until ready, the start's
        short-lived children included (the certificate planner lives a fraction of a second,
        beside the admission child forked at the start), then once a second."""
        starting = asyncio.create_task(self.operator.start())
        self._sampler = asyncio.create_task(self._sample_memory(starting))
        try:
            await starting
        except BaseException:
            self._sampler.cancel()
            raise
        print(f"[bench] operator pid {self.operator.pid}", file=sys.stderr, flush=True)

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

    async def _sample_memory(self, starting: asyncio.Task[None]) -> None:
        while True:
            if self.operator.process is not None:
                with contextlib.suppress(OSError):
                    self.memory()  # the observation joins the samples
            await asyncio.sleep(1.0 if starting.done() else 0.1)

    def cpu(self) -> float:
        """CPU seconds of the operator and its admission process together (the webhooks are
        served by a child process: their cost is the operator's)."""
        for child in children_of(self.operator.pid):
            with contextlib.suppress(OSError, ValueError, IndexError):
                self.child_cpu[child] = cpu_seconds(child)
        return self.operator.cpu() + sum(self.child_cpu.values())

    def memory(self) -> dict[str, float]:
        """The operator and its admission process together, now and at their peak
        (``TreeMemory.sample``); the benchmark's memory targets are held to
        ``peak_rss_shared_once``."""
        return self.tree.sample(self.operator.pid, self.operator.memory())

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
