"""The scale benchmark: LeaderWorkerSets through the operator, through the upstream Go controller,
and the same pods as plain StatefulSets, on one full-tier cluster.

    python -m e2e.bench [--profile default|large|smoke] [--sets K --replicas R --size S]
                        [--sides raw,ours,upstream] [--upstream-dir DIR]
                        [--kubeconfig PATH] [--no-py-spy] [--results DIR]

Without ``--kubeconfig`` it starts its own full-tier cluster (kwok nodes) in ``--cluster-dir``
and stops it afterwards. Each side goes through the same three phases, timed by one pod watch:
create (until every pod is Ready), rolling update (until every pod is Ready on the new image) and
delete (until no pod is left), each in a namespace of its own, one controller at a time. The
baseline (``raw``) runs with no controller alive; the operator (``ours``, a process of its own:
``process.ProfiledOperator``) and the upstream controller (``upstream``, its manager binary:
``upstream.UpstreamController``, with its own CRDs switched in for its side and ours restored
after) run the same phases, with a steady-state window after create in which they should write
nothing. The order of the sides rotates per round of a repeated run (``--repeat``), so each goes
first equally often.

The summary (``results/scale-<time>.json``, copied to ``latest.json`` and, without the pod
timelines, to ``history/<time>.json``) reports every time as a ratio to the baseline, the
operator's API requests per phase by verb and resource (its own counters, cross-checked against
kube-apiserver's ``apiserver_request_total`` for the requests only it makes), writes per group on
create, CPU seconds and memory (two ways: ``process.TreeMemory``), webhook latency (ours and
kube-apiserver's view of it), the reconcile-time histogram; the upstream controller's figures
under ``upstream`` (its CPU, peak memory, requests and status writes per phase, work-queue
wait), ours over its figure by figure
(``vs_upstream``, per round in ``rounds`` and as the median of the rounds), and each controller's
cost per pod (``per_pod``); and the issues' table (``targets``): each figure next to its target
(reported, never enforced), upstream's figure in this run and in the issue, and the change since
the previous run of the same size in the history; stdout prints the three sides side by side and
that table. Unless ``--no-py-spy``, one more operator
round follows the measured ones, in which py-spy records the operator one phase at a time
(create, steady, rollout, delete): a flame graph per phase (``scale-<time>-profiled-<phase>.svg``,
copied to ``latest-<phase>.svg``) and its hotspots in the summary. The measured rounds run
unprofiled: py-spy reads the operator 50 times a second from a process of its own, 2 to 4 % of
this 2-core machine's CPU on the operator side only (measured: 0.7 CPU s per create, 2.1 per
rollout), which the ratios to the baseline would otherwise charge to the operator. The profiled
round's times and CPU are reported apart (``profiled_round``), so py-spy's own cost stays visible.
A PNG plots the pods of each phase over time, operator against upstream and baseline.

Bad flags, or a cluster that is not reachable or too small, stop the run before anything is
created; an interrupted run (Ctrl-C, SIGTERM) deletes what it created and stops what it started.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from e2e.bench import compare, figures, targets, upstream, webhook_latency
from e2e.bench.figures import Scrape
from e2e.bench.process import ProfiledOperator, ProfilerError, check_py_spy
from e2e.bench.tracker import Tracker
from e2e.bench.upstream import UpstreamController, UpstreamError
from e2e.bench.workloads import (
    IMAGE,
    MAX_SURGE,
    PROFILES,
    ROLLED_IMAGE,
    Profile,
    baseline,
    leaderworkerset,
    pod_names,
    rolled_leaderworkerset_patch,
    rolled_statefulset_patch,
    set_name,
)
from e2e.cluster import LocalCluster, NodeLayout
from e2e.cluster.launcher import versions
from e2e.cluster.stages import pod_workers
from e2e.harness.admission import ensure_namespace, wait_until_admitting
from e2e.kube import MERGE_PATCH, STRATEGIC_PATCH, Kube
from lws_operator.api.constants import DEFAULT_WORKERS, MUTATE_POD_PATH
from lws_operator.kube.client import ApiException, KubeClient, status_message

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "e2e" / "bench" / "results"
HISTORY = "history"  # under the results folder: one summary per run
LWS_API = "leaderworkerset.x-k8s.io/v1"
CONCURRENCY = 8  # requests the driver has in flight while submitting a phase
# Writes not counted against "writes per set": status, Events, and leader election's Lease
# renewals (a heartbeat, whatever the workload).
EXCLUDED_FROM_CREATE_WRITES = ("leaderworkersets/status", "events", "leases")


class BenchError(Exception):
    """A precondition failed: reported as one line, exit code 2."""


@dataclass(frozen=True)
class Options:
    profile: Profile
    kubeconfig: str | None
    cluster_dir: Path
    keep_cluster: bool
    py_spy: bool
    results: Path
    webhook_rate: float
    webhook_seconds: float
    workers: int
    repeat: int = 1
    sides: tuple[str, ...] = compare.SIDES
    upstream_dir: Path | None = None


# ---------------------------------------------------------------------------- one side's phases


@dataclass
class Phase:
    """What one phase measured: total seconds from its first request to done, per-set seconds,
    its slice of the pod timeline and, for a phase that starts with no pod Ready (create), the
    seconds from its first request to the first pod Ready, and to each step on the way there
    (``Tracker.firsts``)."""

    seconds: float
    per_set: dict[str, float]
    timeline: list[list[float]]
    first_ready: float | None = None
    first_ready_path: dict[str, float] | None = None
    cpu: dict[str, float] | None = None

    def report(self) -> dict[str, Any]:
        out: dict[str, Any] = {"seconds": round(self.seconds, 3),
                               "per_set_seconds": figures.percentiles(list(self.per_set.values()))}
        if self.cpu is not None:
            out["cpu_seconds_by_process"] = self.cpu
        if self.first_ready is not None:
            out["first_ready_seconds"] = round(self.first_ready, 3)
        if self.first_ready_path:
            out["first_ready_path_seconds"] = self.first_ready_path
        return out


async def bounded(jobs: list[Callable[[], Awaitable[Any]]], limit: int = CONCURRENCY) -> None:
    """Run ``jobs`` with at most ``limit`` in flight; the first failure cancels the rest."""
    semaphore = asyncio.Semaphore(limit)

    async def one(job: Callable[[], Awaitable[Any]]) -> None:
        async with semaphore:
            await job()

    async with asyncio.TaskGroup() as group:
        for job in jobs:
            group.create_task(one(job))


async def _cleanup_step(step: Coroutine[Any, Any, Any], what: str,
                        seconds: float = 60.0) -> None:
    """Run one cleanup step for at most ``seconds``; a failure or a hang is reported on stderr
    and the next step runs all the same."""
    try:
        await asyncio.wait_for(step, seconds)
    except Exception as exc:
        print(f"bench: cleanup: {what} failed: {exc!r}", file=sys.stderr, flush=True)


async def settled(count: Callable[[], Awaitable[float]], quiet: float = 1.0,
                  timeout: float = 15.0) -> None:  # noqa: ASYNC109
    """Wait until a controller's request counter (``count``) has not moved for ``quiet``
    seconds, at most ``timeout`` (``Run.requests_settled`` says why)."""
    deadline = time.monotonic() + timeout
    last = await count()
    while time.monotonic() < deadline:
        await asyncio.sleep(quiet)
        now = await count()
        if now == last:
            return
        last = now


# CPU seconds so far of each process that serves a side's load (``Side.cpu``).
CpuSampler = Callable[[], dict[str, float]]


def cpu_spent(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """CPU seconds per process between two samples (a process in only one of them, such as an
    operator started meanwhile, is left out)."""
    return {name: round(after[name] - before[name], 2) for name in after if name in before}


async def _timed(tracker: Tracker,
                 submit: Callable[[dict[str, float]], Coroutine[Any, Any, None]],
                 wait: Callable[[dict[str, float]], Coroutine[Any, Any, dict[str, float]]],
                 cpu: CpuSampler | None = None) -> Phase:
    """Submit and wait at once (a set may be done before the last one is submitted); a failed
    submission ends the phase with its error instead of a timeout.

    With ``cpu``, the phase also records the CPU seconds each process spent in it
    (``Side.cpu``): on this saturated machine a side's wall time follows the CPU its whole
    control plane burns, so the processes' shares tell where a ratio comes from.

    The first pod Ready is timed on the driver's clock, from the phase's first request (sent
    just after ``started`` records it) to the first watch event showing a Ready pod: the API
    server's timestamps have whole seconds only."""
    started: dict[str, float] = {}
    cpu_before = cpu() if cpu is not None else None
    begin = time.monotonic()
    first_point = len(tracker.timeline)
    none_ready = tracker.count(ready=True) == 0
    submitting = asyncio.create_task(submit(started))
    waiting = asyncio.create_task(wait(started))
    try:
        await asyncio.wait({submitting, waiting}, return_when=asyncio.FIRST_EXCEPTION)
        if submitting.done() and submitting.exception() is not None:
            raise submitting.exception()  # type: ignore[misc]
        per_set = await waiting
        await submitting
    finally:
        for task in (submitting, waiting):
            task.cancel()
    end = time.monotonic()
    spent = cpu_spent(cpu_before, cpu()) if cpu is not None and cpu_before is not None else None
    points = tracker.timeline[max(first_point - 1, 0):]
    timeline = [[round(max(t - begin, 0.0), 3), ready, rolled, existing]
                for t, ready, rolled, existing in points if t <= end + 1]
    first_ready = path = None
    if none_ready and started:
        first_request = min(started.values())
        first_ready = next((t - first_request for t, ready, _, _ in
                            tracker.timeline[first_point:] if ready > 0), None)
        path = {step: round(t - first_request, 3) for step, t in
                sorted(tracker.firsts.items(), key=lambda kv: kv[1]) if t >= first_request}
    return Phase(end - begin, per_set, timeline, first_ready, path, spent)


