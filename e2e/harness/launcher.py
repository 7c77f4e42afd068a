"""The one way tests run the operator: in this process, or as ``lws-operator run`` processes.

In this process (``start_controllers``, ``running_operator``): the controllers with a private
metrics registry and a short rollout-stall grace, next to the webhooks of ``admission``. Most
controller tests use this: a module shares one operator, and a test can reach into its runtime
(queue, cache, registry).

As a process (``OperatorProcess``): the operator exactly as a user runs it, with its command line
and its own ports, for what only a process shows (metrics scraping, SIGTERM and SIGKILL, leader
election between replicas, another version's code for upgrades, CPU time and memory). Three
shapes, one class; each constructor says which flags it passes:

- ``OperatorProcess.local``: webhooks registered by URL on 127.0.0.1 under configuration names
  of the run (text logs); optionally another installed copy's ``lws-operator`` executable.
- ``OperatorProcess.replica``: a replica as the chart runs it, in Service mode (no webhook
  configuration registered), JSON logs, plain-HTTP metrics; the HA and chaos runs start several.
- ``OperatorProcess.measured``: local mode with its own metrics port, worker count and
  certificate Secret, as the benchmark and the load run measure it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from e2e.cluster import LocalCluster
from e2e.cluster.launcher import cache_root, free_port
from e2e.harness.admission import Webhooks, options_for, start_webhooks, stop_webhooks
from e2e.harness.clusters import REPO
from e2e.harness.metrics import WRITE_VERBS
from e2e.kube import Kube
from lws_operator.admission.eviction import EvictionGuard
from lws_operator.api.constants import DEFAULT_WORKERS
from lws_operator.controllers.runtime import ControllerOptions, ControllerRuntime
from lws_operator.kube.client import KubeClient
from lws_operator.kube.metrics import ClientMetrics

CURRENT = Path(sys.executable).with_name("lws-operator")  # this checkout (editable install)
LEASE = "b8b2488c.x-k8s.io"  # the operator's leader-election Lease
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
MANAGED_RESOURCES = {"leaderworkersets", "statefulsets", "services", "controllerrevisions",
                     "pods", "persistentvolumeclaims", "podgroups", "workloads"}


# ------------------------------------------------------------------------------ in this process


@dataclass
class Controllers:
    runtime: ControllerRuntime
    registry: CollectorRegistry
    client: KubeClient
    stop: asyncio.Event
    task: asyncio.Task[None]

    async def close(self) -> None:
        self.stop.set()
        try:
            await asyncio.wait_for(self.task, 30)
        finally:
            await self.client.close()


async def start_controllers(kubeconfig: str, workers: int = 4, stall_grace: float = 5.0,
                            scheduler_provider: str | None = None) -> Controllers:
    """Controllers with a private metrics registry (their API requests are counted there) and a
    short rollout-stall grace period, so stall tests need not wait a minute."""
    registry = CollectorRegistry()
    client = await KubeClient.connect(kubeconfig, metrics=ClientMetrics.for_registry(registry))
    runtime = ControllerRuntime(client, ControllerOptions(
        workers=workers, stall_grace_seconds=stall_grace,
        scheduler_provider=scheduler_provider), registry)
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    return Controllers(runtime, registry, client, stop, task)


@dataclass
class Operator:
    """Our webhooks and controllers in this process, and the namespace confined to them."""

    kube: Kube
    namespace: str
    runtime: ControllerRuntime
    registry: CollectorRegistry
    kubeconfig: str
    cluster: LocalCluster

    async def server_writes(self) -> dict[tuple[str, str], float]:
        """kube-apiserver's own count of write requests to the kinds the operator manages."""
        text = await asyncio.to_thread(self.cluster.kubectl, "get", "--raw", "/metrics")
        out: dict[tuple[str, str], float] = {}
        for family in text_string_to_metric_families(text):
            if family.name != "apiserver_request":
                continue
            for metric in family.samples:
                labels = metric.labels
                if (metric.name == "apiserver_request_total"
                        and labels.get("verb") in {"POST", "PUT", "PATCH", "DELETE", "APPLY"}
                        and labels.get("resource") in MANAGED_RESOURCES):
                    key = (labels["verb"], labels["resource"])
                    out[key] = out.get(key, 0.0) + metric.value
        return out

    async def resync(self, passes: int = 3) -> None:
        """Every LeaderWorkerSet the operator has cached queued for a pass, ``passes`` times,
        a second apart: what a resync does, and a set at rest must cost no write in it."""
        for _ in range(passes):
            for key in list(self.runtime.cache["LeaderWorkerSet"].owners()):
                self.runtime.queue.add(key)
            await asyncio.sleep(1)

    async def recorded(self) -> None:
        """Until the Events the controllers recorded so far are written: a pass only queues
        its Events (``kube.events``), so a test that saw a pass's other writes reads its
        Events after this."""
        await self.runtime.events.flush()
        if self.runtime.disaggregated is not None:
            await self.runtime.disaggregated.events.flush()

    def writes(self) -> dict[tuple[str, str], float]:
        """The operator's own write requests so far, by (verb, resource)."""
        out: dict[tuple[str, str], float] = {}
        for metric in self.registry.collect():
            if metric.name != "lws_operator_api_requests":
                continue
            for sample in metric.samples:
                if sample.name.endswith("_total") and sample.labels["verb"] in WRITE_VERBS:
                    key = (sample.labels["verb"], sample.labels["resource"])
                    out[key] = out.get(key, 0.0) + sample.value
        return out


