"""Ordinal-mode rollout pacing: the leader StatefulSet's partition and replicas (upstream's
rollingUpdateParameters (leaderworkerset_controller.go)).

A LeaderWorkerSet never updates pods itself. It moves two numbers on the leader StatefulSet and lets
the StatefulSet controller replace every leader whose ordinal is at or above the partition; a
replaced leader's group is rebuilt by the pod controller. Choosing those two numbers *is* the
rollout: how many groups may be down at once (maxUnavailable), how many extra groups may run
meanwhile (maxSurge), and which ordinals stay behind (the user's partition). Users watch these
numbers and the events they produce, so this module reproduces the upstream arithmetic pass for
pass; it is a pure function of one observed snapshot and returns the events as data.

Vocabulary: `R` = spec.replicas, `stsR` = the leader StatefulSet's spec.replicas before this pass,
`curP` = its partition, `lwsP` = rollingUpdateConfiguration.partition, `burst = R + maxSurge`.

Quirks kept on purpose (a drop-in replacement must pace and report identically):
* Only contiguous readiness from the highest ordinal down advances the partition ("tail ready");
  a ready group below an unready one does not help (upstream issue #717's deadlock discussion).
* Within a rollout the partition only moves down (`min(p, curP)`), except that a new revision
  resets it to `min(R, stsR)` and the user's partition is a floor applied last.
* Surge replicas are reclaimed with `R + max(0, unready - maxUnavailable)` once the unready groups
  among ordinals `[0, R)` fit within maxSurge.
* The `GroupsProgressing` "deleting surge replica(s)" event fires whenever the computed replicas
  are below the current ones, so a plain scale-down (no rollout at all) reports its removed
  ordinals as "surge replicas" too.
* `GroupsUpdating` fires whenever the partition changes outside a new-revision pass, in either
  direction; raising the user's partition therefore reads "Updating replicas <p> to <curP-1>
  (inclusive)" with `p > curP - 1`, as upstream words it.
* The leader StatefulSet's `replicas` annotation is only parsed when a pass reaches case 4; a
  missing or non-numeric value fails that pass (`RolloutError`), and the controller retries.
* Terminating leader pods are not filtered out: a pod with a deletionTimestamp still counts with
  its current readiness until it is gone.

Events come back as data in two groups (`RolloutDecision`): those upstream records while computing
(surge deletion) and those it records only after a successful apply (`Created leader statefulset`,
`GroupsUpdating`). `Event` lives here until a shared events module exists; status uses it too.

Deliberate differences, none observable on objects upstream creates:
* When two leader pods (or two worker StatefulSets) claim the same group index, the correctly named
  one is used, whatever the cache's list order; upstream keeps whichever it listed last.
* A leader StatefulSet without `updateStrategy.rollingUpdate.partition` is read as partition 0
  (upstream dereferences it and would crash; we always write it).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from lws_operator.api.constants import (
    EVENT_ACTION_CREATE,
    EVENT_ACTION_DELETE,
    EVENT_ACTION_UPDATE,
    EVENT_TYPE_NORMAL,
    NAME_LABEL,
    REASON_GROUPS_PROGRESSING,
    REASON_GROUPS_UPDATING,
    REPLICAS_ANNOTATION,
)
from lws_operator.api.validation import scaled_value
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import StatefulSetView, group_index, is_leader, lws_view
from lws_operator.logic.identity.keys import parse_int
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import labels_of, name_of
from lws_operator.logic.status.readiness import group_ready, group_updated


class RolloutError(ValueError):
    """The observed objects do not allow a decision this pass (the controller retries)."""


@dataclass(frozen=True)
class GroupState:
    """One ordinal as the rollout sees it (readiness and revision as upstream's pod_utils.go
    helpers judge them)."""

    ready: bool
    updated: bool


_ABSENT: Final = GroupState(ready=False, updated=False)


@dataclass(frozen=True)
class LeaderStatefulSetState:
    """What the rollout reads from the existing leader StatefulSet, before this pass's apply."""

    replicas: int
    partition: int
    replicas_annotation: str | None


@dataclass(frozen=True)
class RolloutSnapshot:
    """Everything one pass of the rollout decision depends on.

    `groups[i]` describes ordinal `i` of the leader StatefulSet, for `i` in `[0, stsR)`; ordinals
    beyond the tuple count as neither ready nor updated. `current_key` is the revision key the
    states were judged against (kept for diagnostics; the states already encode it).
    """

    lws_name: str
    replicas: int
    lws_partition: int
    max_unavailable: int | str
    max_surge: int | str
    size: int
    lws_updated: bool
    current_key: str
    leader_sts: LeaderStatefulSetState | None
    groups: tuple[GroupState, ...] = ()


@dataclass(frozen=True)
class RolloutDecision:
    """The leader StatefulSet's partition and replicas for this pass, with its events.

    `events` are recorded whatever happens next (upstream records them while computing);
    `events_after_apply` only once the leader StatefulSet was applied successfully
    (upstream's Reconcile (leaderworkerset_controller.go)).
    """

    partition: int
    replicas: int
    events: tuple[Event, ...] = ()
    events_after_apply: tuple[Event, ...] = ()


