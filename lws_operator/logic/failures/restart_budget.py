"""Restart budget and backoff (LWS docs, "Limit Automatic Group Recreation",
"Group Restart Backoff"):
whether a group that failed is recreated now, later, or stopped for good.

Both features read one counter per group and template revision, kept in the LeaderWorkerSet's
``leaderworkerset.sigs.k8s.io/group-restart-counts`` annotation as a JSON map
``{"<revision>/<group>": count}``. It lives on the LeaderWorkerSet, not on a pod, because the pods
of a recreated group are new objects; it is keyed by revision because a new template deserves a
fresh budget. The counter moves only when we recreate a group, and it is written *before* the
leader is deleted, so a recreation is never repeated beyond the budget (no restart storm). The
same write records, in ``leaderworkerset.sigs.k8s.io/group-restart-counted-leaders``
(``{"<revision>/<group>": "<leader uid>"}``), which leader incarnation the count was spent on: if
the operator dies before the deletion, the next pass sees the same failure of the same leader,
recreates the group without counting it again (a second count could exhaust a group that had
budget left), and a failure of any later incarnation counts as usual.

* ``maxGroupRestarts``: once a group's count reaches it, the next qualifying failure exhausts the
  group instead of recreating it: its pods are deleted (releasing their nodes) but kept as API
  objects by our cleanup finalizer, and the leader is marked ``group-restart-budget-exhausted``.
  A terminating leader pod keeps its StatefulSet from creating a successor, so nothing restarts
  until the user annotates that leader ``leaderworkerset.sigs.k8s.io/recover=true``: the group's
  count is cleared and the finalizers removed. Scale-down, a rollout replacing the group and
  LeaderWorkerSet deletion release the retained objects too, without clearing the count.
  Editing ``maxGroupRestarts`` does not recover anything: exhaustion is a fact recorded on the
  leader, not recomputed from the spec.
* ``restartBackoff``: a group is recreated only once its leader has existed for
  ``min(base * 2^count, cap)`` seconds; earlier, the recreation is deferred (and remembered by
  the caller, since a deleted worker's trigger is seen only once) with a ``GroupRestartBackoff``
  Event. Exhaustion is not deferred: stopping a group frees resources, it does not add load.

Without either field nothing is counted and the annotation is never written (upstream's
behaviour, and no write at all).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lws_operator.api.constants import (
    CONDITION_DEGRADED,
    EVENT_ACTION_DELETE,
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
    GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION,
    GROUP_RESTART_COUNTED_ANNOTATION,
    GROUP_RESTART_COUNTS_ANNOTATION,
    RECOVER_ANNOTATION,
)
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import (
    annotations_of,
    count_of,
    deleting,
    group_index,
    is_leader,
    lws_view,
    revision_of,
)
from lws_operator.logic.failures.restart import Recreation
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import epoch_seconds, meta_of

# The finalizer that keeps an exhausted group's pods as API objects after they stopped.
CLEANUP_FINALIZER = "leaderworkerset.sigs.k8s.io/cleanup"
REASON_BUDGET_EXCEEDED = "ReplicaRestartBudgetExceeded"
REASON_BUDGET_AVAILABLE = "RestartBudgetAvailable"
REASON_RESTART_BACKOFF = "GroupRestartBackoff"
REASON_GROUP_RECOVERED = "GroupRecovered"


def count_key(revision: str, group: str) -> str:
    return f"{revision}/{group}"


def _json_object(lws: LWS, annotation: str) -> dict[str, Any]:
    """A JSON-object annotation; missing or unreadable (edited by hand) reads as empty."""
    raw = lws_view(lws).annotations.get(annotation)
    if not raw:
        return {}
    try:
        decoded = json.loads(raw)
    except ValueError:
        return {}
    return decoded if isinstance(decoded, dict) else {}


def read_counts(lws: LWS) -> dict[str, int]:
    """The counter annotation; an unreadable value (edited by hand) counts as empty."""
    decoded = _json_object(lws, GROUP_RESTART_COUNTS_ANNOTATION)
    out: dict[str, int] = {}
    for key, value in decoded.items():
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            out[str(key)] = value
    return out


def render_counts(counts: Mapping[str, int] | Mapping[str, str]) -> str:
    """The annotation value: compact, keys sorted, as the LWS docs show it (``{"abc123/0":3}``)."""
    return json.dumps(dict(sorted(counts.items())), separators=(",", ":"))


def settled_counts(counts: Mapping[str, int], current_key: str,
                   replicas: int) -> dict[str, int] | None:
    """Ordinal mode, once an update is done (every group updated and ready on ``current_key``,
    no partition): the counts without those no group can spend again, or None when none go.

    Counts of other revisions go: no group is on them any more, and a group recreated from now on
    comes back on the current revision. Counts of group indices at or beyond ``replicas`` go: the
    group was scaled away, and a later scale-up starts with a fresh budget (as in Hash mode).
    Without this the annotation grew by a key for every group restarted in every rollout. It is
    not done mid-update: a group below a partition, or one being recreated, still spends the
    count of its old revision."""
    kept = {}
    for key, value in counts.items():
        revision, _, group = key.partition("/")
        if revision == current_key and group.isdigit() and int(group) < replicas:
            kept[key] = value
    return kept if len(kept) != len(counts) else None


def read_counted(lws: LWS) -> dict[str, str]:
    """The counted-leaders annotation (count key -> leader UID); unreadable counts as empty."""
    decoded = _json_object(lws, GROUP_RESTART_COUNTED_ANNOTATION)
    return {str(k): v for k, v in decoded.items() if isinstance(v, str) and v}


def counted_for(counts: Mapping[str, int], counted: Mapping[str, str]) -> dict[str, str]:
    """The counted leaders of the keys ``counts`` still holds (a cleared or moved count takes
    its record with it)."""
    return {k: v for k, v in counted.items() if k in counts}


@dataclass(frozen=True)
class RestartLimits:
    """The budget (None: unlimited) and backoff (None: none) of a LeaderWorkerSet."""

    max_restarts: int | None
    base_seconds: float | None
    cap_seconds: float | None

    @property
    def counting(self) -> bool:
        return self.max_restarts is not None or self.base_seconds is not None

    def delay(self, count: int) -> float:
        """min(base * 2^count, cap); 0 without backoff."""
        if self.base_seconds is None:
            return 0.0
        cap = self.cap_seconds if self.cap_seconds is not None else float("inf")
        # 2**count overflows no float for any sane count; cap it anyway.
        return float(min(self.base_seconds * 2.0 ** min(count, 64), cap))


def limits_of(lws: LWS) -> RestartLimits:
    """``maxGroupRestarts`` and ``restartBackoff`` as the view reads them (defaults there)."""
    view = lws_view(lws)
    backoff = view.restart_backoff
    if backoff is None:
        return RestartLimits(view.max_group_restarts, None, None)
    return RestartLimits(view.max_group_restarts, float(backoff.base_seconds),
                         float(backoff.cap_seconds))


@dataclass(frozen=True)
class Deferral:
    recreation: Recreation
    remaining: float
    count: int

    @property
    def note(self) -> str:
        return (f"Recreation of group {self.recreation.group} (pod {self.recreation.trigger} "
                f"failed) deferred by restart backoff: {self.remaining:.0f}s remaining, restart "
                f"count {self.count}")


@dataclass(frozen=True)
class RestartPlan:
    """What to do with this pass's recreations, in order: write ``counts`` and ``counted``
    (when not None, in one write), then exhaust and recreate; keep ``deferred`` for later and
    look again after ``requeue_after``."""

    recreate: list[Recreation] = field(default_factory=list)
    exhaust: list[Recreation] = field(default_factory=list)
    deferred: list[Deferral] = field(default_factory=list)
    counts: dict[str, int] | None = None
    requeue_after: float | None = None
    counted: dict[str, str] | None = None  # with ``counts``: the leaders they were spent on


def plan_restarts(lws: LWS, candidates: Iterable[Recreation],
                  now: float) -> RestartPlan:
    """Apply the budget and the backoff to the recreations the restart policy asks for."""
    limits = limits_of(lws)
    candidates = list(candidates)
    if not limits.counting:
        return RestartPlan(recreate=candidates)
    counts = read_counts(lws)
    counted = read_counted(lws)
    new_counts = dict(counts)
    new_counted = dict(counted)
    plan = RestartPlan(counts=None)
    requeue: float | None = None
    for recreation in candidates:
        key = count_key(recreation.revision, recreation.group)
        if key in counts and counted.get(key) == recreation.leader_uid:
            # Counted by a pass that did not get to delete this leader: finish it, uncounted.
            plan.recreate.append(recreation)
            continue
        count = counts.get(key, 0)
        if limits.max_restarts is not None and count >= limits.max_restarts:
            plan.exhaust.append(recreation)
            continue
        created = epoch_seconds(recreation.created) if recreation.created else None
        remaining = limits.delay(count) - (now - created) if created is not None else 0.0
        if remaining > 0:
            plan.deferred.append(Deferral(recreation, remaining, count))
            requeue = remaining if requeue is None else min(requeue, remaining)
            continue
        plan.recreate.append(recreation)
        new_counts[key] = count + 1
        new_counted[key] = recreation.leader_uid
    changed = new_counts != counts
    return RestartPlan(plan.recreate, plan.exhaust, plan.deferred,
                       new_counts if changed else None, requeue,
                       counted_for(new_counts, new_counted) if changed else None)


def still_pending(deferred: Iterable[Recreation], pods: Iterable[Mapping[str, Any]],
                  fresh: Iterable[Recreation]) -> list[Recreation]:
    """Recreations to consider this pass: this pass's, plus earlier deferred ones whose leader
    is still the same live incarnation (a deleted worker is seen once, and must not be
    forgotten while its group waits out the backoff)."""
    out = {r.leader_uid: r for r in fresh}
    live = {str(meta_of(p).get("uid")) for p in pods if is_leader(p) and not deleting(p)}
    for recreation in deferred:
        if recreation.leader_uid in live:
            out.setdefault(recreation.leader_uid, recreation)
    return list(out.values())


def exhausted(pod: Mapping[str, Any]) -> bool:
    annotations = annotations_of(pod)
    return str(annotations.get(GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION, "")).lower() == "true"


def exhaustion_note(recreation: Recreation, budget: int | None) -> str:
    return (f"Group {recreation.group} exhausted its restart budget (maxGroupRestarts {budget}) "
            f"after pod {recreation.trigger} failed: its pods are stopped and kept; annotate "
            f"leader pod {recreation.leader} with {RECOVER_ANNOTATION}=true to recover it")


def exhaustion_events(plan: RestartPlan, lws: LWS) -> list[tuple[Recreation, Event]]:
    budget = limits_of(lws).max_restarts
    return [(r, Event(REASON_BUDGET_EXCEEDED, EVENT_TYPE_WARNING, EVENT_ACTION_DELETE,
                      exhaustion_note(r, budget))) for r in plan.exhaust]


def backoff_event(deferral: Deferral) -> Event:
    return Event(REASON_RESTART_BACKOFF, EVENT_TYPE_NORMAL, EVENT_ACTION_DELETE, deferral.note)


def unfinished_exhaustions(pods: Iterable[Mapping[str, Any]]) -> list[Recreation]:
    """Leaders marked exhausted but not yet deleting (a pass that died half way): finish them."""
    out = []
    for pod in pods:
        meta = meta_of(pod)
        if is_leader(pod) and exhausted(pod) and not deleting(pod):
            out.append(Recreation(str(meta.get("name")), str(meta.get("uid")),
                                  str(meta.get("name")), _group_of(pod), revision_of(pod),
                                  str(meta.get("creationTimestamp") or "")))
    return out


@dataclass(frozen=True)
class Release:
    """Retained pods to let go: remove our finalizer from ``pods``; clear ``clear_counts``."""

    pods: list[Mapping[str, Any]] = field(default_factory=list)
    clear_counts: list[str] = field(default_factory=list)
    recovered: list[str] = field(default_factory=list)  # leader names, for the Event


def _group_of(pod: Mapping[str, Any]) -> str:
    return group_index(pod) or ""


def is_retained(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` carries our cleanup finalizer (its exhausted group retains it)."""
    return CLEANUP_FINALIZER in (meta_of(pod).get("finalizers") or [])


