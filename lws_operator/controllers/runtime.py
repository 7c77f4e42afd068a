"""The LeaderWorkerSet controller's wiring: watches, caches, work queue, reconciler, workers.

The watch layer (``kube.watch``) fills the caches and reports each event's owner; here that
owner's key goes into the work queue, and workers run the reconciler on the keys, only while
this process leads when leader election is on. Everything about kopf, priming, resyncing and
the watch thread lives in ``kube.watch``; this module decides only which kinds the
LeaderWorkerSet controller watches and what it enqueues. When discovery finds the
DisaggregatedSet API served, the DisaggregatedSet controller (``controllers.
disaggregated_runtime``) runs beside it, gated by the same leader election.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from lws_operator.api.disaggregated import PLURAL as DS_PLURAL
from lws_operator.api.disaggregated import SCALER_PLURAL
from lws_operator.controllers.disaggregated_runtime import DS_API, DisaggregatedSetRuntime
from lws_operator.controllers.leaderworkerset import LeaderWorkerSetReconciler
from lws_operator.kube.cache import ClusterCache, Key
from lws_operator.kube.client import KubeClient
from lws_operator.kube.events import EventRecorder
from lws_operator.kube.group_metrics import GroupMetrics
from lws_operator.kube.watch import (
    NATIVE_SCHEDULING,
    SCHEDULING_API,
    VOLCANO,
    VOLCANO_API,
    WATCHED,
    Watches,
)
from lws_operator.kube.workers import Result, run_workers
from lws_operator.kube.workqueue import WorkQueue

log = logging.getLogger(__name__)

CONTROLLER = "leaderworkerset"


@dataclass(frozen=True)
class ControllerOptions:
    workers: int = 8
    list_chunk_size: int = 500
    # How long new-revision pods may stay unschedulable before a rollout is reported stalled.
    stall_grace_seconds: float = 60.0
    # "volcano": volcano PodGroups for LeaderWorkerSets without spec.scheduling (upstream's
    # pkg/schedulerprovider).
    scheduler_provider: str | None = None


class ControllerRuntime:
    """Caches, queue, reconciler and the watches that feed them."""

    def __init__(self, kube: KubeClient, options: ControllerOptions,
                 registry: CollectorRegistry, *, gate: asyncio.Event | None = None) -> None:
        """``gate``: with leader election, set while this process holds the Lease; the
        workers reconcile only then (watches and caches run either way, so a standby takes
        over with warm caches)."""
        self.gate = gate
        self.kube = kube
        self.options = options
        self.metrics = registry
        self.cache = ClusterCache()
        self.queue: WorkQueue = WorkQueue(CONTROLLER, registry=registry)
        self.reconciler = LeaderWorkerSetReconciler(
            kube, self.cache, EventRecorder(kube), stall_grace=options.stall_grace_seconds,
            scheduler_provider=options.scheduler_provider)
        self.group_metrics = GroupMetrics.for_registry(registry)
        self.watches = Watches(kube, self.cache, registry, WATCHED, self._changed,
                               list_chunk_size=options.list_chunk_size)
        # The DisaggregatedSet controller, when discovery finds its API served.
        self.disaggregated: DisaggregatedSetRuntime | None = None

    def _changed(self, _kind: str, owner: Key) -> None:
        """An object of the LeaderWorkerSet ``owner`` changed (or the set itself): a pass."""
        self.queue.add(owner)

    def _enqueue_all(self) -> int:
        """Every LeaderWorkerSet, and the owners of pods whose LeaderWorkerSet is gone (a
        retained pod's cleanup finalizer must still be removed after a restart)."""
        keys = {*self.cache["LeaderWorkerSet"].owners(), *self.cache["Pod"].owners()}
        for key in sorted(keys):
            if key[1]:
                self.queue.add(key)
        return len(keys)

    async def discover(self) -> None:
        """Watch the optional kinds the API server serves; the others stay empty (and synced),
        and LeaderWorkerSets that need them are told so in their status."""
        native = await self.watches.served(SCHEDULING_API, "workloads", "podgroups")
        if native:
            self.watches.watch_also(NATIVE_SCHEDULING)
        else:
            log.warning("scheduling.k8s.io/v1beta1 Workload and PodGroup are not served: "
                        "LeaderWorkerSets with spec.scheduling will wait (APINotAvailable)")
        self.reconciler.native_scheduling = native
        if self.options.scheduler_provider == "volcano":
            if await self.watches.served(VOLCANO_API, "podgroups"):
                self.watches.watch_also(VOLCANO)
            else:
                log.warning("scheduler provider volcano: the scheduling.volcano.sh/v1beta1 "
                            "PodGroup API is not served; no volcano PodGroups are created")
        self.watches.discovered()
        if await self.watches.served(DS_API, DS_PLURAL, SCALER_PLURAL):
            self.disaggregated = DisaggregatedSetRuntime(
                self.kube, self.metrics, workers=self.options.workers,
                list_chunk_size=self.options.list_chunk_size, gate=self.gate)
        else:
            log.info("disaggregatedset.x-k8s.io/v1 is not served: the DisaggregatedSet "
                     "controller does not run")

    async def _resync_on_leading(self, stop: asyncio.Event) -> None:
        """When this process becomes the leader, enqueue every LeaderWorkerSet: the keys a
        standby gathered cover what changed, this covers what the old leader left half done."""
        if self.gate is None:
            return
        await self.gate.wait()
        if stop.is_set():
            return
        queued = self._enqueue_all()
        log.info("leading: %d LeaderWorkerSets queued for a pass", queued)

    async def _reconcile(self, key: Key) -> Result:
        try:
            requeue = await self.reconciler.reconcile(key)
        finally:
            self.group_metrics.observe(key, self.cache)  # what the pass left, even on error
        return Result(requeue_after=requeue)

    async def run(self, stop: asyncio.Event) -> None:
        """Prime (every LeaderWorkerSet is then enqueued once), then run kopf's watches and
        the workers until ``stop``."""
        if not await self.watches.wait_for_crd(stop):
            return
        await self.discover()
        await self.watches.prime()
        self._enqueue_all()
        async with self.watches.running() as watching:
            workers = asyncio.create_task(run_workers(
                self.queue, self._reconcile, concurrency=self.options.workers,
                controller=CONTROLLER, registry=self.metrics, stop=stop, gate=self.gate))
            resync = asyncio.create_task(self._resync_on_leading(stop))
            stopping = asyncio.ensure_future(stop.wait())
            either: list[asyncio.Future[Any]] = [watching, stopping]
            if self.disaggregated is not None:
                either.append(asyncio.create_task(self.disaggregated.run(stop),
                                                  name="disaggregatedset-controller"))
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                if watching.done():
                    watching.result()  # kopf ended on its own: that is an error
                    raise RuntimeError("the kopf watchers stopped unexpectedly")
                for other in either[2:]:
                    if other.done():
                        other.result()  # the DisaggregatedSet controller ended: an error
                        raise RuntimeError("the DisaggregatedSet controller stopped")
            finally:
                stopping.cancel()
                resync.cancel()
                self.watches.halt()
                stop.set()
                self.queue.shutdown()
                await workers
                await asyncio.gather(*either[2:], return_exceptions=True)