def scaled_max_unavailable(max_unavailable: int | str, replicas: int) -> int:
    """maxUnavailable against `replicas`, percentages rounded down."""
    value = scaled_value(max_unavailable, replicas, False)
    if value is None:
        raise RolloutError(f"invalid maxUnavailable {max_unavailable!r}")
    return value


def scaled_max_surge(max_surge: int | str, replicas: int) -> int:
    """maxSurge against `replicas`, percentages rounded up, then capped at `replicas`."""
    value = scaled_value(max_surge, replicas, True)
    if value is None:
        raise RolloutError(f"invalid maxSurge {max_surge!r}")
    return min(value, replicas)


def leader_sts_max_unavailable(
    replicas: int, max_unavailable: int | str, max_surge: int | str
) -> int:
    """The leader StatefulSet's own `rollingUpdate.maxUnavailable` (upstream's SSAWithStatefulset
    (leaderworkerset_controller.go)).

    Wide enough never to hold back what the partition releases, and at least 1 for `R == 0`."""
    unavailable = scaled_max_unavailable(max_unavailable, replicas)
    surge = scaled_max_surge(max_surge, replicas)
    return max(1, unavailable + min(surge, replicas))


def _group_index(obj: Mapping[str, Any]) -> int | None:
    value = group_index(obj)
    if value is None:
        return None
    try:
        return parse_int(value)
    except ValueError:
        return None


def _by_index(
    lws_name: str, objects: Iterable[Mapping[str, Any]], count: int
) -> list[Mapping[str, Any] | None]:
    """Place objects at their group-index; those without a usable index (the leader
    StatefulSet has none) or outside `[0, count)` are ignored."""
    slots: list[Mapping[str, Any] | None] = [None] * count
    for obj in objects:
        index = _group_index(obj)
        if index is None or not 0 <= index < count:
            continue
        current = slots[index]
        if current is not None and name_of(current) == f"{lws_name}-{index}":
            continue
        slots[index] = obj
    return slots


def group_states(
    lws_name: str,
    size: int,
    current_key: str,
    count: int,
    leader_pods: Iterable[Mapping[str, Any]],
    worker_statefulsets: Iterable[Mapping[str, Any]],
    confirmed: Collection[str] = (),
) -> tuple[GroupState, ...]:
    """The state of ordinals `[0, count)` from the observed leader pods and worker StatefulSets.

    Objects are matched to ordinals by their group-index label. An ordinal whose leader pod is not
    named `<lws>-<i>` (or, for size > 1, whose worker StatefulSet is not) is being created or
    rebuilt and counts as neither ready nor updated. ``confirmed``: the worker StatefulSets
    ready by their pods (``readiness.confirmed_by_pods``).
    """
    leaders = _by_index(
        lws_name,
        (
            pod
            for pod in leader_pods
            if labels_of(pod).get(NAME_LABEL) == lws_name and is_leader(pod)
        ),
        count,
    )
    workers = _by_index(
        lws_name,
        (sts for sts in worker_statefulsets if labels_of(sts).get(NAME_LABEL) == lws_name),
        count,
    )
    states: list[GroupState] = []
    for index in range(count):
        expected = f"{lws_name}-{index}"
        leader, worker = leaders[index], workers[index]
        if leader is None or name_of(leader) != expected:
            states.append(_ABSENT)
            continue
        if size != 1 and (worker is None or name_of(worker) != expected):
            states.append(_ABSENT)
            continue
        states.append(
            GroupState(
                ready=group_ready(leader, worker, size, confirmed),
                updated=group_updated(leader, worker, size, current_key),
            )
        )
    return tuple(states)


def rollout_snapshot(
    lws: LWS,
    leader_sts: Mapping[str, Any] | None,
    leader_pods: Iterable[Mapping[str, Any]],
    worker_statefulsets: Iterable[Mapping[str, Any]],
    current_key: str,
    lws_updated: bool,
    confirmed: Collection[str] = (),
) -> RolloutSnapshot:
    """Build the snapshot from observed API dicts (the LWS is assumed defaulted; absent fields
    fall back to the API defaults: 1 replica, size 1, partition 0, maxUnavailable 1, maxSurge 0)."""
    view = lws_view(lws)
    name = view.name
    config = view.rolling_update
    sts_state: LeaderStatefulSetState | None = None
    groups: tuple[GroupState, ...] = ()
    if leader_sts is not None:
        sts = StatefulSetView.of(leader_sts)
        sts_state = LeaderStatefulSetState(
            replicas=sts.replicas,
            partition=sts.partition,
            replicas_annotation=sts.replicas_annotation,
        )
        groups = group_states(
            name, view.size, current_key, sts.replicas, leader_pods, worker_statefulsets,
            confirmed)
    return RolloutSnapshot(
        lws_name=name,
        replicas=view.replicas,
        lws_partition=config.partition,
        max_unavailable=config.max_unavailable,
        max_surge=config.max_surge,
        size=view.size,
        lws_updated=lws_updated,
        current_key=current_key,
        leader_sts=sts_state,
        groups=groups,
    )