def plan_release(pods: Iterable[Mapping[str, Any]], *, replicas: int | None, current_key: str,
                 partition: int, deleting: bool = False, groups: Iterable[str] = ()) -> Release:
    """Which retained groups to release this pass.

    * The LeaderWorkerSet is being deleted (or is gone: ``deleting``): every retained pod.
    * A retained leader annotated ``recover=true``: its group, and its count is cleared.
    * Scale-down: a retained group whose index is at or above the leader StatefulSet's
      ``replicas`` (the StatefulSet would delete it, but it is already terminating).
    * Rollout: a retained group of another revision at or above the partition (the
      StatefulSet would replace it, but it is already terminating).
    * ``groups``: the groups the caller decided to release (Hash mode, whose groups have no
      ordinal: ``hash_groups.release_scaled_down``).
    """
    pods = list(pods)
    retained = [p for p in pods if is_retained(p)]
    if not retained:
        return Release()
    if deleting:
        return Release(retained)
    release_groups: set[str] = set(groups)
    clear: list[str] = []
    recovered: list[str] = []
    for leader in pods:
        if not is_leader(leader) or not exhausted(leader):
            continue
        group = _group_of(leader)
        index = count_of(group)
        revision = revision_of(leader)
        annotations = annotations_of(leader)
        if str(annotations.get(RECOVER_ANNOTATION, "")).lower() == "true":
            release_groups.add(group)
            clear.append(count_key(revision, group))
            recovered.append(str(meta_of(leader).get("name")))
        elif index is not None and (
                (replicas is not None and index >= replicas)  # scaled down
                or (revision != current_key and index >= partition)):  # rolled
            release_groups.add(group)
    # Retained pods of a group whose leader is gone already (released before) go too.
    leader_groups = {_group_of(p) for p in pods if is_leader(p)}
    return Release([p for p in retained if _group_of(p) in release_groups
                    or _group_of(p) not in leader_groups], clear, recovered)