class Side:
    """The driver for one side (operator or baseline) in its own namespace."""

    def __init__(self, kube: Kube, namespace: str, profile: Profile, operator: bool) -> None:
        self.kube = kube
        self.namespace = namespace
        self.profile = profile
        self.operator = operator
        self.sets = [set_name(i) for i in range(profile.sets)]
        self.names = {name: pod_names(name, profile) for name in self.sets}
        self.tracker = Tracker(kube, namespace, rolled_image=ROLLED_IMAGE)
        # Samples the CPU seconds of the processes serving this side (set by ``Run``).
        self.cpu: CpuSampler | None = None

    async def _each_set(self, one: Callable[[str], Awaitable[None]]) -> None:
        """``one(set name)`` for every set, ``CONCURRENCY`` at a time."""
        await bounded([lambda n=name: one(n) for name in self.sets])  # type: ignore[misc]

    async def open(self) -> None:
        await self.kube.create({"apiVersion": "v1", "kind": "Namespace",
                                "metadata": {"name": self.namespace,
                                             "labels": {"lws-bench": "true"}}})
        await self.tracker.start()

    async def create(self) -> Phase:
        p = self.profile

        async def submit(started: dict[str, float]) -> None:
            async def one(name: str) -> None:
                started[name] = time.monotonic()
                objects = [leaderworkerset(name, p)] if self.operator else baseline(name, p)
                for obj in objects:
                    await self.kube.create(obj, self.namespace)
            await self._each_set(one)

        return await _timed(self.tracker, submit, lambda started: self.tracker.wait_sets(
            self.names, IMAGE, p.timeout, started), self.cpu)

    async def roll(self) -> Phase:
        p = self.profile

        async def submit(started: dict[str, float]) -> None:
            async def one(name: str) -> None:
                started[name] = time.monotonic()
                if self.operator:
                    await self.kube.patch(LWS_API, "LeaderWorkerSet", name,
                                          rolled_leaderworkerset_patch(), self.namespace,
                                          content_type=MERGE_PATCH)
                    return
                for sts in [name, *(f"{name}-{g}" for g in range(p.replicas))]:
                    await self.kube.patch("apps/v1", "StatefulSet", sts,
                                          rolled_statefulset_patch(), self.namespace,
                                          content_type=STRATEGIC_PATCH)
            await self._each_set(one)

        return await _timed(self.tracker, submit, lambda started: self.tracker.wait_sets(
            self.names, ROLLED_IMAGE, p.timeout, started), self.cpu)

    async def delete(self) -> Phase:
        p = self.profile

        async def submit(started: dict[str, float]) -> None:
            async def one(name: str) -> None:
                started[name] = time.monotonic()
                if self.operator:
                    await self.kube.delete(LWS_API, "LeaderWorkerSet", name, self.namespace)
                    return
                for sts in [name, *(f"{name}-{g}" for g in range(p.replicas))]:
                    await self.kube.delete("apps/v1", "StatefulSet", sts, self.namespace)
                await self.kube.delete("v1", "Service", name, self.namespace)
            await self._each_set(one)

        async def wait(_: dict[str, float]) -> dict[str, float]:
            await self.tracker.wait_empty(p.timeout)
            return {}

        return await _timed(self.tracker, submit, wait, self.cpu)

    async def statuses_settled(self, timeout: float) -> None:  # noqa: ASYNC109
        """Every LeaderWorkerSet reports all replicas ready and updated, and as many
        replicas as it asks for: the operator's last writes of the phase are behind it. The
        last is ``replicas`` falling back once a rollout's surge group is gone, a change of the
        counters alone, which the operator writes a few seconds later (``logic.status.pacing``):
        without waiting for it, it landed in the next phase's figures (the delete phase's one
        status write of a default run)."""
        deadline = time.monotonic() + timeout
        replicas = self.profile.replicas
        while True:
            items = await self.kube.list(LWS_API, "LeaderWorkerSet", self.namespace)
            if len(items) == len(self.sets) and all(
                    (lws.get("status") or {}).get(counter) == replicas
                    for lws in items
                    for counter in ("readyReplicas", "updatedReplicas", "replicas")):
                return
            if time.monotonic() > deadline:
                raise TimeoutError("LeaderWorkerSet statuses did not settle")
            await asyncio.sleep(0.5)

    async def close(self) -> None:
        await self.tracker.stop()
        with contextlib.suppress(Exception):
            await self.kube.delete("v1", "Namespace", self.namespace)


