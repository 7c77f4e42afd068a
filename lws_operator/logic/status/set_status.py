"""The LeaderWorkerSet's status: group counters, conditions and their Events (upstream's
updateStatus (leaderworkerset_controller.go)).

Status is what users, `kubectl get lws`, HPA (through the scale subresource) and GitOps health
checks read, so its numbers and condition transitions must match upstream's exactly. This module
computes the whole desired status from one observed snapshot and the clock value handed in (it
never reads the clock), plus the Event for a changed condition and the "update done" flag that
lets the controller prune old ControllerRevisions. The caller writes the status only when it
differs from the observed one.

Counting (upstream's rules, kept): a leader pod counts only if, for size > 1, its worker
StatefulSet (looked up by the pod's name) exists; surge groups count toward readyReplicas and
updatedReplicas, but only ordinals below spec.replicas decide the conditions, and of those only
ordinals at or above the user's partition decide whether the update is done. A leader pod with a
missing or non-numeric group-index label fails the pass (`StatusError`), as upstream's does.

Conditions: exactly one of [UpdateInProgress, Progressing], [Available] or [Progressing] is
chosen and applied with status True. Available excludes Progressing and UpdateInProgress (a True
one is flipped to False, keeping its reason and message); Progressing and UpdateInProgress do not
exclude each other, so UpdateInProgress stays True after a rollout's groups are all updated and
until Available turns it False (quirk kept). A chosen condition whose status or
observedGeneration differs is replaced whole, so its lastTransitionTime moves on a generation
change even when its status does not (quirk kept). Finally every condition's observedGeneration
is raised to the current generation.

Deliberate differences:
* Upstream stops applying the chosen conditions after the first one that changes (a
  short-circuited `||`), so [UpdateInProgress, Progressing] takes two passes to land. We apply
  both in one pass; the converged status is the same.
* A condition flipped to False that lacks a reason or message (written by someone else) gets the
  standard ones for its type, since the CRD rejects a condition without them.
"""

from __future__ import annotations

import copy
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from lws_operator.api.constants import (
    CONDITION_AVAILABLE,
    CONDITION_PROGRESSING,
    CONDITION_UPDATE_IN_PROGRESS,
    EVENT_ACTION_UPDATE,
    EVENT_TYPE_NORMAL,
    GROUP_INDEX_LABEL,
    MESSAGE_ALL_GROUPS_READY,
    MESSAGE_GROUPS_PROGRESSING,
    MESSAGE_GROUPS_UPDATING,
    NAME_LABEL,
    REASON_ALL_GROUPS_READY,
    REASON_GROUPS_PROGRESSING,
    REASON_GROUPS_UPDATING,
    WORKER_INDEX_LABEL,
)
from lws_operator.api.view import (
    LEADER_INDEX,
    LeaderWorkerSetView,
    StatefulSetView,
    deleting,
    is_leader,
    lws_view,
)
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.logic.identity.keys import parse_int
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import host_name, meta_of
from lws_operator.logic.status.readiness import group_ready, group_updated, revision_key

# The reason and message each condition type is written with (upstream's conditions
# (leaderworkerset_types.go)).
CONDITION_TEXT: Final[Mapping[str, tuple[str, str]]] = {
    CONDITION_AVAILABLE: (REASON_ALL_GROUPS_READY, MESSAGE_ALL_GROUPS_READY),
    CONDITION_PROGRESSING: (REASON_GROUPS_PROGRESSING, MESSAGE_GROUPS_PROGRESSING),
    CONDITION_UPDATE_IN_PROGRESS: (REASON_GROUPS_UPDATING, MESSAGE_GROUPS_UPDATING),
}

_EXCLUSIVE: Final = frozenset(
    {
        frozenset({CONDITION_AVAILABLE, CONDITION_PROGRESSING}),
        frozenset({CONDITION_AVAILABLE, CONDITION_UPDATE_IN_PROGRESS}),
    }
)


class StatusError(ValueError):
    """The observed objects do not allow computing a status this pass (the controller retries)."""


@dataclass(frozen=True)
class GroupCounts:
    """The counters of upstream's updateStatus. "non-burst" means ordinal < spec.replicas;
    "partitioned" additionally means ordinal >= the user's partition."""

    ready: int = 0
    updated: int = 0
    ready_non_burst: int = 0
    partitioned_current_non_burst: int = 0
    partitioned_updated_non_burst: int = 0
    partitioned_updated_and_ready: int = 0


@dataclass(frozen=True)
class StatusDecision:
    """The full desired status, whether it differs from the observed one, the Events to record
    with the write, and whether the rollout is done (prune revisions other than the current)."""

    status: dict[str, Any]
    changed: bool
    events: tuple[Event, ...]
    update_done: bool