@contextlib.asynccontextmanager
async def running_operator(cluster: LocalCluster,
                           scheduler_provider: str | None = None) -> AsyncIterator[Operator]:
    """Our webhooks (confined to a fresh namespace) and controllers in this process, on
    ``cluster`` (which must have the CRD), with an optional scheduler provider on both sides."""
    kube = await Kube.connect(str(cluster.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    hooks: Webhooks = await start_webhooks(
        str(cluster.kubeconfig), options_for(namespace, scheduler_provider=scheduler_provider))
    controllers = await start_controllers(str(cluster.kubeconfig),
                                          scheduler_provider=scheduler_provider)
    # As ``lws-operator run`` wires them: evictions decided from the controllers' caches.
    hooks.runtime.evictions.decider = EvictionGuard(
        controllers.runtime.cache, controllers.runtime.events, controllers.registry).handle
    yield Operator(kube, namespace, controllers.runtime, controllers.registry,
                   str(cluster.kubeconfig), cluster)
    # LeaderWorkerSets a test left behind go first: deleted by the namespace later, they could
    # outlive this operator and keep the next module's one busy with a terminating namespace.
    for lws in await kube.list("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", namespace):
        await kube.delete("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet",
                          lws["metadata"]["name"], namespace)
    await controllers.close()
    await stop_webhooks(hooks)
    await kube.delete("v1", "Namespace", namespace)
    await kube.close()


# ------------------------------------------------------------------------------ as a process


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


def shared_memory_mib(pid: int) -> dict[str, float]:
    """Resident (``rss``), proportional (``pss``: each shared page divided among the processes
    that map it) and unique (``uss``: pages no other process maps) memory of ``pid`` now, in MiB,
    from ``/proc/<pid>/smaps_rollup``. The RSS of two processes added counts the pages they
    share twice; the USS of the one added to the RSS of the other counts them once."""
    kib: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]:
        key, _, value = line.partition(":")
        kib[key] = int(value.split()[0])
    return {"rss": round(kib["Rss"] / 1024, 1), "pss": round(kib["Pss"] / 1024, 1),
            "uss": round((kib["Private_Clean"] + kib["Private_Dirty"]) / 1024, 1)}


# The image runs the operator with ``PYTHONOPTIMIZE=2`` (Dockerfile): docstrings and asserts
# dropped from the bytecode, about 3.5 MiB less at rest and at the peak across the operator and
# its admission child (docs/performance.md, "Memory"). The measured operator runs the same way.
OPTIMIZE = 2


def bytecode_cache() -> Path:
    """Where the measured operator's bytecode of that level is (``PYTHONPYCACHEPREFIX``): the
    virtualenv here is shared with other work trees and is not written into, and has none."""
    return cache_root() / "bytecode"


def optimized_env(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the image's optimization level and this machine's cache of that level."""
    return {**env, "PYTHONOPTIMIZE": str(OPTIMIZE),
            "PYTHONPYCACHEPREFIX": str(bytecode_cache())}


# Imports every module of the package, so that the interpreter writes the bytecode of each
# module they import (the standard library's, the virtualenv's, ours) into the cache.
_IMPORT_ALL = """
import importlib, pkgutil, lws_operator
for module in pkgutil.walk_packages(lws_operator.__path__, "lws_operator."):
    importlib.import_module(module.name)
"""


def compile_package() -> None:
    """Compile what the measured operator imports to bytecode of the image's level
    (``OPTIMIZE``) into ``bytecode_cache()``, as an installed operator has it (the image's
    build compiles its virtualenv and the standard library): a measured operator then loads its
    modules as the image's does. Where ``PYTHONDONTWRITEBYTECODE`` is set (this machine class
    sets it), they would otherwise be compiled anew at every start, in the process itself:
    about 1.2 MiB more resident at rest across the operator and its admission child for this
    checkout's package alone, and the start's CPU (docs/benchmark.md, "Memory"). One process
    imports every module of the package with writing allowed; modules compiled already are
    only checked (a few seconds)."""
    env = optimized_env(dict(os.environ))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, "-c", _IMPORT_ALL], check=True, cwd=REPO, env=env,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


@dataclass
class OperatorProcess:
    """One ``lws-operator run`` process; build it with :meth:`local`, :meth:`replica` or
    :meth:`measured` (they set the flags below), then ``start`` and ``stop`` it."""

    kubeconfig: str
    namespace: str  # the operator's own (certificate Secret, Lease); created by the caller
    log_path: Path
    name: str = "operator"
    run_id: str = ""  # names the webhook configurations and namespace of local mode
    command: list[str] = field(default_factory=lambda: [sys.executable, "-m", "lws_operator"])
    cwd: Path = REPO
    host_flag: str = "--webhook-host"  # local mode; "--bind-address" for Service mode
    webhook_secret: str | None = None
    configurations: tuple[str, str] = ("", "")  # mutating, validating
    metrics_port: int | None = None  # plain HTTP on 127.0.0.1 when set
    workers: int | None = None
    log_format: str = "text"
    log_level: str | None = None
    truncate_log: bool = False
    ready_timeout: float = 90.0
    extra_args: list[str] = field(default_factory=list)  # further `lws-operator run` flags
    health_port: int = field(default_factory=free_port)
    webhook_port: int = field(default_factory=free_port)
    # Run as the image runs it (``OPTIMIZE``, from ``bytecode_cache()``); set by ``measured``.
    optimized: bool = False
    process: asyncio.subprocess.Process | None = None

    @classmethod
    def local(cls, kubeconfig: str, run_id: str, log_path: Path, *,
              executable: Path = CURRENT, extra_args: list[str] | None = None
              ) -> OperatorProcess:
        """Local mode, webhooks registered by URL under names of the run; ``executable`` may be
        another installed copy (run from the log's folder, so nothing of this checkout is
        picked up by path)."""
        return cls(kubeconfig, f"lws-system-{run_id}", log_path, name=run_id, run_id=run_id,
                   command=[str(executable)], cwd=log_path.parent,
                   configurations=(f"lws-mutating-{run_id}", f"lws-validating-{run_id}"),
                   extra_args=list(extra_args or []))

    @classmethod
    def replica(cls, name: str, kubeconfig: str, namespace: str, log_path: Path,
                extra_args: list[str] | None = None) -> OperatorProcess:
        """A replica of the chart: Service mode (no configuration of the names it is given
        exists, none is registered), JSON logs, its own plain-HTTP metrics port."""
        return cls(kubeconfig, namespace, log_path, name=name, host_flag="--bind-address",
                   webhook_secret="lws-webhook-server-cert",
                   configurations=(f"unused-{namespace}", f"unused-{namespace}"),
                   metrics_port=free_port(), log_format="json", ready_timeout=120.0,
                   extra_args=list(extra_args or []))

    @classmethod
    def measured(cls, kubeconfig: str, run_id: str, log_path: Path, *,
                 workers: int = DEFAULT_WORKERS,
                 extra_args: list[str] | None = None) -> OperatorProcess:
        """Local mode with a metrics port, a worker count and a certificate Secret of the
        run's own, info-level text logs (a new log file): as the benchmark measures it, from
        this checkout's package, at the image's optimization level, from bytecode compiled
        beforehand (``compile_package``)."""
        compile_package()
        return cls(kubeconfig, f"lws-bench-system-{run_id}", log_path, name=run_id,
                   run_id=run_id, webhook_secret=f"lws-bench-cert-{run_id}",
                   configurations=(f"lws-bench-mutating-{run_id}",
                                   f"lws-bench-validating-{run_id}"),
                   metrics_port=free_port(), workers=workers, log_level="info",
                   truncate_log=True, optimized=True, extra_args=list(extra_args or []))

    def _env(self) -> dict[str, str]:
        """This process's environment; for another installed copy, without ``PYTHONPATH``
        (tests run from a worktree set it to the checkout, which would shadow that copy's own
        code); ``optimized``, with the image's optimization level (``optimized_env``)."""
        if self.command[:1] in ([str(CURRENT)], [sys.executable]):
            env = dict(os.environ)
        else:
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        return optimized_env(env) if self.optimized else env

    def argv(self) -> list[str]:
        mutating, validating = self.configurations
        argv = [*self.command, "run", "--kubeconfig", self.kubeconfig,
                "--namespace", self.namespace, self.host_flag, "127.0.0.1",
                "--webhook-port", str(self.webhook_port), "--health-port", str(self.health_port)]
        if self.webhook_secret is not None:
            argv += ["--webhook-secret", self.webhook_secret]
        argv += ["--mutating-webhook-configuration", mutating,
                 "--validating-webhook-configuration", validating]
        if self.metrics_port is not None:
            argv += ["--metrics-bind-address", f"127.0.0.1:{self.metrics_port}",
                     "--metrics-secure=false"]
        if self.workers is not None:
            argv += ["--workers", str(self.workers)]
        argv += ["--log-format", self.log_format]
        if self.log_level is not None:
            argv += ["--log-level", self.log_level]
        return [*argv, *self.extra_args]

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.returncode is None

    async def start(self) -> None:
        """Start it and wait until ``/readyz`` answers 200 (certificate issued, webhooks
        registered in local mode)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("wb" if self.truncate_log else "ab") as log:
            self.process = await asyncio.create_subprocess_exec(
                *self.argv(), cwd=self.cwd, stdout=log, stderr=log,
                stdin=asyncio.subprocess.DEVNULL, start_new_session=True, env=self._env())
        deadline = time.monotonic() + self.ready_timeout
        while not await asyncio.to_thread(answers_ready, self.health_port):
            if self.process.returncode is not None:
                raise RuntimeError(f"operator {self.name} exited with "
                                   f"{self.process.returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"operator {self.name} was not ready after "
                                   f"{self.ready_timeout}s:\n{self.log_tail()}")
            await asyncio.sleep(0.25)

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

    async def stop(self, grace: float = 30.0) -> int | None:
        """SIGTERM (passes in flight finish, the Lease is released, a local-mode process
        removes its webhook registrations), SIGKILL after ``grace``. The exit code (None if it
        never ran)."""
        if self.process is None:
            return None
        if self.alive:
            self.signal(signal.SIGTERM)
        return await self.exited(grace)

    async def exited(self, grace: float = 60.0) -> int:
        """Wait for the process to exit after a signal; SIGKILL it after ``grace``. Its exit
        code."""
        assert self.process is not None
        return await reaped(self.process, grace)

    def cpu(self) -> float:
        return cpu_seconds(self.pid)

    def memory(self) -> dict[str, float]:
        return memory_mib(self.pid)

    async def metrics(self) -> str:
        """The text of ``/metrics`` on the plain-HTTP metrics port."""
        assert self.metrics_port is not None

        def get() -> str:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics",
                                        timeout=10) as answer:
                return str(answer.read().decode())
        return await asyncio.to_thread(get)

    async def samples(self, family: str) -> list[tuple[dict[str, str], float]]:
        """The samples of one metric family on ``/metrics`` (none when it does not answer)."""
        try:
            text = await asyncio.wait_for(self.metrics(), 10)
        except (OSError, TimeoutError):
            return []
        return [(s.labels, s.value) for f in text_string_to_metric_families(text)
                if f.name == family for s in f.samples]

    async def leading(self) -> bool:
        return any(labels.get("name") == LEASE and value == 1.0
                   for labels, value in await self.samples("leader_election_master_status"))

    def _log_lines(self) -> list[str]:
        text = self.log_path.read_text(errors="replace") if self.log_path.exists() else ""
        return text.splitlines()

    def log_tail(self, lines: int = 40) -> str:
        return "\n".join(self._log_lines()[-lines:])

    def log_text(self, chars: int) -> str:
        """The last ``chars`` characters of the log ("" before it exists)."""
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def log_entries(self) -> list[dict[str, Any]]:
        """The JSON log lines (others skipped)."""
        out = []
        for line in self._log_lines():
            with contextlib.suppress(ValueError):
                entry = json.loads(line)
                if isinstance(entry, dict):
                    out.append(entry)
        return out

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