# ---------------------------------------------------------------------------- the run


async def preflight(client: KubeClient, kubeconfig: str, p: Profile) -> dict[str, Any]:
    """The cluster answers, the CRD is there, and the Ready nodes can hold every pod plus a
    surge group per set."""
    try:
        await client.raw("GET", "/readyz", timeout=10)
    except (TimeoutError, ApiException, OSError) as exc:
        raise BenchError(f"the cluster at {kubeconfig} does not answer: {exc}") from exc
    crd = await client.get("/apis/apiextensions.k8s.io/v1/customresourcedefinitions/"
                                "leaderworkersets.leaderworkerset.x-k8s.io")
    if crd is None:
        raise BenchError("the LeaderWorkerSet CRD is not installed")
    nodes = (await client.request("GET", "/api/v1/nodes"))["items"]
    ready = [n for n in nodes if not (n.get("spec") or {}).get("unschedulable") and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (n.get("status") or {}).get("conditions") or [])]
    capacity = sum(int(((n.get("status") or {}).get("allocatable") or {}).get("pods", 0))
                   for n in ready)
    needed = p.pods + p.sets * p.size * MAX_SURGE
    if capacity < needed:
        raise BenchError(f"{len(ready)} Ready nodes hold {capacity} pods; the profile needs "
                         f"{needed} ({p.pods} pods plus a surge group per set)")
    return {"ready_nodes": len(ready), "pod_capacity": capacity}