def hpa_pod_selector(lws_name: str) -> str:
    """The label selector HPA uses through the scale subresource: leader pods only."""
    return f"{NAME_LABEL}={lws_name},{WORKER_INDEX_LABEL}={LEADER_INDEX}"


def count_groups(
    lws_name: str,
    replicas: int,
    size: int,
    lws_partition: int,
    current_key: str,
    leader_pods: Iterable[Mapping[str, Any]],
    worker_statefulsets: Iterable[Mapping[str, Any]],
    confirmed: Collection[str] = (),
) -> GroupCounts:
    """Count groups from the observed leader pods and worker StatefulSets (upstream's updateStatus
    (leaderworkerset_controller.go)); ``confirmed``: the worker StatefulSets ready by their pods
    (``readiness.confirmed_by_pods``)."""
    workers = {meta_of(sts).get("name"): sts for sts in worker_statefulsets}
    ready = updated = ready_non_burst = current = current_updated = current_updated_ready = 0
    for pod in leader_pods:
        meta = meta_of(pod)
        labels = meta.get("labels") or {}
        if labels.get(NAME_LABEL) != lws_name or not is_leader(pod):
            continue
        raw_index = labels.get(GROUP_INDEX_LABEL)
        try:
            index = parse_int(raw_index if isinstance(raw_index, str) else "")
        except ValueError as exc:
            raise StatusError(
                f"leader pod {meta.get('name')}: invalid {GROUP_INDEX_LABEL} label "
                f"{raw_index!r}: {exc}"
            ) from exc
        worker = workers.get(meta.get("name"))
        if size != 1 and worker is None:
            continue
        is_ready = group_ready(pod, worker, size, confirmed)
        is_updated = group_updated(pod, worker, size, current_key)
        ready += is_ready
        updated += is_updated
        if index < replicas:
            ready_non_burst += is_ready
            if index >= lws_partition:
                current += 1
                current_updated += is_updated
                current_updated_ready += is_ready and is_updated
    return GroupCounts(
        ready, updated, ready_non_burst, current, current_updated, current_updated_ready
    )


def select_conditions(counts: GroupCounts, replicas: int) -> tuple[str, ...]:
    """The condition types to set True this pass (upstream's updateStatus
    (leaderworkerset_controller.go)); the first names the Event."""
    if counts.partitioned_updated_non_burst < counts.partitioned_current_non_burst:
        return (CONDITION_UPDATE_IN_PROGRESS, CONDITION_PROGRESSING)
    if (
        counts.ready_non_burst == replicas
        and counts.partitioned_updated_and_ready == counts.partitioned_current_non_burst
    ):
        return (CONDITION_AVAILABLE,)
    return (CONDITION_PROGRESSING,)


def make_condition(condition_type: str, generation: int, now: str) -> dict[str, Any]:
    """A True condition of one of the three snapshot types, stamped `now`."""
    reason, message = CONDITION_TEXT[condition_type]
    return {
        "type": condition_type,
        "status": "True",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
        "observedGeneration": generation,
    }


def _set_condition(conditions: list[dict[str, Any]], new: dict[str, Any], now: str) -> bool:
    changed = found = False
    for i, existing in enumerate(conditions):
        if existing.get("type") == new["type"]:
            found = True
            if (
                existing.get("status") != new["status"]
                or existing.get("observedGeneration") != new["observedGeneration"]
            ):
                conditions[i] = dict(new)
                changed = True
        elif (
            frozenset({existing.get("type"), new["type"]}) in _EXCLUSIVE
            and existing.get("status") == "True"
            and new["status"] == "True"
        ):
            reason, message = CONDITION_TEXT.get(str(existing.get("type")), ("", ""))
            conditions[i] = {
                **existing,
                "status": "False",
                "reason": existing.get("reason") or reason,
                "message": existing.get("message") or message,
                "lastTransitionTime": now,
                "observedGeneration": new["observedGeneration"],
            }
            changed = True
    if not found:
        conditions.append(dict(new))
        changed = True
    return changed


def merge_conditions(
    existing: Iterable[Mapping[str, Any]],
    chosen: Iterable[str],
    generation: int,
    now: str,
) -> tuple[list[dict[str, Any]], bool]:
    """Apply the chosen True conditions to the existing list (upstream's updateStatus
    (leaderworkerset_controller.go)).

    Returns the new list and whether a chosen condition changed it (what the Event reports);
    raising the other conditions' observedGeneration is not such a change."""
    conditions = [dict(c) for c in existing]
    changed = False
    for condition_type in chosen:
        changed |= _set_condition(conditions, make_condition(condition_type, generation, now), now)
    for condition in conditions:
        condition["observedGeneration"] = generation
    return conditions, changed


