"""The LeaderWorkerSet controller's wiring: watches, caches, work queue, reconciler, workers.

The watch layer (``kube.watch``) fills the caches and reports each event's owner; here that
owner's key goes into the work queue, and workers run the reconciler on the keys, only while
this process leads when leader election is on. Everything about listing, watching, relisting
and kopf's signal watches lives in ``kube.watch``; this module decides only which kinds the
LeaderWorkerSet controller watches and what it enqueues. When discovery finds the
DisaggregatedSet API served, the DisaggregatedSet controller (``controllers.
disaggregated_runtime``) runs beside it, gated by the same leader election.

The DisaggregatedSet controller is optional, and nothing of it may stop the LeaderWorkerSet
controller from starting: if it cannot start (a 403 or 404 while it primes its caches: RBAC
without its kinds, e.g. an older chart's, or its CRDs removed meanwhile) the error is logged
once, naming what failed, and the LeaderWorkerSet controller goes on (restarting the operator
after granting the permissions starts it). A failure after it started still ends the process,
as one of the LeaderWorkerSet controller's does (a restart with fresh caches is the recovery).

Its CRDs may be installed after the operator started (``helm upgrade`` does not install a
chart's new CRDs; ``kubectl apply -f crds/`` follows). When its API is not served at start, the
watches also watch its CustomResourceDefinition by name (``metadata.name`` field selector, so
one object, and RBAC may grant just that name): a watch costs no request while nothing
changes, and its events say when to look at discovery again. The role scaler's CRD cannot be
selected in the same watch (one field selector per kind), so after an event of the set's CRD
discovery is asked again every second for at most a minute until both are served (``kubectl
apply -f crds/`` creates the scaler's first); a scaler CRD installed later than that starts the
controller at the set CRD's next event or the operator's next start. Without the permission to
watch that CRD, the controller starts only with the operator, as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry

from lws_operator.api.constants import DEFAULT_WORKERS, GROUP, PLURAL, VERSION
from lws_operator.api.disaggregated import GROUP as DS_GROUP
from lws_operator.api.disaggregated import PLURAL as DS_PLURAL
from lws_operator.api.disaggregated import SCALER_PLURAL
from lws_operator.api.view import deleting
from lws_operator.controllers.disaggregated_runtime import DS_API, DisaggregatedSetRuntime
from lws_operator.controllers.leaderworkerset import LeaderWorkerSetReconciler
from lws_operator.controllers.shutdown import shut_down
from lws_operator.kube.api_served import ApiServed
from lws_operator.kube.cache import ClusterCache, Key
from lws_operator.kube.client import ApiException, KubeClient, is_status, status_message
from lws_operator.kube.events import EventRecorder
from lws_operator.kube.group_metrics import GroupMetrics
from lws_operator.kube.preflight import Permission, missing
from lws_operator.kube.watch import (
    NATIVE_SCHEDULING,
    SCHEDULING_API,
    VOLCANO,
    VOLCANO_API,
    WATCHED,
    Signal,
    Watches,
)
from lws_operator.kube.workers import Result, run_workers
from lws_operator.kube.workqueue import WorkQueue
from lws_operator.logic.reconcile.snapshot import PodWebhook
from lws_operator.logic.status.readiness import pod_running_and_ready
from lws_operator.logic.workloads import wakeups

log = logging.getLogger(__name__)

CONTROLLER = "leaderworkerset"

# The DisaggregatedSet CRD, watched by name while its API is not served (the module docstring).
DS_CRD = f"{DS_PLURAL}.{DS_GROUP}"
DS_CRD_SIGNAL: Signal = ("apiextensions.k8s.io", "v1", "customresourcedefinitions",
                         f"metadata.name={DS_CRD}")
DS_CRD_WATCH = tuple(Permission(verb, "apiextensions.k8s.io", "customresourcedefinitions",
                                name=DS_CRD) for verb in ("list", "watch"))
SERVED_RECHECK = 1.0  # seconds between discovery checks after an event of that CRD
SERVED_RECHECK_FOR = 60.0  # seconds: how long they go on
# How long a change of a set's children waits for the rest of its burst (``_changed``): a
# group's pods start, turn Ready and are deleted together, and each of their events used to make
# a pass of its own; the benchmark shows a pass per set per burst, not per event;
# short next to the API server's own pace (a StatefulSet's status follows its pods in batches).
CHILD_EVENT_WINDOW = 0.05
# How long the routine news of a worker pod or worker StatefulSet may wait for a pass
# (``logic.workloads.wakeups``): a second, short next to what it changes (status counters written up
# to ten seconds later, stalls judged over a minute) and long next to how often a set's workers
# report while its groups start.
WORKER_EVENT_WINDOW = 1.0


@dataclass(frozen=True)
class ControllerOptions:
    workers: int = DEFAULT_WORKERS
    list_chunk_size: int = 500
    # How long new-revision pods may stay unschedulable before a rollout is reported stalled.
    stall_grace_seconds: float = 60.0
    # "volcano": volcano PodGroups for LeaderWorkerSets without spec.scheduling (upstream's
    # pkg/schedulerprovider).
    scheduler_provider: str | None = None
    # Seconds a pass waits after the first event of a set's pods or StatefulSets (the events
    # meanwhile join it): ``ControllerRuntime._changed``.
    child_event_window: float = CHILD_EVENT_WINDOW
    # The same for an event of a worker pod or worker StatefulSet that no decision waits on
    # (``logic.workloads.wakeups``).
    worker_event_window: float = WORKER_EVENT_WINDOW


class ControllerRuntime:
    """Caches, queue, reconciler and the watches that feed them."""

    def __init__(self, kube: KubeClient, options: ControllerOptions,
                 registry: CollectorRegistry, *, gate: asyncio.Event | None = None,
                 admission: asyncio.Event | None = None) -> None:
        """``gate``: with leader election, set while this process holds the Lease; the
        workers reconcile only then (watches and caches run either way, so a standby takes
        over with warm caches).

        ``admission``: set once the operator's webhooks serve (``lws-operator run`` wires
        ``WebhookRuntime.serves``). No pass runs before: a pass creates StatefulSets, whose
        pods created before the pod webhook is registered would never be mutated (local mode
        removes its registrations on exit, so a set stored meanwhile meets a start with none).
        The watches and caches fill meanwhile, so the first passes start warm."""
        self.gate = gate
        self.admission = admission
        # The LeaderWorkerSet API, waited for at start (``kube.api_served``); readiness reads
        # ``api.served``.
        self.api = ApiServed(kube, GROUP, VERSION, PLURAL)
        self.kube = kube
        self.options = options
        self.metrics = registry
        self.cache = ClusterCache()
        self.queue: WorkQueue = WorkQueue(CONTROLLER, registry=registry)
        # Written in the background while ``run`` runs; the eviction guard records through it
        # too (``lws-operator run`` wires it).
        self.events = EventRecorder(kube, registry=registry)
        self.reconciler = LeaderWorkerSetReconciler(
            kube, self.cache, self.events, stall_grace=options.stall_grace_seconds,
            scheduler_provider=options.scheduler_provider)
        self.group_metrics = GroupMetrics.for_registry(registry)
        self.watches = Watches(kube, self.cache, registry, WATCHED, self._changed,
                               list_chunk_size=options.list_chunk_size)
        self.reconciler.caches_current = lambda: self.watches.current("Pod", "StatefulSet")
        # The DisaggregatedSet controller, when discovery finds its API served.
        self.disaggregated: DisaggregatedSetRuntime | None = None
        self._ds_crd_watched = False
        self._ds_crd_changed = asyncio.Event()

    def _changed(self, kind: str, event_type: str | None, owner: Key,
                 obj: Mapping[str, Any]) -> None:
        """An object of the LeaderWorkerSet ``owner`` changed (or the set itself): a pass. The
        set's own events and any deletion at once; the other events of its children join a
        pass ``child_event_window`` after the first of them (``WorkQueue.add_soon``), so a
        burst of pod events makes one pass instead of one per event that found the set
        idle. An event of a worker pod or a worker StatefulSet that no decision waits on
        (``logic.workloads.wakeups``: a worker created, bound or turning Ready, a worker StatefulSet
        counting its pods up) joins a pass ``worker_event_window`` after it instead, unless a
        prompt event brings that pass forward; so does a worker pod's deletion once its worker
        StatefulSet is gone or going (``wakeups.torn_down``: the group is being torn down).
        The worker whose readiness completes its StatefulSet (``wakeups.completes_workers``)
        wakes a pass at once, not even after the short window: its group is Ready, and in a
        rollout the next group's replacement waits for that pass (the benchmark's rollout
        trace shows that wait).

        A child of a set that is being deleted or gone wakes a pass only when that pass would
        have something to do with it (``LeaderWorkerSetReconciler.cleanup_due``): deleting a
        set of 40 pods brought 40 passes that decided nothing, one per pod deleted, most of the
        delete phase's passes."""
        if kind == "LeaderWorkerSet":
            self.queue.add(owner)
        elif self.cache.departing(owner):
            if self.reconciler.cleanup_due(owner, kind, event_type, obj):
                self.queue.add(owner)
        elif kind == "Pod" and self._torn_down(owner, event_type, obj):
            self.queue.add_soon(owner, self.options.worker_event_window)
        elif event_type == "DELETED":
            self.queue.add(owner)
        elif kind == "Pod" and wakeups.can_wait(obj):
            if self._completes(owner, obj):
                self.queue.add(owner)  # its group is Ready now: a rollout step waits on it
            else:
                self.queue.add_soon(owner, self.options.worker_event_window)
        elif kind == "StatefulSet" and wakeups.statefulset_can_wait(obj, owner[1]):
            self.queue.add_soon(owner, self.options.worker_event_window)
        else:
            self.queue.add_soon(owner, self.options.child_event_window)

    def pod_webhook_changed(self, hook: Mapping[str, Any] | None) -> None:
        """The admission runtime's view of our pod webhook changed (``admission.runtime.
        WebhookRuntime.pod_webhook``): its configuration entry while it serves, None while it
        does not. The sets with unmutated pods get a pass, which recreates them where the
        webhook serves them now (``logic.mutation.recreation``, after its settle time)."""
        self.reconciler.pod_webhook = (None if hook is None
                                       else PodWebhook(dict(hook), self.reconciler.clock()))
        keys = self.reconciler.with_unmutated_pods()
        log.info("pod webhook %s: %d LeaderWorkerSets with unmutated pods queued for a pass",
                 "serving" if hook is not None else "not serving", len(keys))
        for key in keys:
            self.queue.add(key)

    def _completes(self, owner: Key, pod: Mapping[str, Any]) -> bool:
        """Whether ``pod`` is running and Ready and completes its worker StatefulSet
        (``wakeups.completes_workers``, with the StatefulSet and its pods from the cache)."""
        if not pod_running_and_ready(pod):
            return False  # the common case, decided without a lookup
        sts_name = wakeups.controller_name(pod)
        if sts_name is None:
            return False
        pods = self.cache["Pod"]
        return wakeups.completes_workers(self.cache["StatefulSet"].get(owner[0], sts_name),
                                         lambda name: pods.get(owner[0], name))

    def _torn_down(self, owner: Key, event_type: str | None, pod: Mapping[str, Any]) -> bool:
        """``wakeups.torn_down`` with the pod's worker StatefulSet from the cache."""
        if event_type != "DELETED" and not deleting(pod):
            return False  # the common case, decided without a lookup
        sts_name = wakeups.controller_name(pod)
        sts = self.cache["StatefulSet"].get(owner[0], sts_name) if sts_name else None
        return wakeups.torn_down(pod, event_type, sts)

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
        if await self.watches.served(DS_API, DS_PLURAL, SCALER_PLURAL):
            self.disaggregated = self._new_disaggregated()
        elif await self._may_watch_ds_crd():
            self.watches.signal_on(DS_CRD_SIGNAL, self._ds_crd_event)
            self._ds_crd_watched = True
            log.info("disaggregatedset.x-k8s.io/v1 is not served: the DisaggregatedSet "
                     "controller starts once its CRDs are installed")
        self.watches.discovered()

    def _new_disaggregated(self) -> DisaggregatedSetRuntime:
        return DisaggregatedSetRuntime(
            self.kube, self.metrics, workers=self.options.workers,
            list_chunk_size=self.options.list_chunk_size, gate=self.gate)

    async def _may_watch_ds_crd(self) -> bool:
        try:
            denied = await missing(self.kube, DS_CRD_WATCH)
        except ApiException as exc:
            denied = list(DS_CRD_WATCH)
            log.debug("cannot check the permission to watch %s: %s", DS_CRD, exc.status)
        if denied:
            log.info("disaggregatedset.x-k8s.io/v1 is not served, and its CRD cannot be "
                     "watched (missing permissions: %s): the DisaggregatedSet controller "
                     "starts only if its CRDs are installed before the operator starts",
                     ", ".join(map(str, denied)))
        return not denied

    def _ds_crd_event(self, event_type: str | None, _crd: Any) -> None:
        """An event of the DisaggregatedSet CRD (kopf's listing included): look again."""
        if event_type != "DELETED":
            self._ds_crd_changed.set()

    async def _ds_served_soon(self, stop: asyncio.Event) -> bool:
        """Whether both DisaggregatedSet kinds are served, asked every ``SERVED_RECHECK``
        seconds for at most ``SERVED_RECHECK_FOR`` (a CRD is served a moment after it is
        created; the scaler's may come a moment after the set's)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SERVED_RECHECK_FOR
        while not stop.is_set():
            if await self.watches.served(DS_API, DS_PLURAL, SCALER_PLURAL):
                return True
            if loop.time() >= deadline:
                log.warning("the CRD %s exists but %s does not serve both %s and %s: the "
                            "DisaggregatedSet controller waits for the CRD's next change "
                            "(install crds/ whole)", DS_CRD, DS_API, DS_PLURAL, SCALER_PLURAL)
                return False
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), SERVED_RECHECK)
        return False

    async def _run_disaggregated(self, stop: asyncio.Event) -> None:
        """The DisaggregatedSet controller's life beside the LeaderWorkerSet controller's: wait
        for its API when it was not served at start (events of its CRD), then start it. Returns
        (at ``stop``) without it when it cannot start; raises if it fails once started."""
        while self.disaggregated is None:
            if not self._ds_crd_watched:
                await stop.wait()
                return
            changed = asyncio.ensure_future(self._ds_crd_changed.wait())
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait((changed, stopping), return_when=asyncio.FIRST_COMPLETED)
            changed.cancel()
            stopping.cancel()
            if stop.is_set():
                return
            self._ds_crd_changed.clear()
            if await self._ds_served_soon(stop):
                log.info("disaggregatedset.x-k8s.io/v1 is served now: starting the "
                         "DisaggregatedSet controller")
                self.disaggregated = self._new_disaggregated()
        try:
            await self.disaggregated.prime()
        except ApiException as exc:
            if not is_status(exc, 401, 403, 404):
                raise
            log.error("the DisaggregatedSet controller cannot start (%s %s); the "
                      "LeaderWorkerSet controller goes on without it (grant the operator the "
                      "DisaggregatedSet permissions of the chart's ClusterRole and restart it)",
                      exc.status, status_message(exc))
            self.disaggregated = None
            await stop.wait()
            return
        await self.disaggregated.run(stop)

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

    async def _admitting(self, stop: asyncio.Event, watching: asyncio.Future[Any]) -> bool:
        """Until the webhooks serve (True), or ``stop`` (False); at once without ``admission``
        (tests and embedders that run the webhooks themselves). The watches failing meanwhile
        is raised, as it is once the workers run."""
        if self.admission is not None and not self.admission.is_set():
            log.info("waiting for the webhooks to serve before reconciling")
            serving = asyncio.ensure_future(self.admission.wait())
            stopping = asyncio.ensure_future(stop.wait())
            try:
                await asyncio.wait((serving, stopping, watching),
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                serving.cancel()
                stopping.cancel()
            if watching.done():
                watching.result()
                raise RuntimeError("the watches stopped unexpectedly")
        if self.admission is not None and not stop.is_set():
            log.info("the webhooks serve: reconciling")
        return not stop.is_set()

    async def _reconcile(self, key: Key) -> Result:
        try:
            requeue = await self.reconciler.reconcile(key)
        finally:
            self.group_metrics.observe(key, self.cache)  # what the pass left, even on error
        return Result(requeue_after=requeue)

    async def run(self, stop: asyncio.Event) -> None:
        """Prime (every LeaderWorkerSet is then enqueued once), then run the watches and
        the workers until ``stop``; the Event senders run throughout and drain last."""
        async with self.events.sending():
            await self._run(stop)

    async def _run(self, stop: asyncio.Event) -> None:
        if not await self.api.wait(stop):
            return
        await self.discover()
        await self.watches.prime()
        self._enqueue_all()
        async with self.watches.running() as watching:
            if not await self._admitting(stop, watching):
                return
            workers = asyncio.create_task(run_workers(
                self.queue, self._reconcile, concurrency=self.options.workers,
                controller=CONTROLLER, registry=self.metrics, stop=stop, gate=self.gate))
            resync = asyncio.create_task(self._resync_on_leading(stop))
            stopping = asyncio.ensure_future(stop.wait())
            either: list[asyncio.Future[Any]] = [
                watching, stopping, asyncio.create_task(self._run_disaggregated(stop),
                                                        name="disaggregatedset-controller")]
            try:
                await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
                if watching.done():
                    watching.result()  # the watches ended on their own: that is an error
                    raise RuntimeError("the watches stopped unexpectedly")
                for other in either[2:]:
                    if other.done():
                        other.result()  # the DisaggregatedSet controller failed
                        if not stop.is_set():
                            raise RuntimeError("the DisaggregatedSet controller stopped")
            finally:
                await shut_down(stop, self.watches, self.queue, workers, stopping, resync)
                await asyncio.gather(*either[2:], return_exceptions=True)