class Run:
    def __init__(self, options: Options, kube: Kube, client: KubeClient, kubeconfig: str,
                 upstream_binary: Path | None = None) -> None:
        self.options = options
        self.upstream_binary = upstream_binary
        self.kube = kube
        self.client = client
        self.kubeconfig = kubeconfig
        self.run_id = uuid.uuid4().hex[:6]
        self.stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
        self.round_suffix = ""  # "-2", "-3"... for the files of a repeated run's later rounds;
        # "-profiled" for the round py-spy records

    def next_round(self, index: int) -> None:
        """Round ``index`` (0-based) of a repeated run: namespaces and an operator of its own
        (the last round's are still being deleted), its own operator log."""
        if index:
            self.run_id = uuid.uuid4().hex[:6]
            self.round_suffix = f"-{index + 1}"

    def profiling_round(self) -> None:
        """The round after the measured ones, in which py-spy records the operator: namespaces
        and an operator of its own, its files named ``-profiled``."""
        self.run_id = uuid.uuid4().hex[:6]
        self.round_suffix = "-profiled"

    async def apiserver(self) -> Scrape:
        return figures.parse((await self.client.raw("GET", "/metrics")).decode())

    async def garbage_collector_ready(self, timeout: float = 120.0,  # noqa: ASYNC109
                                      tag: str = "gc") -> float:
        """Wait until kube-controller-manager's garbage collector watches LeaderWorkerSets.

        It discovers new resources every 30 s, so right after the CRD is installed a deleted
        LeaderWorkerSet's children linger for up to that long, which would be charged to the
        operator's delete phase. The probe: a ConfigMap owned by a LeaderWorkerSet must go
        when the LeaderWorkerSet does. Returns the seconds waited. ``tag`` names its namespace
        (a probe's namespace may still be going when the next probe starts)."""
        namespace = f"lws-bench-{tag}-{self.run_id}"
        started = time.monotonic()
        await ensure_namespace(self.client, namespace)
        try:
            while True:
                owner = await self.kube.create(leaderworkerset("gc-probe", replace(
                    self.options.profile, replicas=0)), namespace)
                await self.kube.create({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "gc-probe", "ownerReferences": [{
                        "apiVersion": LWS_API, "kind": "LeaderWorkerSet", "name": "gc-probe",
                        "uid": owner["metadata"]["uid"]}]}}, namespace)
                await self.kube.delete(LWS_API, "LeaderWorkerSet", "gc-probe", namespace)
                for _ in range(20):
                    if await self.kube.get("v1", "ConfigMap", "gc-probe", namespace) is None:
                        return round(time.monotonic() - started, 1)
                    await asyncio.sleep(0.25)
                if time.monotonic() - started > timeout:
                    raise BenchError("kube-controller-manager's garbage collector does not "
                                     "collect the children of LeaderWorkerSets")
                await self.kube.delete("v1", "ConfigMap", "gc-probe", namespace)
        finally:
            with contextlib.suppress(ApiException):
                await self.client.request("DELETE", f"/api/v1/namespaces/{namespace}")

    @staticmethod
    async def requests_settled(operator: ProfiledOperator, quiet: float = 1.0,
                               timeout: float = 15.0) -> None:  # noqa: ASYNC109
        """Wait until the operator has made no request besides leader election's for ``quiet``
        seconds (at most ``timeout``): its Events are written by background senders after the
        pass that recorded them (``kube.events``), so the Event of a phase's last status
        change could land after the driver saw that status and start the next window (one
        such Event made a steady window's only request). An operator that keeps writing is
        still caught: the wait ends at ``timeout`` and the next window counts the rest."""
        async def count() -> float:
            counts = targets.request_counts(figures.requests_by_verb(
                figures.parse(await operator.metrics())))
            return counts["counted"] if counts else 0  # every request but the Leases

        await settled(count, quiet, timeout)

    def _upstream_cpu_sampler(self, controller: UpstreamController) -> CpuSampler:
        """As ``_cpu_sampler``, with the upstream controller's process tree as ``upstream``."""
        def sample() -> dict[str, float]:
            out = webhook_latency.cpu_elsewhere(self.kubeconfig)
            with contextlib.suppress(OSError, ValueError, IndexError):
                out["upstream"] = controller.cpu()
            return out
        return sample

    def _cpu_sampler(self, operator: ProfiledOperator | None) -> CpuSampler:
        """The control plane's processes, this driver and the whole machine
        (``webhook_latency.cpu_elsewhere``), and the operator, its admission child and the
        py-spy recording it (``ProfiledOperator.profiler_cpu``)."""
        def sample() -> dict[str, float]:
            out = webhook_latency.cpu_elsewhere(self.kubeconfig)
            if operator is not None:
                with contextlib.suppress(OSError):
                    out |= webhook_latency.cpu_by_process(operator.operator.pid)
                spy = operator.profiler_cpu()
                if spy is not None:
                    out["py-spy"] = spy
            return out
        return sample

    async def run_baseline(self) -> dict[str, Any]:
        side = Side(self.kube, f"lws-bench-base-{self.run_id}", self.options.profile, False)
        side.cpu = self._cpu_sampler(None)
        try:
            await side.open()
            phases = {"create": await side.create(), "rollout": await side.roll(),
                      "delete": await side.delete()}
        finally:
            await _cleanup_step(side.close(), "deleting the baseline's namespace")
        return {"phases": phases}

    async def run_upstream(self) -> dict[str, Any]:
        """The upstream controller's side of a round: its CRDs (the garbage collector's grip on
        LeaderWorkerSets probed again after the switch), its webhooks and its process, the same
        phases and windows as ours; then its registrations gone and our CRDs back."""
        p, o = self.options.profile, self.options
        assert self.upstream_binary is not None
        assert o.upstream_dir is not None
        controller = UpstreamController(
            self.kubeconfig, self.client, o.upstream_dir, self.upstream_binary,
            o.results / f"scale-{self.stamp}-upstream{self.round_suffix}.log", self.run_id)
        side = Side(self.kube, f"lws-bench-up-{self.run_id}", p, True)
        side.cpu = self._upstream_cpu_sampler(controller)
        try:
            await controller.switch_crds()
            switched = time.monotonic()
            gc_up = await self.garbage_collector_ready(tag="gc-up")
            crds_seconds = round(time.monotonic() - switched - gc_up, 1)
            await controller.register()
            await controller.start()
            await side.open()
            await wait_until_admitting(self.client, side.namespace)
            memory_at_start = controller.memory()
            cpu, scrapes, servers = [controller.cpu()], [await controller.scrape()], \
                [await self.apiserver()]

            async def mark() -> None:
                cpu.append(controller.cpu())
                scrapes.append(await controller.scrape())
                servers.append(await self.apiserver())

            async def count() -> float:
                return figures.total(await controller.scrape(), "rest_client_requests_total")

            create = await side.create()
            await side.statuses_settled(p.timeout)
            await settled(count)
            await mark()  # 1: after create
            memory_after_create = controller.memory()
            await asyncio.sleep(p.steady_seconds)
            await mark()  # 2: after the steady window
            rollout = await side.roll()
            await side.statuses_settled(p.timeout)
            await settled(count)
            await mark()  # 3: after rollout
            delete = await side.delete()
            await mark()  # 4: after delete
            memory = controller.memory()
            code = await controller.stop()
        finally:
            await _cleanup_step(side.close(), "deleting the upstream side's namespace")
            await _cleanup_step(controller.stop(), "stopping the upstream controller")
            await _cleanup_step(controller.uninstall(),
                                "removing the upstream controller's webhooks, restoring our CRDs",
                                120.0)
        gc_back = await self.garbage_collector_ready(tag="gc-back")
        return {"phases": {"create": create, "rollout": rollout, "delete": delete},
                "crd_switch": {"switched": controller.crds_switched,
                               "restored": controller.crds_restored,
                               "garbage_collector_wait_seconds": gc_up,
                               "garbage_collector_wait_after_restore_seconds": gc_back,
                               "probe_seconds_less_wait": crds_seconds}} | \
            upstream.report(scrapes, servers, cpu, {"at_start": memory_at_start,
                                                    "after_create": memory_after_create,
                                                    "at_end": memory}, code, p.steady_seconds)

    async def run_operator(self, profiled: bool = False) -> dict[str, Any]:
        """The operator's side of a round; ``profiled``: py-spy records each phase (the
        profiling round, whose figures are not the measured ones)."""
        p, o = self.options.profile, self.options
        operator = ProfiledOperator.create(
            self.kubeconfig, self.run_id,
            o.results / f"scale-{self.stamp}-operator{self.round_suffix}.log",
            o.results if profiled else None, f"scale-{self.stamp}{self.round_suffix}", o.workers)
        side = Side(self.kube, f"lws-bench-op-{self.run_id}", p, True)
        side.cpu = self._cpu_sampler(operator)
        try:
            # The operator's home (its certificate Secret) exists before it starts, as the
            # chart creates it.
            await ensure_namespace(self.client, operator.namespace)
            await operator.start()
            await side.open()
            await wait_until_admitting(self.client, side.namespace)
            memory_at_start = operator.memory()
            await operator.profile_phase("create")
            cpu, scrapes, servers = [operator.cpu()], [figures.parse(await operator.metrics())], \
                [await self.apiserver()]

            async def mark(next_phase: str | None) -> None:
                """The figures at a phase's end; then the next phase's recording starts."""
                cpu.append(operator.cpu())
                scrapes.append(figures.parse(await operator.metrics()))
                servers.append(await self.apiserver())
                await operator.profile_phase(next_phase)

            create = await side.create()
            await side.statuses_settled(p.timeout)
            await self.requests_settled(operator)
            await mark("steady")  # 1: after create
            memory_after_create = operator.memory()
            await asyncio.sleep(p.steady_seconds)
            await mark("rollout")  # 2: after the steady window
            rollout = await side.roll()
            await side.statuses_settled(p.timeout)
            await self.requests_settled(operator)
            await mark("delete")  # 3: after rollout
            delete = await side.delete()
            await mark(None)  # 4: after delete
            memory = operator.memory()
            shared_memory = operator.shared_memory()
            code = await operator.stop()
        finally:
            # Each step bounded, and each runs whatever the one before did: an interrupted
            # run must leave no operator and no registration of its webhooks behind.
            await _cleanup_step(side.close(), "deleting the operator side's namespace")
            await _cleanup_step(operator.stop(), "stopping the operator")
            await _cleanup_step(self._remove_registrations(operator),
                                "removing the webhook registrations")
        return self._operator_report(
            {"create": create, "rollout": rollout, "delete": delete}, cpu, scrapes, servers,
            {"at_start": memory_at_start, "after_create": memory_after_create, "at_end": memory,
             "shared_at_end": shared_memory},
            code, operator)

    def _operator_report(self, phases: dict[str, Phase], cpu: list[float], scrapes: list[Scrape],
                         servers: list[Scrape], memory: dict[str, dict[str, float]],
                         code: int | None, operator: ProfiledOperator) -> dict[str, Any]:
        p = self.options.profile
        windows = {"create": (0, 1), "steady": (1, 2), "rollout": (2, 3), "delete": (3, 4)}
        ours = {w: figures.delta(scrapes[b], scrapes[a]) for w, (a, b) in windows.items()}
        theirs = {w: figures.delta(servers[b], servers[a]) for w, (a, b) in windows.items()}
        whole = figures.delta(scrapes[-1], scrapes[0])
        create_writes = figures.writes(ours["create"], exclude=EXCLUDED_FROM_CREATE_WRITES)
        webhook = figures.buckets(whole, "controller_runtime_webhook_latency_seconds",
                                  webhook=MUTATE_POD_PATH)
        apiserver_webhook = figures.buckets(
            figures.delta(servers[-1], servers[0]),
            "apiserver_admission_webhook_admission_duration_seconds", name="mpod.kb.io",
            type="admit")
        by_verb = {w: figures.requests_by_verb(d) for w, d in ours.items()}
        report: dict[str, Any] = {
            "phases": phases,
            "exit_code": code,
            "api_requests": by_verb,
            # The way of counting (see e2e.bench.targets): all but Leases, with Events,
            # certificate requests and status patches named.
            "api_requests_counted": {w: targets.request_counts(v) for w, v in by_verb.items()},
            "writes_on_create": {
                "total": create_writes,
                "per_set": round(create_writes / p.sets, 2),
                "per_group": round(create_writes / p.groups, 2),
                "target_per_set": 2 + p.replicas,
                "status_writes": figures.writes(ours["create"]) - figures.writes(
                    ours["create"], exclude=("leaderworkersets/status",)),
                "events": int(figures.total(ours["create"], "lws_operator_api_requests_total",
                                            verb="create", resource="events")),
            },
            "steady_state": {
                "seconds": p.steady_seconds,
                # Lease renewals are leader election's heartbeat (every retry period), not
                # writes to workloads: reported apart.
                "writes": figures.writes(ours["steady"], exclude=("leases",)),
                "lease_writes": figures.writes(ours["steady"]) - figures.writes(
                    ours["steady"], exclude=("leases",)),
                "requests": sum(figures.requests_by_verb(ours["steady"]).values()),
                "apiserver_operator_only_writes": sum(
                    c["apiserver"] for c in figures.cross_check(ours["steady"],
                                                                theirs["steady"]).values()),
            },
            "cross_check": figures.cross_check(whole, figures.delta(servers[-1], servers[0])),
            "cpu_seconds": {w: round(cpu[b] - cpu[a], 2) for w, (a, b) in windows.items()}
            | {"total": round(cpu[-1] - cpu[0], 2)},
            # Two ways (``TreeMemory.sample``): the RSS sum, which counts the pages the
            # operator and its admission child share twice, and the operator's RSS plus the
            # child's USS, each page once, as the pod's memory cgroup charges it; the targets
            # are held to the latter (docs/benchmark.md, "Memory").
            "memory_mib": {"at_start": memory["at_start"].get("rss"),
                           "after_create": memory["after_create"].get("rss"),
                           "at_end": memory["at_end"].get("rss"),
                           "peak_rss": memory["at_end"].get("peak_rss"),
                           "at_start_shared_once": memory["at_start"].get("rss_shared_once"),
                           "after_create_shared_once":
                               memory["after_create"].get("rss_shared_once"),
                           "at_end_shared_once": memory["at_end"].get("rss_shared_once"),
                           "peak_rss_shared_once": memory["at_end"].get("peak_rss_shared_once"),
                           # The webhooks' child process, counted in the figures above.
                           "admission_rss_at_end": memory["at_end"].get("admission_rss"),
                           "operator_rss_at_end": memory["at_end"].get("operator_rss"),
                           # The same pair by PSS and USS (``ProfiledOperator.shared_memory``).
                           "shared_at_end": memory["shared_at_end"]},
            "reconcile_time_seconds": figures.histogram_summary(
                figures.buckets(whole, "controller_runtime_reconcile_time_seconds")),
            # Time requests waited for a token of the client-side limiter (--kube-api-qps).
            "rate_limiter_wait_seconds": figures.histogram_summary(
                figures.buckets(whole, "rest_client_rate_limiter_duration_seconds")),
            "work_queue_wait_seconds": figures.histogram_summary(
                figures.buckets(whole, "workqueue_queue_duration_seconds")),
            "reconciles": {f"{c} {r}": int(n) for (c, r), n in figures.by_labels(
                whole, "controller_runtime_reconcile_total", ("controller", "result")).items()},
            "pod_webhook_ms": {
                **figures.histogram_summary(webhook, unit=0.001),
                "mean": figures.mean(whole, "controller_runtime_webhook_latency_seconds",
                                     unit=0.001, webhook=MUTATE_POD_PATH),
                "share_within_5ms": figures.share_within(0.005, webhook)},
            # kube-apiserver's view of the same calls: network and TLS included.
            "apiserver_pod_webhook_call_ms": {
                **figures.histogram_summary(apiserver_webhook, unit=0.001),
                "mean": figures.mean(figures.delta(servers[-1], servers[0]),
                                     "apiserver_admission_webhook_admission_duration_seconds",
                                     unit=0.001, name="mpod.kb.io", type="admit"),
                "share_within_5ms": figures.share_within(0.005, apiserver_webhook)},
        }
        if operator.profiling:
            report["flame_graphs"] = {phase: None if path is None else path.name
                                      for phase, path in operator.flame_graphs.items()}
            report["hotspots"] = {
                phase: figures.top_frames(figures.collapsed_from_flamegraph(path.read_text()))
                for phase, path in operator.flame_graphs.items() if path is not None}
        return report

    async def _remove_registrations(self, operator: ProfiledOperator) -> None:
        """A killed operator cannot remove its webhook registrations: do it for it."""
        mutating, validating = operator.configurations
        base = "/apis/admissionregistration.k8s.io/v1"
        for path in (f"{base}/mutatingwebhookconfigurations/{mutating}",
                     f"{base}/validatingwebhookconfigurations/{validating}",
                     f"/api/v1/namespaces/{operator.namespace}"):
            with contextlib.suppress(ApiException):
                await self.client.request("DELETE", path)

    async def webhook_at_rate(self) -> dict[str, Any]:
        """The pod webhook at ``--webhook-rate``: dry-run creates, the target's figure (the
        rate is reached and nothing else loads the machine), then the same rate of pods stored,
        scheduled and run, under ``stored`` (``webhook_latency`` says why both)."""
        o = self.options
        if o.webhook_rate <= 0:
            return {}
        results = []
        for dry_run in (True, False):
            try:
                results.append(await webhook_latency.bench(SimpleNamespace(  # type: ignore[arg-type]
                    rate=o.webhook_rate, duration=o.webhook_seconds, dry_run=dry_run),
                    self.kubeconfig))
            except (ApiException, TimeoutError) as exc:
                # A machine too loaded for the rate (a 504 from kube-apiserver) costs this
                # round its webhook figures, not the whole run its rounds.
                print(f"bench: the webhook run at rate failed: {exc!r}", file=sys.stderr,
                      flush=True)
                results.append({"error": repr(exc)[:500]})
        return results[0] | {"stored": results[1]}