def compute_status(
    lws: LWS,
    current_key: str,
    leader_sts: Mapping[str, Any],
    leader_pods: Iterable[Mapping[str, Any]],
    worker_statefulsets: Iterable[Mapping[str, Any]],
    now: str,
    confirmed: Collection[str] = (),
) -> StatusDecision:
    """The desired status of `lws` after this pass's leader StatefulSet apply (upstream's
    updateStatus (leaderworkerset_controller.go)).

    `leader_sts` is the freshly read leader StatefulSet (its status.replicas is copied); `now`
    is the RFC 3339 timestamp stamped on conditions that change."""
    view = lws_view(lws)
    replicas, lws_partition = view.replicas, view.rolling_update.partition
    counts = count_groups(
        view.name, replicas, view.size, lws_partition, current_key, leader_pods,
        worker_statefulsets, confirmed,
    )
    update_done = lws_partition == 0 and counts.partitioned_updated_and_ready == replicas
    # status.replicas copies the leader StatefulSet's, terminating leaders included (upstream's
    # updateStatus (leaderworkerset_controller.go)).
    return _decide(view, counts, StatefulSetView.of(leader_sts).status_replicas, update_done,
                   now)


def _copy(value: Any) -> Any:
    """``copy.deepcopy`` for JSON values, without its memo (the status is copied every pass)."""
    kind = type(value)
    if kind is dict:
        return {k: _copy(v) for k, v in value.items()}
    if kind is list:
        return [_copy(v) for v in value]
    if kind in (str, int, float, bool) or value is None:
        return value
    return copy.deepcopy(value)


def _decide(lws: LeaderWorkerSetView, counts: GroupCounts, observed_replicas: int,
            update_done: bool, now: str) -> StatusDecision:
    """The status from the group counters, shared by both group identity modes."""
    name, generation, replicas = lws.name, lws.generation, lws.replicas
    observed = lws.status
    chosen = select_conditions(counts, replicas)
    conditions, conditions_changed = merge_conditions(
        observed.get("conditions") or (), chosen, generation, now
    )

    status = _copy(dict(observed))
    status["replicas"] = observed_replicas
    status["readyReplicas"] = counts.ready
    status["updatedReplicas"] = counts.updated
    if not status.get("hpaPodSelector"):
        status["hpaPodSelector"] = hpa_pod_selector(name)
    status["observedGeneration"] = generation
    status["conditions"] = conditions

    events: tuple[Event, ...] = ()
    if conditions_changed:
        reason, message = CONDITION_TEXT[chosen[0]]
        note = f"{message}, with {counts.ready} groups ready of total {replicas} groups"
        events = (Event(reason, EVENT_TYPE_NORMAL, EVENT_ACTION_UPDATE, note),)
    return StatusDecision(status, status != observed, events, update_done)


def compute_hash_status(
    lws: LWS,
    current_key: str,
    leader_pods: Iterable[Mapping[str, Any]],
    worker_statefulsets: Iterable[Mapping[str, Any]],
    now: str,
    confirmed: Collection[str] = (),
) -> StatusDecision:
    """The desired status of a Hash-mode LeaderWorkerSet (LWS docs, "Group Identity").

    There are no ordinals, so no surge or partition split: every live (not terminating) leader is
    a group in ``status.replicas``, gated ones included ("a waiting replacement counts as a
    not-ready group"); a group is counted, ready and updated by the same rules as in Ordinal
    mode, with the worker StatefulSet found by the leader's host name. The conditions see at most
    ``replicas`` groups, and the update is done once ``replicas`` groups are updated and ready
    and no group of another revision is left."""
    view = lws_view(lws)
    replicas, size = view.replicas, view.size
    workers = {meta_of(sts).get("name"): sts for sts in worker_statefulsets}
    live = counted = ready = updated = updated_ready = 0
    outdated = False
    for pod in leader_pods:
        if deleting(pod) or not is_leader(pod):
            continue
        live += 1
        outdated |= revision_key(pod) != current_key
        worker = workers.get(host_name(pod))
        if size != 1 and worker is None:
            continue  # as in Ordinal mode: a group counts once its workers are created
        counted += 1
        is_ready = group_ready(pod, worker, size, confirmed)
        is_updated = group_updated(pod, worker, size, current_key)
        ready += is_ready
        updated += is_updated
        updated_ready += is_ready and is_updated
    current = min(counted, replicas)
    # A live leader of another revision keeps the update in progress, however many are updated.
    counts = GroupCounts(ready, updated, min(ready, replicas), current,
                         min(updated, current - 1 if outdated else current),
                         min(updated_ready, replicas))
    update_done = not outdated and updated_ready >= replicas
    return _decide(view, counts, live, update_done, now)
