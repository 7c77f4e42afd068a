"""One reconcile pass of a DisaggregatedSet: observe from the caches, plan, carry the plan out.

The pass is one function (``logic.disaggregated.pipeline.reconcile``, upstream's Reconcile in
disaggregatedset_controller.go) run on the runner the LeaderWorkerSet controller shares
(``controllers.passes``): before each step this module builds the snapshot it reads
(``logic.disaggregated.snapshot.DsObserved``) from the DisaggregatedSet controller's own watch
caches, and the executor (``kube.executor``) carries out the plan the step returns. Writes
happen only where the cache shows a difference, so a pass over a set at rest issues no request.

Upstream's reconcile errors (a slice's failure, a foreign object at a child's name) do not stop
the other slices or the status write; the pass then fails with all of them joined, and the work
queue retries it with backoff (upstream returns the joined error).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lws_operator.api.disaggregated import API_VERSION, KIND, SCALER_KIND
from lws_operator.controllers.in_namespace import InNamespace
from lws_operator.controllers.passes import PassRunner, now_rfc3339
from lws_operator.kube.cache import ClusterCache, Key
from lws_operator.kube.executor import Executor
from lws_operator.kube.workers import RetryableError
from lws_operator.logic.disaggregated import pipeline
from lws_operator.logic.disaggregated.snapshot import DsObserved
from lws_operator.logic.objects.meta import meta_of

NOT_SYNCED_REQUEUE = 1.0
# While a child kind's watch is not open (a gap, a relisting), its cache may lag the set's:
# look again soon rather than decide on it.
WATCH_GAP_REQUEUE = 0.25
LWS = "LeaderWorkerSet"
SERVICE = "Service"
REVISION = "ControllerRevision"


class PassFailed(RetryableError):
    """Upstream's joined reconcile errors of one pass (the status was written first)."""


class DisaggregatedSetReconciler:
    """Reconciles one DisaggregatedSet per call; never twice at once for the same key (the work
    queue guarantees that)."""

    def __init__(self, executor: Executor, cache: ClusterCache,
                 now: Callable[[], str] = now_rfc3339) -> None:
        """``executor``: the plan executor writing through the API server (tests of the pass
        as a table hand in one that writes into a simulated world)."""
        self.executor = executor
        self.runner = PassRunner(executor)
        self.cache = cache
        self.now = now
        # Per set: what its snapshots are built from, while the cache has not changed for it
        # (the set object and the change marks of its children; dropped with the set).
        self.held: dict[Key, tuple[tuple[object, ...], tuple[Any, ...]]] = {}
        # Whether the watches of the children are open (the runtime wires ``Watches.current``).
        self.caches_current: Callable[[], bool] = lambda: True

    def observe(self, key: Key, collected: tuple[str, ...] = (),
                fetched: Mapping[str, dict[str, Any]] | None = None) -> DsObserved | None:
        """The snapshot a step reads; None when the set is gone or being deleted."""
        namespace, _name = key
        ds = self.cache[KIND].get(*key)
        if ds is None or meta_of(ds).get("deletionTimestamp"):
            self.held.pop(key, None)
            return None
        marks = (ds, *(self.cache[kind].changed(key)
                       for kind in (LWS, SERVICE, SCALER_KIND, REVISION)))
        held = self.held.get(key)
        if held is None or held[0][0] is not ds or held[0][1:] != marks[1:]:
            # Read again only when the cache changed for the set (``KindStore.changed``).
            held = self.held[key] = (marks, (
                {"apiVersion": API_VERSION, "kind": KIND, **ds},
                tuple(self.cache[LWS].owned_by(key)), tuple(self.cache[SERVICE].owned_by(key)),
                tuple(self.cache[SCALER_KIND].owned_by(key)),
                tuple(self.cache[REVISION].owned_by(key))))
        body, lws, services, scalers, revisions = held[1]
        return DsObserved(
            body=body, lws=lws, lws_named=InNamespace(self.cache[LWS], namespace),
            services=services, services_named=InNamespace(self.cache[SERVICE], namespace),
            scalers=scalers, scalers_named=InNamespace(self.cache[SCALER_KIND], namespace),
            now=self.now(), collected=collected, fetched=fetched or {}, revisions=revisions)

    async def reconcile(self, key: Key) -> float | None:
        """One pass; returns seconds after which to look again, or None. Raises
        ``PassFailed`` with upstream's joined errors after the status was written."""
        first = self.observe(key)
        if first is None:
            self.cache.forget_departed(key)  # garbage collection removes the children
            return None
        if not self.cache.synced:
            return NOT_SYNCED_REQUEUE
        if not self.caches_current():
            # After a watch gap the kinds catch up one by one: a new revision's LeaderWorkerSet
            # could show Ready from before the gap while its watch relists, and the coordinated
            # rollout would take an old role's capacity down on it. Decide once they are open.
            return WATCH_GAP_REQUEUE

        def observe(collected: tuple[str, ...],
                    fetched: Mapping[str, dict[str, Any]]) -> DsObserved | None:
            return self.observe(key, collected, fetched)

        slice_count = first.ds.slices
        ran = await self.runner.run(lambda run: pipeline.reconcile(run, slice_count), observe,
                                    lambda obs: obs.body, owner=("disaggregatedsets", key[1]))
        if ran.gone:
            return None
        # The pass's decided errors (``result``) are there unless the status write's conflict
        # ended it; the next pass, a second later, decides them again.
        errors = (*(ran.result or ()), *ran.collected)
        if errors:
            raise PassFailed("; ".join(errors))
        return ran.soonest