def _state(groups: tuple[GroupState, ...], index: int) -> GroupState:
    return groups[index] if 0 <= index < len(groups) else _ABSENT


def _unready(groups: tuple[GroupState, ...], replicas: int) -> int:
    """Target ordinals `[0, R)` that are missing, unready or not updated."""
    return sum(
        1 for i in range(replicas) if not (_state(groups, i).ready and _state(groups, i).updated)
    )


def _tail_ready(groups: tuple[GroupState, ...], sts_replicas: int) -> int:
    """Consecutive ready-and-updated ordinals counted from the highest one down."""
    count = 0
    for index in range(sts_replicas - 1, -1, -1):
        state = _state(groups, index)
        if not (state.ready and state.updated):
            break
        count += 1
    return count


def _rolling_update_partition(
    groups: tuple[GroupState, ...], sts_replicas: int, step: int, current_partition: int
) -> int:
    base = max(0, sts_replicas - _tail_ready(groups, sts_replicas) - step)
    # Groups already down below the window use up maxUnavailable too.
    partition = base + sum(1 for i in range(base) if not _state(groups, i).ready)
    # Slide down across groups that are down anyway or already updated.
    for index in range(min(partition, sts_replicas - 1), base - 1, -1):
        state = _state(groups, index)
        if state.ready and not state.updated:
            break
        partition = index
    return min(partition, current_partition)


def _surge_events(lws_name: str, replicas: int, sts_replicas: int) -> list[Event]:
    if replicas == sts_replicas - 1:
        note = f"deleting surge replica {lws_name}-{replicas}"
    elif replicas < sts_replicas:
        last = f"{lws_name}-{sts_replicas - 1}"
        note = f"deleting surge replicas from {lws_name}-{replicas} to {last}"
    else:
        return []
    return [Event(REASON_GROUPS_PROGRESSING, EVENT_TYPE_NORMAL, EVENT_ACTION_DELETE, note)]


def _partition_and_replicas(snapshot: RolloutSnapshot, events: list[Event]) -> tuple[int, int]:
    """Cases 1-5 of upstream's rollingUpdateParameters (leaderworkerset_controller.go), before the
    user's partition floor."""
    r = snapshot.replicas
    sts = snapshot.leader_sts
    if sts is None:
        return 0, r
    sts_r = sts.replicas
    max_surge = scaled_max_surge(snapshot.max_surge, r)
    max_unavailable = scaled_max_unavailable(snapshot.max_unavailable, r)
    burst = r + max_surge

    def want_replicas(unready: int) -> int:
        # Reclaim surge once the unready target groups fit within it.
        result = r + max(0, unready - max_unavailable) if unready <= max_surge else burst
        events.extend(_surge_events(snapshot.lws_name, result, sts_r))
        return result

    if snapshot.lws_updated:
        return min(r, sts_r), (r if sts_r < r else want_replicas(r))
    if sts.partition == 0 and sts_r == r:
        return 0, r
    if sts_r < r:
        return sts.partition, r
    annotation = sts.replicas_annotation
    try:
        recorded = parse_int(annotation if annotation is not None else "")
    except ValueError as exc:
        raise RolloutError(
            f"invalid {REPLICAS_ANNOTATION} annotation {annotation!r} on leader statefulset "
            f"{snapshot.lws_name}: {exc}"
        ) from exc
    if recorded != r:
        return min(sts.partition, burst), want_replicas(_unready(snapshot.groups, r))
    step = max_unavailable + max_surge - (burst - sts_r)
    partition = _rolling_update_partition(snapshot.groups, sts_r, step, sts.partition)
    return partition, want_replicas(_unready(snapshot.groups, r))


def plan_rollout(snapshot: RolloutSnapshot) -> RolloutDecision:
    """The leader StatefulSet's (partition, replicas) for this pass, and the events it causes.

    Raises RolloutError when the leader StatefulSet's replicas annotation must be read and cannot
    be, or the int-or-percent settings are malformed (validation normally rules that out)."""
    events: list[Event] = []
    partition, replicas = _partition_and_replicas(snapshot, events)
    partition = max(partition, snapshot.lws_partition)
    after: list[Event] = []
    sts = snapshot.leader_sts
    if sts is None:
        after.append(
            Event(
                REASON_GROUPS_PROGRESSING,
                EVENT_TYPE_NORMAL,
                EVENT_ACTION_CREATE,
                f"Created leader statefulset {snapshot.lws_name}",
            )
        )
    elif not snapshot.lws_updated and partition != sts.partition:
        last = sts.partition - 1
        note = (
            f"Updating replica {partition}"
            if last == partition
            else f"Updating replicas {partition} to {last} (inclusive)"
        )
        after.append(Event(REASON_GROUPS_UPDATING, EVENT_TYPE_NORMAL, EVENT_ACTION_UPDATE, note))
    return RolloutDecision(partition, replicas, tuple(events), tuple(after))
