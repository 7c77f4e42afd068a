"""The ``lws_*`` group metrics: exported from the watch caches after every reconcile pass.

The derivations are ``logic.status.group_metrics``; this module owns the metric families, the memory
kept between passes per LeaderWorkerSet, and the removal of every series of a LeaderWorkerSet
that is gone (a deleted one must not keep reporting groups forever).

Families (labels ``namespace`` and ``name`` are the LeaderWorkerSet's):

* ``lws_groups{namespace,name,state}`` gauge: groups per state (see the logic module).
* ``lws_group_recreations_total{namespace,name,reason}`` counter: leader incarnations replaced.
* ``lws_group_ready_seconds{namespace,name}`` histogram: leader creation to group Ready.
* ``lws_rollout_step_duration_seconds{namespace,name}`` histogram: one partition step of a
  rolling update (the leader StatefulSet's partition or replicas held one value).
* ``lws_rollout_duration_seconds{namespace,name}`` histogram: UpdateInProgress True to False.
* ``lws_group_restart_budget_remaining{namespace,name,group}`` gauge, with maxGroupRestarts only.
* ``lws_rollout_in_progress{namespace,name}`` gauge: 1 while UpdateInProgress is True.
* ``lws_rollout_stalled{namespace,name}`` gauge: 1 while Progressing is False, RolloutStalled.
* ``lws_rollout_groups{namespace,name,state}`` gauge: ``desired`` (spec.replicas) and
  ``updated`` (status.updatedReplicas) groups.
* ``lws_rollout_deadline_exceeded{namespace,name}`` gauge: 1 while Progressing is False,
  ProgressDeadlineExceeded (``logic.rollout.deadline``).
* ``lws_rollout_rollbacks_total{namespace,name}`` counter: automatic rollbacks seen, a change of
  the set's ``rolled-back-from`` annotation while this process watched it (a restart starts
  from 0, as every counter here; one taken over from a replica is counted by whoever saw it).
* ``lws_disrupted_groups{namespace,name}`` gauge, with a group disruption budget only: the
  groups the budget counts as disrupted (``logic.disruption.budget``), after each pass and each
  eviction decision (which adds the groups of evictions just allowed).
* ``lws_evictions_total{namespace,name,decision}`` counter, with a budget only: evictions of
  the set's pods the budget ``allowed`` or ``refused`` (``admission.eviction``); both series
  exist at 0 from the first pass that sees the budget, so ``increase()`` counts the first
  eviction too (a counter's first sample is no increase).

Group metrics are per LeaderWorkerSet and group index, never per pod name: bounded by what the
user asked for, not by how many pods have ever existed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from lws_operator.api import disruption
from lws_operator.api.view import LeaderWorkerSetView, deleting, lws_view
from lws_operator.kube.cache import ClusterCache, Key
from lws_operator.kube.metrics import _once
from lws_operator.logic.disruption.budget import disrupted_groups
from lws_operator.logic.objects.meta import meta_of
from lws_operator.logic.status import group_metrics as derive

log = logging.getLogger(__name__)

# Seconds: a group takes from seconds (images cached) to many minutes (large images, gang
# scheduling, TPU slices).
GROUP_READY_BUCKETS = (1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0,
                       1800.0, 3600.0)
# The ``decision`` label values of ``lws_evictions_total`` (``admission.eviction``).
EVICTION_DECISIONS = ("allowed", "refused")
ROLLOUT_BUCKETS = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0,
                   7200.0, 14400.0)


class GroupMetrics:
    """Families created once per registry; ``observe`` after each pass of a key."""

    def __init__(self, registry: CollectorRegistry,
                 clock: Callable[[], float] = time.time) -> None:
        lws = ["namespace", "name"]
        self.groups = Gauge(
            "lws_groups", "Groups of a LeaderWorkerSet by state", [*lws, "state"],
            registry=registry)
        self.recreations = Counter(
            "lws_group_recreations_total",
            "Groups whose leader was replaced by a new incarnation, by reason",
            [*lws, "reason"], registry=registry)
        self.ready_seconds = Histogram(
            "lws_group_ready_seconds",
            "Seconds from a group's leader pod creation to the group being Ready",
            lws, buckets=GROUP_READY_BUCKETS, registry=registry)
        self.step_seconds = Histogram(
            "lws_rollout_step_duration_seconds",
            "Seconds one step of a rolling update (one leader partition value) took",
            lws, buckets=ROLLOUT_BUCKETS, registry=registry)
        self.rollout_seconds = Histogram(
            "lws_rollout_duration_seconds",
            "Seconds from UpdateInProgress turning True to it turning False",
            lws, buckets=ROLLOUT_BUCKETS, registry=registry)
        self.budget = Gauge(
            "lws_group_restart_budget_remaining",
            "Recreations a group may still have under maxGroupRestarts",
            [*lws, "group"], registry=registry)
        self.in_progress = Gauge(
            "lws_rollout_in_progress",
            "1 while a rolling update of the LeaderWorkerSet is under way (UpdateInProgress)",
            lws, registry=registry)
        self.stalled = Gauge(
            "lws_rollout_stalled",
            "1 while the rolling update is stalled (Progressing=False, reason RolloutStalled)",
            lws, registry=registry)
        self.deadline_exceeded = Gauge(
            "lws_rollout_deadline_exceeded",
            "1 while the rolling update is past its progress deadline and held (Progressing="
            "False, reason ProgressDeadlineExceeded)", lws, registry=registry)
        self.rollbacks = Counter(
            "lws_rollout_rollbacks_total",
            "Automatic rollbacks on an exceeded progress deadline", lws, registry=registry)
        self.rollout_groups = Gauge(
            "lws_rollout_groups",
            "Groups desired (spec.replicas) and on the current revision (updated)",
            [*lws, "state"], registry=registry)
        self.disrupted = Gauge(
            "lws_disrupted_groups",
            "Groups the group disruption budget counts as disrupted (not whole and Ready, or "
            "evicted a moment ago)", lws, registry=registry)
        self.evictions = Counter(
            "lws_evictions_total",
            "Evictions of the LeaderWorkerSet's pods decided by its group disruption budget",
            [*lws, "decision"], registry=registry)
        # Per key: every series of the set's that was set (family, label values), so that
        # ``forget`` removes them without rendering every family's samples (with 125 sets
        # deleted together, reading the families back from ``collect()`` for each took half
        # the operator's CPU of the delete phase).
        self._series: dict[Key, set[tuple[Gauge | Counter | Histogram, tuple[str, ...]]]] = {}
        self.clock = clock
        self._memory: dict[Key, derive.Memory] = {}
        self._budget_groups: dict[Key, set[str]] = {}
        # Per key: the rolled-back-from annotation last seen (a change is one rollback).
        self._rolled_back: dict[Key, str | None] = {}
        # Per key: the LeaderWorkerSet object and the cache's change marks of its pods and
        # StatefulSets that the last export read (``_unchanged``).
        self._read: dict[Key, tuple[object, int, int]] = {}
        # Per key: each group's last view and the objects it was derived from
        # (``logic.status.group_metrics.group_views``), for its live groups only.
        self._views: dict[Key, derive.Known] = {}
        # Per key: the LeaderWorkerSet object, the group views and the rollout view the last
        # export was derived from (``_observe`` skips an export that would repeat it).
        self._derived: dict[Key, tuple[object, tuple[list[derive.GroupView],
                                                      derive.RolloutView]]] = {}

    @classmethod
    def for_registry(cls, registry: CollectorRegistry) -> GroupMetrics:
        return _once(registry, cls, lambda: cls(registry))

    def observe(self, key: Key, cache: ClusterCache) -> None:
        """Export what the caches show of ``key`` now; never raises (metrics must not fail a
        pass)."""
        try:
            self._observe(key, cache)
        except Exception:
            log.exception("group metrics of %s/%s", *key)

    def _observe(self, key: Key, cache: ClusterCache) -> None:
        if not cache.synced:
            return
        namespace, name = key
        obj = cache["LeaderWorkerSet"].get(namespace, name)
        if obj is None or deleting(obj):
            self.forget(key)
            return
        read = (obj, cache["Pod"].changed(key), cache["StatefulSet"].changed(key))
        if key in self._memory and self._unchanged(key, read):
            return
        lws = lws_view(obj)  # built once, handed to every derivation
        pods = cache["Pod"].owned_by(key)
        statefulsets = cache["StatefulSet"].owned_by(key)
        views = derive.group_views(lws, pods, statefulsets, self._views.setdefault(key, {}))
        leader_sts = next((s for s in statefulsets if meta_of(s).get("name") == name), None)
        rollout_view = derive.rollout_view(lws, leader_sts)
        budget = disruption.budget_of(lws.annotations, lws.replicas)
        previous = self._memory.get(key)
        if previous is not None and budget is None and self._repeats(key, obj, views,
                                                                     rollout_view):
            self._read[key] = read
            return
        self._derived[key] = (obj, (views, rollout_view))
        memory, seen = derive.observe(previous, lws, views, rollout_view, self.clock())
        if previous is None:  # every reason's series from the start, so rates work
            for reason in derive.RECREATION_REASONS:
                self._child(self.recreations, namespace, name, reason)
        self._memory[key] = memory
        self._export_groups(key, lws, views, seen)
        self._export_rollout(key, lws)
        self._export_restart_budgets(key, lws, views)
        self._export_disruption_budget(key, lws, pods, budget)
        self._read[key] = read

    def _repeats(self, key: Key, obj: object, views: list[derive.GroupView],
                 rollout_view: derive.RolloutView) -> bool:
        """Whether a change moved no group's view (a worker's status) of the same set object: the
        derivations would repeat the last export's values and see no transition."""
        derived = self._derived.get(key)
        return derived is not None and derived[0] is obj and derived[1] == (views, rollout_view)

    def _export_groups(self, key: Key, lws: LeaderWorkerSetView, views: list[derive.GroupView],
                       seen: derive.Observations) -> None:
        """The groups by state, and what the pass saw happen to them (recreations, a group
        becoming Ready, a rollout step or a whole rollout ending)."""
        namespace, name = key
        for state, count in derive.state_counts(lws, views).items():
            self._child(self.groups, namespace, name, state).set(count)
        for reason in seen.recreations:
            self._child(self.recreations, namespace, name, reason).inc()
        for seconds in seen.ready_seconds:
            self._child(self.ready_seconds, namespace, name).observe(seconds)
        for seconds in seen.step_seconds:
            self._child(self.step_seconds, namespace, name).observe(seconds)
        for seconds in seen.rollout_seconds:
            self._child(self.rollout_seconds, namespace, name).observe(seconds)

    def _export_rollout(self, key: Key, lws: LeaderWorkerSetView) -> None:
        """The rollout's gauges from the set's conditions, and a rollback counted when the
        ``rolled-back-from`` annotation changes while this process watches."""
        namespace, name = key
        rollout = derive.rollout_gauges(lws)
        self._child(self.in_progress, namespace, name).set(int(rollout.in_progress))
        self._child(self.stalled, namespace, name).set(int(rollout.stalled))
        self._child(self.deadline_exceeded, namespace, name).set(int(rollout.deadline_exceeded))
        rollbacks = self._child(self.rollbacks, namespace, name)
        if key in self._rolled_back and rollout.rolled_back_from not in (
                None, self._rolled_back[key]):
            rollbacks.inc()
        self._rolled_back[key] = rollout.rolled_back_from
        self._child(self.rollout_groups, namespace, name, "desired").set(rollout.desired)
        self._child(self.rollout_groups, namespace, name, "updated").set(rollout.updated)

    def _export_restart_budgets(self, key: Key, lws: LeaderWorkerSetView,
                                views: list[derive.GroupView]) -> None:
        """Each group's remaining restarts; a group no longer reported loses its series."""
        namespace, name = key
        remaining = derive.budget_remaining(lws, views)
        for group in self._budget_groups.get(key, set()) - set(remaining):
            self._remove(self.budget, namespace, name, group)
        for group, value in remaining.items():
            self._child(self.budget, namespace, name, group).set(value)
        self._budget_groups[key] = set(remaining)

    def _export_disruption_budget(self, key: Key, lws: LeaderWorkerSetView,
                                  pods: list[dict[str, Any]], budget: int | None) -> None:
        """The groups the disruption budget counts as disrupted, with a budget only."""
        namespace, name = key
        if budget is None:
            self._remove(self.disrupted, namespace, name)
            return
        self._child(self.disrupted, namespace, name).set(
            len(disrupted_groups(pods, lws.replicas, lws.size, lws.hashed)))
        for decision in EVICTION_DECISIONS:  # from the start, so rates see the first one
            self._child(self.evictions, namespace, name, decision)

    def _unchanged(self, key: Key, read: tuple[object, int, int]) -> bool:
        """Whether the objects the last export of ``key`` read are still the cache's (the same
        LeaderWorkerSet object, no pod or StatefulSet of it changed): the derivations are pure
        and a repeated snapshot shows no transition, so exporting again would set the same
        values (a pass that wrote nothing, or only something these derivations do not read)."""
        before = self._read.get(key)
        return before is not None and before[0] is read[0] and before[1:] == read[1:]

    def _child(self, family: Gauge | Counter | Histogram, namespace: str, name: str,
               *more: str) -> Any:
        """``family.labels(namespace, name, *more)``, the series recorded for ``forget``."""
        labels = (namespace, name, *more)
        self._series.setdefault((namespace, name), set()).add((family, labels))
        return family.labels(*labels)

    def _remove(self, family: Gauge | Counter | Histogram, namespace: str, name: str,
                *more: str) -> None:
        """Remove the series ``family{namespace, name, *more}`` if it was set. Only a series
        that was set is removed: ``remove`` reads the environment through the Mapping ABC on
        every call (prometheus_client's multiprocess check), a cost every export of every set
        without a disruption budget would pay."""
        labels = (namespace, name, *more)
        series = self._series.get((namespace, name))
        if series is not None and (family, labels) in series:
            series.discard((family, labels))
            family.remove(*labels)

    def forget(self, key: Key) -> None:
        """Remove every series of ``key`` (the LeaderWorkerSet is gone or being deleted)."""
        self._read.pop(key, None)
        self._views.pop(key, None)
        self._derived.pop(key, None)
        self._rolled_back.pop(key, None)
        self._memory.pop(key, None)
        self._budget_groups.pop(key, None)
        for family, labels in self._series.pop(key, ()):
            family.remove(*labels)
