"""One reconcile pass of a LeaderWorkerSet: observe from the caches, plan, carry the plan out.

The upstream controller splits this work between an LWS controller and a pod controller; here one
pass per LeaderWorkerSet does both (docs/architecture.md: every child event wakes the owning LWS).
The pass is ``logic.leaderworkerset.pipeline.reconcile``, its pure steps run by the shared runner
(``controllers.passes``): before each step this module builds the snapshot it reads
(``logic.reconcile.snapshot.Observed``) from the watch caches, and the executor (``kube.executor``)
carries out the plan the step returns, storing each answer in the cache and applying each
action's error policy. What a plan asks to keep beyond the pass (``Remember``: the set's memory,
the tombstones still needed) is kept here. Writes happen only where the cache shows a
difference, so a pass over a LeaderWorkerSet at rest issues no request at all.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from lws_operator.controllers.in_namespace import InNamespace
from lws_operator.controllers.passes import PassRunner, now_rfc3339
from lws_operator.kube.cache import ClusterCache, Key
from lws_operator.kube.client import KubeClient
from lws_operator.kube.events import EventRecorder
from lws_operator.kube.executor import Executor, Outcome
from lws_operator.logic.failures.release_step import release_plan
from lws_operator.logic.failures.restart_budget import is_retained, plan_release
from lws_operator.logic.failures.termination import worker_sets_to_stop
from lws_operator.logic.failures.termination_step import stop_workers
from lws_operator.logic.leaderworkerset import pipeline
from lws_operator.logic.leaderworkerset.pipeline import Configuration
from lws_operator.logic.mutation import unmutated
from lws_operator.logic.objects.meta import meta_of
from lws_operator.logic.reconcile.memo import Memo
from lws_operator.logic.reconcile.plan import Plan
from lws_operator.logic.reconcile.snapshot import Memory, Observed, Options, PodWebhook, Remember
from lws_operator.logic.rollout.stall import DEFAULT_GRACE_SECONDS
from lws_operator.logic.status import pacing

NOT_SYNCED_REQUEUE = 1.0
# How soon a pass held back while a watch is not open looks again (``reconcile``): a stream the
# server ended is resumed at once, so most such waits are a moment long.
WATCH_GAP_REQUEUE = 0.25
# Seconds a count of the sets under way is used before it is counted again (``_options``).
UNDER_WAY_RECOUNT = 1.0
NO_MEMORY = Memory()


# The kinds a snapshot holds as tuples of a set's objects (``Held``).
_OWNED_KINDS = ("Pod", "StatefulSet", "Deployment", "ControllerRevision", "PodGroup")


class Held:
    """What the snapshots of one LeaderWorkerSet are built from, kept between steps and passes
    while the cache has not changed for the set (``KindStore.changed``): the body, its objects
    as tuples, the admitted pods (``logic.mutation.unmutated.split`` of every pod, every step, was
    a visible share of the controller's CPU) and the memo of facts derived from them
    (``logic.reconcile.memo``). Only the identity of what the cache holds is kept, so a pass sees
    exactly what it would see without it."""

    def __init__(self, cache: ClusterCache, namespace: str) -> None:
        self.lws: dict[str, Any] | None = None
        self.body: dict[str, Any] = {}
        self.stamps: tuple[int, ...] = ()
        self.owned: dict[str, tuple[dict[str, Any], ...]] = {}
        self.pods: tuple[dict[str, Any], ...] = ()
        self.services = InNamespace(cache["Service"], namespace)
        self.workloads = InNamespace(cache["Workload"], namespace)
        self.volcano_groups = InNamespace(cache["VolcanoPodGroup"], namespace)
        self.memo = Memo()
        # The snapshot's fields read from the cache (``logic.reconcile.snapshot.CACHED_FIELDS``), as
        # of the last ``refresh``.
        self.cached: dict[str, Any] = {}

    def refresh(self, cache: ClusterCache, key: Key, lws: dict[str, Any]) -> None:
        """Up to date with the cache: only what changed is read again."""
        if lws is not self.lws:
            self.lws = lws
            self.body = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                         **lws}
        stores = cache.stores
        stamps = (stores["Pod"].changed(key), stores["StatefulSet"].changed(key),
                  stores["Deployment"].changed(key), stores["ControllerRevision"].changed(key),
                  stores["PodGroup"].changed(key))  # in the order of _OWNED_KINDS
        if stamps == self.stamps and self.cached.get("body") is self.body:
            return
        for kind, stamp, before in zip(_OWNED_KINDS, stamps,
                                       self.stamps or (None,) * len(stamps), strict=True):
            if stamp != before:
                owned = tuple(cache[kind].owned_by(key))
                if kind == "Pod":
                    # Judged again only for pods that are not the very objects judged before
                    # (``logic.reconcile.memo.Memo.select``).
                    self.pods = self.memo.select("admitted pods", owned, _admitted)
                self.owned[kind] = owned
        self.stamps = stamps
        kinds = self.owned
        self.cached = {
            "body": self.body, "pods": self.pods, "all_pods": kinds["Pod"],
            "statefulsets": kinds["StatefulSet"], "deployments": kinds["Deployment"],
            "services": self.services, "revisions": kinds["ControllerRevision"],
            "pod_groups": kinds["PodGroup"], "workloads": self.workloads,
            "volcano_groups": self.volcano_groups, "memo": self.memo}


def _admitted(pod: dict[str, Any]) -> bool:
    """Whether the pod webhook admitted the pod (``logic.mutation.unmutated.split``)."""
    return not unmutated.missing_labels(pod)


class LeaderWorkerSetReconciler:
    """Reconciles one LeaderWorkerSet per call; safe to call for many keys concurrently, never
    twice at once for the same key (the work queue guarantees that)."""

    def __init__(self, kube: KubeClient, cache: ClusterCache, events: EventRecorder,
                 now: Callable[[], str] = now_rfc3339, clock: Callable[[], float] = time.time,
                 stall_grace: float = DEFAULT_GRACE_SECONDS,
                 scheduler_provider: str | None = None) -> None:
        self.executor = Executor(kube, cache, events)
        self.runner = PassRunner(self.executor)
        self.cache = cache
        self.now = now
        self.clock = clock
        self.stall_grace = stall_grace
        self.scheduler_provider = scheduler_provider
        # Whether the API server serves scheduling.k8s.io/v1beta1 Workload and PodGroup (set by
        # discovery when the runtime starts).
        self.native_scheduling = True
        # Per LeaderWorkerSet: what a pass remembers for the next
        # (``logic.reconcile.snapshot.Memory`` says what and why; bounded by the live pods).
        self.memory: dict[Key, Memory] = {}
        # Per LeaderWorkerSet: what its snapshots are built from (``Held``), dropped with it.
        self.held: dict[Key, Held] = {}
        # What the operator knows of its pod webhook (``pod_webhook_changed``), and the sets
        # whose unmutated pods are being recreated (``logic.mutation.recreation``'s global bound).
        self.pod_webhook: PodWebhook | None = None
        self.recreating: set[Key] = set()
        self._recreating = frozenset[Key]()
        self._last_options = Options(stall_grace, scheduler_provider, self.native_scheduling)
        # The sets under way (``Options.under_way``) and when they were last counted.
        self._under_way = 0
        self._under_way_counted = float("-inf")
        # Whether the watches of pods and StatefulSets are open (``kube.watch.Watches.current``;
        # ``lws-operator run`` wires it): see ``reconcile``.
        self.caches_current: Callable[[], bool] = lambda: True

    def observe(self, key: Key, tombstones: tuple[dict[str, Any], ...],
                collected: tuple[str, ...] = (),
                fetched: dict[str, dict[str, Any]] | None = None) -> Observed | None:
        """The snapshot a step reads; None when the LeaderWorkerSet is gone or deleting."""
        namespace, name = key
        lws = self.cache["LeaderWorkerSet"].get(namespace, name)
        if lws is None or meta_of(lws).get("deletionTimestamp"):
            return None
        held = self._held(key)
        held.refresh(self.cache, key, lws)
        return Observed.assemble(held.cached, tombstones, self.now(), self.clock(),
                                 self._options(), self.memory.get(key, NO_MEMORY), collected,
                                 fetched or {})

    def configuration(self, key: Key, lws: Mapping[str, Any]) -> Configuration:
        """Which steps a pass over the set ``lws`` runs (``logic.leaderworkerset.pipeline.
        Configuration``), answered once per set object and options (through the set's memo)."""
        options = self._options()
        return self._held(key).memo.get("configuration", (lws, options),
                                        lambda: pipeline.configuration(lws, options))

    def may_recreate(self, key: Key) -> bool:
        """Whether the recreation of unmutated pods (``logic.mutation.recreate_step``) may plan
        anything for the set ``key`` as it is cached now: only while the set has such pods or
        remembers a recreation, the step's own first test, answered from what the snapshot would
        be built from, without building it (nearly every pass has neither)."""
        memory = self.memory.get(key)
        if memory is not None and memory.recreation is not None:
            return True
        lws = self.cache["LeaderWorkerSet"].get(*key)
        if lws is None:
            return True  # its snapshot ends the pass
        held = self._held(key)
        held.refresh(self.cache, key, lws)
        return len(held.pods) != len(held.owned["Pod"])

    def _held(self, key: Key) -> Held:
        """What the snapshots of the set ``key`` are built from, held from its first pass on."""
        held = self.held.get(key)
        if held is None:
            held = self.held[key] = Held(self.cache, key[0])
        return held

    def _options(self) -> Options:
        options = self._last_options
        if self._recreating != self.recreating:
            self._recreating = frozenset(self.recreating)
        under_way = self._count_under_way()
        if (options.stall_grace, options.provider, options.native_scheduling,
                options.pod_webhook, options.recreating, options.under_way) != (
                self.stall_grace, self.scheduler_provider, self.native_scheduling,
                self.pod_webhook, self._recreating, under_way):
            options = self._last_options = Options(
                self.stall_grace, self.scheduler_provider, self.native_scheduling,
                self.pod_webhook, self._recreating, under_way)
        return options

    def _count_under_way(self) -> int:
        """The cached sets whose stored status says a create or a rollout is under way
        (``logic.status.pacing.in_progress``), recounted at most every ``UNDER_WAY_RECOUNT``
        seconds: the count stretches the status pacing's bound, which is tens of seconds, so a
        second-old count is as good as a fresh one and costs a pass nothing."""
        clock = self.clock()
        if not 0 <= clock - self._under_way_counted < UNDER_WAY_RECOUNT:
            self._under_way = sum(
                1 for lws in self.cache["LeaderWorkerSet"].objects()
                if pacing.in_progress(lws.get("status") or {}))
            self._under_way_counted = clock
        return self._under_way

    def with_unmutated_pods(self) -> list[Key]:
        """The sets whose cached pods the pod webhook did not all admit, as of their last
        pass, and those with a recreation in memory (``logic.mutation.recreation``): the sets a
        change of the pod webhook concerns."""
        keys = {key for key, held in self.held.items()
                if len(held.pods) != len(held.owned.get("Pod", ()))}
        keys.update(key for key, memory in self.memory.items() if memory.recreation is not None)
        return sorted(keys)

    async def reconcile(self, key: Key) -> float | None:
        """One pass; returns seconds after which to look again, or None."""
        lws = self.cache["LeaderWorkerSet"].get(*key)
        if lws is None or meta_of(lws).get("deletionTimestamp"):
            return await self._clean_up_after(key, lws)
        self.cache.forget_departed(key)
        if not self.cache.synced:
            return NOT_SYNCED_REQUEUE
        if not self.caches_current():
            # After a watch gap the kinds catch up one by one: a worker pod's deletion (its
            # StatefulSet deleted meanwhile, the garbage collector removing its pods) can show
            # while the cache still holds that StatefulSet, which would make the pod look like
            # a failed member of its group and recreate a healthy group. Decide once the
            # watches of pods and StatefulSets are open again; the tombstones wait.
            return WATCH_GAP_REQUEUE
        buried = self.cache.tombstones(key)
        tombstones = tuple(unmutated.split(buried)[0])

        def observe(collected: tuple[str, ...],
                    fetched: Mapping[str, dict[str, Any]]) -> Observed | None:
            return self.observe(key, tombstones, collected, dict(fetched) if fetched else None)

        def adopt(plan: Plan) -> None:
            if isinstance(plan.carry, Remember):
                self._remember(key, plan.carry.memory)

        def settle(plan: Plan, outcome: Outcome) -> None:
            carry = plan.carry
            if isinstance(carry, Remember) and carry.kept_tombstones is not None \
                    and not outcome.interrupted:
                # The failures step acted on the tombstones: only those that still trigger
                # something stay (``logic.failures.failures_step``).
                self.cache.drop_tombstones(key, {str(meta_of(t).get("uid")) for t in buried}
                                           - carry.kept_tombstones)

        config = self.configuration(key, lws)
        ran = await self.runner.run(
            lambda run: pipeline.reconcile(run, config, lambda: self.may_recreate(key)),
            observe, lambda obs: obs.body, adopt=adopt, settle=settle,
            owner=("leaderworkersets", key[1]))
        # The soonest any plan asked for, not the last plan's: a pass that ends early (the
        # release of retained pods) must keep what an earlier step asked for, such as the
        # progress deadline's recheck, which its ``prepare`` plans too.
        return None if ran.gone else ran.soonest

    def _remember(self, key: Key, memory: Memory) -> None:
        if memory.recreation is not None and memory.recreation.in_flight:
            self.recreating.add(key)
        else:
            self.recreating.discard(key)
        if memory == Memory():
            self.memory.pop(key, None)
        else:
            self.memory[key] = memory

    def cleanup_due(self, key: Key, kind: str, event_type: str | None,
                    obj: Mapping[str, Any]) -> bool:
        """Whether the event of a child ``obj`` of the LeaderWorkerSet ``key``, being deleted
        or gone, gives a pass something to do (``_clean_up_after``): a retained pod's finalizer
        to remove, or with Parallel a worker StatefulSet to delete. That pass acts on what is
        cached, whichever event woke it, so the set's own deletion brought one that (retried on
        failure) did whatever was due then, and only an event showing a child that needs it
        since (a retained pod, a worker StatefulSet not going) needs another. Once none of the
        set's pods and StatefulSets is left, its departed copy is forgotten, as that pass
        would. Only the event's object is read: the set's other children cost nothing per
        event."""
        stores = self.cache.stores
        if not stores["Pod"].changed(key) and not stores["StatefulSet"].changed(key):
            self.cache.forget_departed(key)  # none of its objects is left (``changed``: 0)
            return False
        if event_type == "DELETED":
            return False
        if kind == "Pod":
            return is_retained(obj)
        if kind == "StatefulSet":
            lws = stores["LeaderWorkerSet"].get(*key) or self.cache.departed(key)
            return bool(worker_sets_to_stop(lws, (), (obj,), lws_deleting=True))
        return False

    async def _clean_up_after(self, key: Key, lws: dict[str, Any] | None) -> float | None:
        """The LeaderWorkerSet is being deleted or gone: garbage collection removes its
        objects, except that retained pods need our finalizer removed, and Parallel stops the
        workers together with the leaders."""
        self.cache.take_tombstones(key)  # nothing to recreate; don't keep them around
        self.memory.pop(key, None)
        self.recreating.discard(key)
        self.held.pop(key, None)
        if not self.cache.synced:
            return NOT_SYNCED_REQUEUE
        pods = self.cache["Pod"].owned_by(key)
        statefulsets = self.cache["StatefulSet"].owned_by(key)
        if not pods and not statefulsets:
            self.cache.forget_departed(key)
            return None
        regarding = lws or self.cache.departed(key) or {}
        await self.executor.execute(stop_workers(
            key[0], lws or self.cache.departed(key), pods, statefulsets, lws_deleting=True),
            regarding)
        release = plan_release(pods, replicas=None, current_key="", partition=0, deleting=True)
        if not release.pods:
            return None
        return (await self.executor.execute(release_plan(None, release), regarding)).requeue_after