def summarize(options: Options, preflight: dict[str, Any], base: dict[str, Any],
              op: dict[str, Any], at_rate: dict[str, Any], plot_name: str,
              up: dict[str, Any] | None = None) -> dict[str, Any]:
    """The JSON summary: phases as seconds and ratios, the operator's figures and, with an
    upstream side, its figures (``upstream``), its ratios to the baseline and ours over its
    (``vs_upstream``); the issue's table is added by ``with_table`` once the previous run is
    known."""
    b, o = base["phases"], op["phases"]
    ratios = {name: figures.ratio(o[name].seconds, b[name].seconds) for name in o}
    cpu_ratios = {name: figures.ratio((o[name].cpu or {}).get("machine"),
                                      (b[name].cpu or {}).get("machine")) for name in o}
    floors = {name: figures.floor_ratio(o[name].cpu, b[name].cpu) for name in o}
    op_report = {k: v for k, v in op.items() if k != "phases"}
    return {
        "benchmark": "scale",
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "profile": asdict(options.profile) | {"groups": options.profile.groups,
                                              "pods": options.profile.pods},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    **{k.lower(): v for k, v in versions().items()}},
        "cluster": preflight,
        "baseline": {name: phase.report() for name, phase in b.items()},
        "operator": {name: phase.report() for name, phase in o.items()} | op_report,
        "ratios": ratios,
        "machine_cpu_ratios": cpu_ratios,
        "floor_ratios": floors,
        "webhook_at_rate": at_rate,
        "plot": plot_name,
    } | _upstream_part(up, b)