def without_finalizer(pod: Mapping[str, Any]) -> list[str]:
    return [f for f in meta_of(pod).get("finalizers") or [] if f != CLEANUP_FINALIZER]


def degraded_condition(pods: Iterable[Mapping[str, Any]], observed: Iterable[Mapping[str, Any]],
                       generation: int, now: str) -> dict[str, Any] | None:
    """The ``Degraded`` condition: True while a retained leader is marked exhausted; False once
    none is (only if it was ever set, so LeaderWorkerSets that never ran out keep no such
    condition). None: leave the conditions as they are."""
    groups = sorted({_group_of(p) for p in pods if is_leader(p) and exhausted(p)},
                    key=lambda g: (len(g), g))
    before = next((c for c in observed if c.get("type") == CONDITION_DEGRADED), None)
    if groups:
        status, reason = "True", REASON_BUDGET_EXCEEDED
        plural = "s" if len(groups) != 1 else ""
        message = (f"{len(groups)} replica group{plural} exhausted the restart budget "
                   f"(group{plural} {', '.join(groups)}); annotate the retained leader pod with "
                   f"{RECOVER_ANNOTATION}=true to recover")
    elif before is None:
        return None
    else:
        status, reason = "False", REASON_BUDGET_AVAILABLE
        message = "No replica group has exhausted its restart budget"
    changed = before is None or before.get("status") != status
    return {"type": CONDITION_DEGRADED, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": now if changed or before is None
            else before.get("lastTransitionTime"),
            "observedGeneration": generation}


def apply_degraded(status: dict[str, Any], pods: Iterable[Mapping[str, Any]],
                   generation: int, now: str) -> dict[str, Any]:
    """The desired status with the ``Degraded`` condition in place."""
    conditions = [dict(c) for c in status.get("conditions") or []]
    condition = degraded_condition(pods, conditions, generation, now)
    if condition is None:
        return status
    for i, existing in enumerate(conditions):
        if existing.get("type") == CONDITION_DEGRADED:
            conditions[i] = condition
            break
    else:
        conditions.append(condition)
    return {**status, "conditions": conditions}
