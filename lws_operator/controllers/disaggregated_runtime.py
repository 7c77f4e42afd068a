"""The DisaggregatedSet controller's wiring: its watches, cache, work queue, reconciler, workers.

It runs beside the LeaderWorkerSet controller (``controllers.runtime`` starts it when discovery
finds the DisaggregatedSet API served, like the optional scheduling kinds), gated by the same
leader election. It watches DisaggregatedSets, their role scalers, and the LeaderWorkerSets,
Services and ControllerRevisions (the sets' revision history, ``logic.disaggregated.history``)
labelled with a set's name, into a cache of its own indexed by the owning set
(``kube.cache.ds_owner_key``: the name label, confirmed by a controller ownerReference); every
event of a child wakes its set.

Its watches are a second ``kube.watch.Watches``, over a cache of its own: the two
controllers select different LeaderWorkerSets (all of them; those of a set) and Services (the
LeaderWorkerSet name label; the set's name label). Scalers are watched without a selector, so a
foreign scaler at a scaler's name is seen (upstream's ``ScalerConflict``); they are few.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from lws_operator.api import constants as lws_api
from lws_operator.api.disaggregated import (
    GROUP,
    KIND,
    NAME_LABEL,
    PLURAL,
    SCALER_KIND,
    SCALER_PLURAL,
    VERSION,
)
from lws_operator.controllers.disaggregatedset import DisaggregatedSetReconciler
from lws_operator.controllers.shutdown import shut_down
from lws_operator.kube.cache import ClusterCache, Key, ds_owner_key
from lws_operator.kube.client import KubeClient
from lws_operator.kube.disaggregated_metrics import DisaggregatedSetMetrics
from lws_operator.kube.events import EventRecorder
from lws_operator.kube.executor import Executor
from lws_operator.kube.watch import Watch, Watches
from lws_operator.kube.workers import Result, run_workers
from lws_operator.kube.workqueue import WorkQueue
from lws_operator.logic.disaggregated import revision_data

log = logging.getLogger(__name__)

CONTROLLER = "disaggregatedset"
DS_API = f"/apis/{GROUP}/{VERSION}"
LWS_PATH = f"/apis/{lws_api.GROUP}/{lws_api.VERSION}/{lws_api.PLURAL}"

WATCHED: tuple[Watch, ...] = (
    (KIND, GROUP, VERSION, PLURAL, f"{DS_API}/{PLURAL}", None),
    (SCALER_KIND, GROUP, VERSION, SCALER_PLURAL, f"{DS_API}/{SCALER_PLURAL}", None),
    ("LeaderWorkerSet", lws_api.GROUP, lws_api.VERSION, lws_api.PLURAL, LWS_PATH, NAME_LABEL),
    ("Service", "", "v1", "services", "/api/v1/services", NAME_LABEL),
    ("ControllerRevision", "apps", "v1", "controllerrevisions", "/apis/apps/v1/controllerrevisions",
     revision_data.selector()),
)
KINDS = tuple(w[0] for w in WATCHED)
CHILD_KINDS = KINDS[1:]  # the set's own watch is no child's: its events are what wake a pass


class DisaggregatedSetRuntime:
    """Cache, queue, reconciler and the watches that feed them."""

    def __init__(self, kube: KubeClient, registry: CollectorRegistry, *, workers: int = 1,
                 list_chunk_size: int = 500, gate: asyncio.Event | None = None) -> None:
        self.gate = gate
        self.workers = workers
        self.metrics = registry
        self.cache = ClusterCache(KINDS, ds_owner_key)
        self.queue: WorkQueue = WorkQueue(CONTROLLER, registry=registry)
        self.events = EventRecorder(kube, controller=CONTROLLER, registry=registry)
        self.reconciler = DisaggregatedSetReconciler(
            Executor(kube, self.cache, self.events), self.cache)
        self.replica_metrics = DisaggregatedSetMetrics.for_registry(registry)
        self.watches = Watches(kube, self.cache, registry, WATCHED, self._changed,
                               owner_kind=KIND, list_chunk_size=list_chunk_size)
        self.reconciler.caches_current = lambda: self.watches.current(*CHILD_KINDS)
        self.primed = False

    def _changed(self, _kind: str, _event_type: str | None, owner: Key,
                 _obj: Mapping[str, Any]) -> None:
        """A child of the set ``owner`` changed (or the set itself): a pass. (Its children are
        few and their events rare next to a LeaderWorkerSet's pods: nothing to coalesce.)"""
        self.queue.add(owner)

    def _enqueue_all(self) -> int:
        keys = sorted(self.cache[KIND].owners())
        for key in keys:
            self.queue.add(key)
        return len(keys)

    async def _resync_on_leading(self, stop: asyncio.Event) -> None:
        """When this process becomes the leader, enqueue every set (what the old leader left
        half done)."""
        if self.gate is None:
            return
        await self.gate.wait()
        if not stop.is_set():
            log.info("leading: %d DisaggregatedSets queued for a pass", self._enqueue_all())

    async def _reconcile(self, key: Key) -> Result:
        try:
            requeue = await self.reconciler.reconcile(key)
        finally:
            self.replica_metrics.observe(key, self.cache)  # what the pass left, even on error
        return Result(requeue_after=requeue)

    async def prime(self) -> None:
        """Fill the caches (one LIST per kind) and enqueue every set once. An ``ApiException``
        here (a 403 where RBAC lacks the set's kinds) means the controller cannot start."""
        await self.watches.prime()
        self._enqueue_all()
        self.primed = True

    async def run(self, stop: asyncio.Event) -> None:
        """Prime the caches unless :meth:`prime` did, then run the watches and the workers
        until ``stop``; the Event senders run as long and drain last."""
        if not self.primed:
            await self.prime()
        async with self.events.sending(), self.watches.running() as watching:
            workers = asyncio.create_task(run_workers(
                self.queue, self._reconcile, concurrency=self.workers, controller=CONTROLLER,
                registry=self.metrics, stop=stop, gate=self.gate))
            resync = asyncio.create_task(self._resync_on_leading(stop))
            stopping = asyncio.ensure_future(stop.wait())
            try:
                either: list[asyncio.Future[Any]] = [watching, stopping]
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                if watching.done():
                    watching.result()
                    raise RuntimeError("the DisaggregatedSet watchers stopped unexpectedly")
            finally:
                await shut_down(stop, self.watches, self.queue, workers, stopping, resync)