def _upstream_part(up: dict[str, Any] | None, b: dict[str, Phase]) -> dict[str, Any]:
    """The upstream side's part of one round's summary (``summarize``); ``vs_upstream`` is
    added by ``with_versus`` once the whole summary is there."""
    if up is None:
        return {}
    u = up["phases"]
    return {
        "upstream": {name: phase.report() for name, phase in u.items()}
        | {k: v for k, v in up.items() if k != "phases"},
        "upstream_ratios": {name: figures.ratio(u[name].seconds, b[name].seconds)
                            for name in u},
        "upstream_machine_cpu_ratios": {name: figures.ratio(
            (u[name].cpu or {}).get("machine"), (b[name].cpu or {}).get("machine"))
            for name in u},
        "upstream_floor_ratios": {name: figures.floor_ratio(u[name].cpu, b[name].cpu)
                                  for name in u},
    }


def with_versus(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with ``vs_upstream`` (``compare.versus_upstream``) when it has an upstream
    side, and each controller's cost per pod (``per_pod``)."""
    out = summary | {"per_pod": {"ours": compare.per_pod(summary, "ours")}}
    versus = compare.versus_upstream(summary)
    if versus is not None:
        out["vs_upstream"] = versus
        out["per_pod"]["upstream"] = compare.per_pod(summary, "upstream")
    return out


def with_profile(summary: dict[str, Any], profiled: dict[str, Any] | None) -> dict[str, Any]:
    """``summary`` with the profiling round's flame graphs and hotspots in ``operator`` (as a
    single profiled round had them), and that round's own phases and CPU in
    ``profiled_round``: what the operator side cost with py-spy recording it, apart from the
    measured figures (module docstring)."""
    if profiled is None:
        return summary
    recorded = {k: profiled[k] for k in ("flame_graphs", "hotspots") if k in profiled}
    return summary | {
        "operator": summary["operator"] | recorded,
        "profiled_round": {"phases": {name: phase.report()
                                      for name, phase in profiled["phases"].items()},
                           "cpu_seconds": profiled["cpu_seconds"],
                           "exit_code": profiled["exit_code"]}}


def with_table(summary: dict[str, Any], history: Path) -> dict[str, Any]:
    """``summary`` with the issue's table (``targets``), compared with the newest run of the
    same size in ``history`` (named in ``previous_run``), the newest large run's memory
    (``large_profile``) and the newest default run's cost per pod (``default_profile``: a large
    run's must not exceed it)."""
    previous = targets.previous_run(history, summary)
    default = targets.newest_default_run(history)
    summary = summary | {"large_profile": targets.newest_large_run(history),
                         "default_profile": None if default is None else {
                             "run": default[0],
                             "per_pod": compare.per_pod(default[1], "ours")}}
    return summary | {"previous_run": None if previous is None else previous[0],
                      "targets": targets.table(summary, None if previous is None
                                               else previous[1])}


def write_results(summary: dict[str, Any], results: Path, stamp: str) -> Path:
    """``scale-<stamp>.json`` (copied to ``latest.json``) and ``history/<stamp>.json`` (without
    the pod timelines); the flame graphs copied to ``latest-<phase>.svg``. The summary's
    path."""
    path = results / f"scale-{stamp}.json"
    path.write_text(json.dumps(summary, indent=2) + "\n")
    shutil.copyfile(path, results / "latest.json")
    history = results / HISTORY
    history.mkdir(parents=True, exist_ok=True)
    (history / f"{stamp}.json").write_text(json.dumps(
        {k: v for k, v in summary.items() if k != "timelines"}, indent=2) + "\n")
    flames = summary["operator"].get("flame_graphs") or {}
    for phase in targets.PHASES:  # an earlier run's flame graph is not this run's
        (results / f"latest-{phase}.svg").unlink(missing_ok=True)
        if flames.get(phase) is not None:
            shutil.copyfile(results / flames[phase], results / f"latest-{phase}.svg")
    return path


def _short(figures_: Any, key: str) -> str:
    value = (figures_ or {}).get(key)
    return "-" if value is None else f"{value:.3g}"


def _round_upstream(r: dict[str, Any]) -> str:
    """One round's upstream figures and ours over them, for ``report_text``."""
    versus = r.get("vs_upstream")
    if not versus:
        return ""
    return (f"; upstream create/rollout {_short(r.get('upstream_seconds'), 'create')}/"
            f"{_short(r.get('upstream_seconds'), 'rollout')} s, first pod Ready "
            f"{r.get('upstream_first_ready_seconds')} s; ours/upstream create "
            f"{_short(versus, 'create.seconds')}, rollout {_short(versus, 'rollout.seconds')} "
            f"(bounds {_short(versus, 'create.zero_cpu_bound')}/"
            f"{_short(versus, 'rollout.zero_cpu_bound')}), first pod "
            f"{_short(versus, 'first_ready_s')}, peak memory "
            f"{_short(versus, 'peak_shared_once_mib')} (RSS sum {_short(versus, 'peak_rss_mib')})")


def report_text(summary: dict[str, Any], path: Path) -> str:
    """What stdout shows: the run, the issue's table, and where the rest is."""
    p = summary["profile"]
    flames = summary["operator"].get("flame_graphs")
    lines = [f"scale benchmark {summary['when']}: {p['pods']} pods ({p['sets']} sets x "
             f"{p['replicas']} replicas x {p['size']}), {summary['cluster'].get('ready_nodes')} "
             f"nodes, {summary['machine']['cpus']} CPUs",
             "API requests: every request of the operator but leader election's Lease requests "
             "(named apart); Events and certificate/webhook-configuration requests included.",
             "upstream now: the upstream controller measured in this run; upstream (issue) and "
             "issue: ours are the performance issue's figures (default profile, this machine "
             "class); every figure is better lower.", ""]
    rounds = summary.get("rounds") or []
    if rounds:
        lines += [f"{len(rounds)} rounds: each figure is the median of the rounds (the worst "
                  f"round for memory, the steady window and the exit code); timelines and plot "
                  f"are round {summary.get('middle_round')}'s (median rollout ratio)."]
        lines += [f"  round {i}: ratios create {_short(r['ratios'], 'create')}, rollout "
                  f"{_short(r['ratios'], 'rollout')} (rollout {_short(r['seconds'], 'rollout')} s, "
                  f"raw {_short(r['raw_seconds'], 'rollout')} s); first pod Ready "
                  f"{r['first_ready_seconds']} s (raw {r['raw_first_ready_seconds']} s); CPU "
                  f"create/rollout/delete {_short(r['cpu_seconds'], 'create')}/"
                  f"{_short(r['cpu_seconds'], 'rollout')}/{_short(r['cpu_seconds'], 'delete')} s"
                  + (f"; webhook p99 {r['webhook_p99_ms']} ms at {r['webhook_rate']}/s"
                     if r.get("webhook_p99_ms") is not None else "")
                  + (f" ({r['webhook_p99_stored_ms']} ms at {r['webhook_rate_stored']}/s "
                     "with the pods stored)" if r.get("webhook_p99_stored_ms") is not None
                     else "")
                  + _round_upstream(r)
                  for i, r in enumerate(rounds, 1)] + [""]
    lines += ["Each side (medians of the rounds; ours/upstream: the median of the rounds' "
              "ratios, below 1 is ours ahead):", compare.sides_table(summary), ""]
    lines += [targets.render(summary["targets"], summary.get("previous_run")), "",
              f"summary: {path}"]
    if flames:
        lines.append("flame graphs (a round of their own, not measured): " + ", ".join(
            f"{phase} {name or '(none)'}" for phase, name in flames.items()))
    return "\n".join(lines)


async def bench(options: Options, kubeconfig: str,
                upstream_binary: tuple[Path, str] | None = None) -> dict[str, Any]:
    client = await KubeClient.connect(kubeconfig)
    kube: Kube | None = None
    try:
        checks = await preflight(client, kubeconfig, options.profile)
        kube = await Kube.connect(kubeconfig)
        run = Run(options, kube, client, kubeconfig,
                  None if upstream_binary is None else upstream_binary[0])
        checks["garbage_collector_wait_seconds"] = await run.garbage_collector_ready()
        if options.kubeconfig is None:  # our own cluster: kwok's pod workers, one per node
            checks["kwok_pod_workers"] = pod_workers(own_layout(options.profile).total)
        # Per round: each side (raw, ours, upstream) and the webhook at rate. The at-rate figure
        # follows the machine's speed as much as the ratios do (a p99 of 4.1 ms one day, 8.0 ms
        # the next, for the same code), so each round measures it too and the summary takes the
        # median.
        runners = {"raw": run.run_baseline, "ours": run.run_operator,
                   "upstream": run.run_upstream}
        rounds: list[tuple[dict[str, Any], dict[str, Any], dict[str, Any] | None,
                           dict[str, Any]]] = []
        for index in range(options.repeat):
            run.next_round(index)
            # The order rotates per round: whatever the cluster carries from one side to the
            # next (etcd's history until compaction, kube-apiserver's caches, the page cache)
            # then favours no side over the rounds.
            order = compare.side_order(options.sides, index)
            print(f"[bench] {options.profile.pods} pods in {options.profile.sets} sets "
                  f"(round {index + 1} of {options.repeat}); order {', '.join(order)}",
                  file=sys.stderr, flush=True)
            done = {}
            for name in order:
                done[name] = await runners[name]()
            rounds.append((done["raw"], done["ours"], done.get("upstream"),
                           await run.webhook_at_rate()))
        profiled = None
        if options.py_spy:
            run.profiling_round()
            print("[bench] the measured rounds are done; now the operator once more, with "
                  "py-spy recording it", file=sys.stderr, flush=True)
            profiled = await run.run_operator(profiled=True)
        plot_name = f"scale-{run.stamp}.png"
        from e2e.bench.plot import plot

        summaries = [with_versus(summarize(options, checks, base, op, at_rate, plot_name, up))
                     for base, op, up, at_rate in rounds]
        middle = figures.middle_round(summaries)
        base, op, up, _ = rounds[middle]
        timelines = {key: {k: v.timeline for k, v in side["phases"].items()}
                     for key, side in (("baseline", base), ("operator", op), ("upstream", up))
                     if side is not None}
        plot(timelines, options.results / plot_name,
             f"{options.profile.pods} pods ({options.profile.sets} x {options.profile.replicas} "
             f"x {options.profile.size}): operator vs "
             + ("upstream vs " if up is not None else "") + "plain StatefulSets"
             + (f", round {middle + 1} of {len(rounds)}" if len(rounds) > 1 else ""))
        summary = with_profile(figures.combine_rounds(summaries, middle), profiled)
        summary["sides"] = list(options.sides)
        if upstream_binary is not None:
            summary["upstream_controller"] = {"sha256": upstream_binary[1],
                                              "source": str(options.upstream_dir)}
        summary["timelines"] = timelines
        summary = with_table(summary, options.results / HISTORY)
        path = write_results(summary, options.results, run.stamp)
        shutil.copyfile(options.results / plot_name, options.results / "latest.png")
        print(report_text(summary, path), flush=True)
        return summary
    finally:
        await client.close()
        if kube is not None:
            await kube.close()


# ---------------------------------------------------------------------------- command line


def parse_options(argv: list[str] | None) -> Options:
    parser = argparse.ArgumentParser(prog="python -m e2e.bench",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--profile", choices=sorted(PROFILES), default="default")
    parser.add_argument("--sets", type=int, help="LeaderWorkerSets (K)")
    parser.add_argument("--replicas", type=int, help="groups per LeaderWorkerSet (R)")
    parser.add_argument("--size", type=int, help="pods per group (S)")
    parser.add_argument("--nodes", type=int, help="kwok nodes of the benchmark's own cluster")
    parser.add_argument("--steady-seconds", type=float, help="the steady-state window")
    parser.add_argument("--timeout", type=float, help="seconds each phase may take")
    parser.add_argument("--kubeconfig", help="an existing full-tier cluster with the CRD "
                                             "(default: start one in --cluster-dir)")
    parser.add_argument("--cluster-dir", type=Path, default=REPO / ".cluster" / "bench")
    parser.add_argument("--keep-cluster", action="store_true")
    parser.add_argument("--py-spy", action=argparse.BooleanOptionalAction, default=True,
                        help="one more operator round, after the measured ones, with a py-spy "
                             "flame graph of the operator per phase (default: on; needs ptrace "
                             "permission)")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--webhook-rate", type=float, default=200.0,
                        help="pod admissions per second of the webhook run (0: skip it)")
    parser.add_argument("--webhook-seconds", type=float, default=10.0)
    parser.add_argument("--workers", type=int, default=DEFAULT_WORKERS,
                        help="the operator's --workers")
    parser.add_argument("--sides", default=None,
                        help="which sides run, comma-separated: raw (plain StatefulSets), ours "
                             "(the operator), upstream (the upstream Go controller); raw and "
                             "ours always (default: all three, or raw,ours when no upstream "
                             "controller is found)")
    parser.add_argument("--upstream-dir", type=Path, default=None,
                        help="the upstream controller's manager.xz, crds/ and webhook/ "
                             f"(default: ${upstream.ENV}, or shared/upstream-controller beside "
                             "the checkout)")
    parser.add_argument("--repeat", type=int, default=1,
                        help="rounds of baseline and operator, alternating; the summary gives "
                             "each figure's median (the worst round for memory, the steady "
                             "window and the exit code) and every round's main figures")
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in (("sets", args.sets), ("replicas", args.replicas),
                                   ("size", args.size), ("nodes", args.nodes),
                                   ("steady_seconds", args.steady_seconds),
                                   ("timeout", args.timeout)) if v is not None}
    profile = replace(PROFILES[args.profile], **overrides)
    try:
        profile.check()
        if args.workers < 1 or args.webhook_rate < 0 or args.webhook_seconds <= 0 \
                or args.repeat < 1:
            raise ValueError("--workers and --repeat must be >= 1, --webhook-rate >= 0, "
                             "--webhook-seconds > 0")
        if args.kubeconfig is not None and not Path(args.kubeconfig).is_file():
            raise ValueError(f"--kubeconfig {args.kubeconfig}: no such file")
        upstream_dir = args.upstream_dir or upstream.default_dir()
        if args.sides is None and upstream_dir is None:
            print(f"bench: no upstream controller found (--upstream-dir, ${upstream.ENV}): "
                  "running raw and ours only", file=sys.stderr)
        sides = compare.parse_sides(args.sides or ",".join(
            compare.SIDES if upstream_dir is not None else ("raw", "ours")))
        if "upstream" in sides:
            if upstream_dir is None:
                raise ValueError("no upstream controller found (--upstream-dir, or "
                                 f"${upstream.ENV}); --sides raw,ours leaves it out")
            upstream.check_dir(upstream_dir)
    except (ValueError, UpstreamError) as exc:
        parser.error(str(exc))
    return Options(profile, args.kubeconfig, args.cluster_dir, args.keep_cluster, args.py_spy,
                   args.results, args.webhook_rate, args.webhook_seconds, args.workers,
                   args.repeat, sides, upstream_dir if "upstream" in sides else None)


def own_layout(profile: Profile) -> NodeLayout:
    """The nodes of the cluster the benchmark starts for ``profile``."""
    return NodeLayout(gpu_nodes=max(profile.nodes - 4, 1), tpu_nodes=4)


async def _main(options: Options) -> dict[str, Any]:
    """The run as a task SIGTERM cancels (Ctrl-C already does), so cleanup runs either way."""
    task = asyncio.current_task()
    assert task is not None
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    cluster = None
    kubeconfig = options.kubeconfig
    if options.py_spy:
        try:
            await asyncio.to_thread(check_py_spy)
        except ProfilerError as exc:
            raise BenchError(str(exc)) from exc
    options.results.mkdir(parents=True, exist_ok=True)
    binary = None
    if options.upstream_dir is not None:  # unpacked once, before any cluster starts
        binary = await asyncio.to_thread(upstream.binary, options.upstream_dir)
    try:
        if kubeconfig is None:
            cluster = LocalCluster(options.cluster_dir)
            layout = own_layout(options.profile)
            print(f"[bench] starting a full-tier cluster with {layout.total} nodes in "
                  f"{options.cluster_dir}", file=sys.stderr, flush=True)
            await asyncio.to_thread(cluster.up, "full", layout, 0,
                                    120 + options.profile.nodes * 0.5)
            await asyncio.to_thread(cluster.install_crd)
            kubeconfig = str(cluster.kubeconfig)
        return await bench(options, kubeconfig, binary)
    finally:
        if cluster is not None and not options.keep_cluster:
            await asyncio.to_thread(cluster.down)


def main(argv: list[str] | None = None) -> int:
    options = parse_options(argv)
    try:
        asyncio.run(_main(options))  # prints the table; the JSON is in the results folder
    except (BenchError, UpstreamError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("bench: interrupted; what it created was deleted", file=sys.stderr)
        return 130
    except ApiException as exc:
        print(f"bench: API error {exc.status}: {status_message(exc)}", file=sys.stderr)
        return 1
    return 0
