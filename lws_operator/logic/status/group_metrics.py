"""What the ``lws_*`` group metrics say, derived from the objects a pass observes.

controller-runtime's metrics tell how the controller works; these tell how the *groups* fare,
which is what a user of LeaderWorkerSet pages on: how many groups are ready, stuck behind a gate
or unschedulable, failed, being recreated or stopped for good; why groups were recreated; how
long a group takes from creation to Ready; how long each rollout step and each rollout takes;
and how much restart budget each group has left.

Everything here is a pure function of snapshots. Counters and histograms need transitions, so
the caller keeps a ``Memory`` per LeaderWorkerSet between passes and hands it back; the first
snapshot after the operator starts only seeds it (a group found Ready, or a rollout found under
way, has no start time this process saw, so nothing is observed for it: no made-up durations
after a restart or upgrade).

Group states (one per group, first match wins): ``exhausted`` (its restart budget ran out: the
leader carries the exhausted mark), ``terminating`` (the leader is being deleted: a recreation or
scale-down in flight), ``ready``, ``failed`` (a member pod failed or restarted and the group is
not ready), ``gated`` (a member waits behind a scheduling gate), ``unschedulable`` (the scheduler
tried and could not place a member), ``progressing`` (anything else on the way to Ready), and
``missing`` (a group index below ``spec.replicas`` without a leader pod yet).

Recreation reasons, judged from the incarnation that went away: ``recovered`` (it was exhausted
and the user recovered it), ``rollout`` (the new leader carries another template revision),
``pod-failure`` (a member of the old incarnation was seen failed or restarted) and
``pod-deleted`` (anything else: a member deleted or evicted, a node lost).

Rollout gauges (:func:`rollout_gauges`) read the status the controller wrote: whether a rolling
update is under way (``UpdateInProgress``), whether it is stalled (``Progressing=False`` with
reason ``RolloutStalled``, the overlay of ``logic.rollout.stall``), and the groups desired and
already on the current revision, so a dashboard shows a rollout's progress and an alert its stall
with the controller's own judgement rather than a guess from group states; likewise an exceeded
progress deadline (``logic.rollout.deadline``) and the revision the operator last rolled back from.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from lws_operator.api.constants import (
    CONDITION_PROGRESSING,
    CONDITION_UPDATE_IN_PROGRESS,
    REASON_PROGRESS_DEADLINE_EXCEEDED,
    REASON_ROLLOUT_STALLED,
    ROLLED_BACK_FROM_ANNOTATION,
)
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import deleting, group_index, is_leader, lws_view
from lws_operator.logic.failures.restart import pending_state, restarted
from lws_operator.logic.failures.restart_budget import count_key, exhausted, limits_of, read_counts
from lws_operator.logic.objects.meta import epoch_seconds, host_name, meta_of
from lws_operator.logic.placement.gang import gated
from lws_operator.logic.status.readiness import confirmed_by_pods, group_ready, revision_key

STATES: Final = ("ready", "progressing", "failed", "gated", "unschedulable", "terminating",
                 "exhausted", "missing")
RECREATION_REASONS: Final = ("rollout", "pod-failure", "pod-deleted", "recovered")


def _failed(pod: Mapping[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") == "Failed" or restarted(pod)


@dataclass(frozen=True)
class GroupView:
    """One group as observed now: its leader incarnation and state."""

    group: str
    leader_uid: str
    created: float | None  # the leader's creationTimestamp (epoch seconds)
    revision: str
    state: str
    failure_seen: bool  # a member failed or restarted (sticky over the incarnation's life)


# Per group: the objects its last view was derived from (the size, the leader, its worker
# StatefulSet, its member pods) and that view (``group_views``).
Known = dict[str, tuple[tuple[object, ...], "GroupView"]]


def group_views(lws: LWS, pods: Iterable[Mapping[str, Any]],
                statefulsets: Iterable[Mapping[str, Any]],
                known: Known | None = None) -> list[GroupView]:
    """Every group with a leader pod, in group order.

    ``known``, when given, holds the views of the previous call with the objects each was
    derived from; a group whose objects are the very same ones keeps its view (a view is a
    pure function of them, and most calls follow the change of one group's pod), and
    ``known`` is left holding this call's groups only."""
    size = lws_view(lws).size
    workers = {str(meta_of(s).get("name")): s for s in statefulsets}
    members: dict[str, list[Mapping[str, Any]]] = {}
    leaders: dict[str, Mapping[str, Any]] = {}
    for pod in pods:
        group = group_index(pod)
        if group is None:
            continue
        members.setdefault(group, []).append(pod)
        if is_leader(pod):
            current = leaders.get(group)
            # Two incarnations at once (the old one terminating): the live one speaks.
            if current is None or deleting(current):
                leaders[group] = pod
    out = []
    seen: Known = {}
    for group in sorted(leaders, key=lambda g: (len(g), g)):
        leader = leaders[group]
        worker_sts = workers.get(host_name(leader))
        inputs: tuple[object, ...] = (leader, worker_sts, *members[group])
        held = known.get(group) if known is not None else None
        if held is not None and held[0][0] == size and len(held[0]) == len(inputs) + 1 \
                and all(map(operator.is_, held[0][1:], inputs)):
            view = held[1]
        else:
            view = _group_view(group, leader, worker_sts, members[group], size)
        seen[group] = ((size, *inputs), view)
        out.append(view)
    if known is not None:
        known.clear()
        known.update(seen)
    return out


def _group_view(group: str, leader: Mapping[str, Any], worker_sts: Mapping[str, Any] | None,
                members: list[Mapping[str, Any]], size: int) -> GroupView:
    meta = meta_of(leader)
    uid = str(meta.get("uid") or "")
    # Pods of this incarnation: the leader, and workers not left over from a previous one.
    own = [p for p in members if p is leader or not deleting(p)]
    failure = any(_failed(p) for p in own)
    if exhausted(leader):
        state = "exhausted"
    elif deleting(leader):
        state = "terminating"
    elif group_ready(leader, worker_sts, size,
                     confirmed_by_pods((worker_sts,), own) if worker_sts is not None else ()):
        state = "ready"
    elif failure:
        state = "failed"
    elif gated(leader) or any(pending_state(p) == "gated" for p in own):
        state = "gated"
    elif any(pending_state(p) == "unschedulable" for p in own):
        state = "unschedulable"
    else:
        state = "progressing"
    return GroupView(group, uid, epoch_seconds(meta.get("creationTimestamp")),
                     revision_key(leader), state, failure)


def state_counts(lws: LWS, views: Iterable[GroupView]) -> dict[str, int]:
    """Groups per state, every state present (zero included) so each series exists."""
    counts = dict.fromkeys(STATES, 0)
    present = set()
    for view in views:
        counts[view.state] += 1
        present.add(view.group)
    spec = lws_view(lws)
    replicas = spec.replicas
    if spec.hashed:  # groups have keys, not ordinals: count the shortfall
        live = sum(n for state, n in counts.items() if state not in ("terminating", "exhausted"))
        counts["missing"] = max(0, replicas - live)
    else:
        counts["missing"] = sum(1 for i in range(replicas) if str(i) not in present)
    return counts


def budget_remaining(lws: LWS, views: Iterable[GroupView]) -> dict[str, int]:
    """Recreations each group may still have (``maxGroupRestarts`` minus its count for its
    revision); empty without a budget. An exhausted group has 0."""
    budget = limits_of(lws).max_restarts
    if budget is None:
        return {}
    counts = read_counts(lws)
    out = {}
    for view in views:
        used = counts.get(count_key(view.revision, view.group), 0)
        out[view.group] = 0 if view.state == "exhausted" else max(budget - used, 0)
    return out


@dataclass(frozen=True)
class RolloutGauges:
    """What ``lws_rollout_in_progress``, ``lws_rollout_stalled``, ``lws_rollout_groups`` and
    ``lws_rollout_deadline_exceeded`` report for one LeaderWorkerSet, and the revision the
    operator last rolled it back from (``lws_rollout_rollbacks_total`` counts its changes)."""

    in_progress: bool
    stalled: bool
    desired: int  # spec.replicas
    updated: int  # status.updatedReplicas: groups on the current revision
    deadline_exceeded: bool = False  # Progressing=False, ProgressDeadlineExceeded
    rolled_back_from: str | None = None


def rollout_gauges(lws: LWS) -> RolloutGauges:
    view = lws_view(lws)
    conditions = [c for c in view.status.get("conditions") or [] if isinstance(c, Mapping)]

    def has(kind: str, status: str, reason: str | None = None) -> bool:
        return any(c.get("type") == kind and c.get("status") == status
                   and (reason is None or c.get("reason") == reason) for c in conditions)

    updated = view.status.get("updatedReplicas")
    return RolloutGauges(
        in_progress=has(CONDITION_UPDATE_IN_PROGRESS, "True"),
        stalled=has(CONDITION_PROGRESSING, "False", REASON_ROLLOUT_STALLED),
        desired=view.replicas,
        updated=updated if isinstance(updated, int) and not isinstance(updated, bool) else 0,
        deadline_exceeded=has(CONDITION_PROGRESSING, "False", REASON_PROGRESS_DEADLINE_EXCEEDED),
        rolled_back_from=view.annotations.get(ROLLED_BACK_FROM_ANNOTATION))


@dataclass(frozen=True)
class RolloutView:
    """The rollout facts that delimit steps: whether one is under way, and the leader
    StatefulSet's partition and replicas (a step ends when either moves)."""

    in_progress: bool
    partition: int | None = None
    replicas: int | None = None


def rollout_view(lws: LWS, leader_sts: Mapping[str, Any] | None) -> RolloutView:
    conditions = lws_view(lws).status.get("conditions") or []
    in_progress = any(c.get("type") == CONDITION_UPDATE_IN_PROGRESS and c.get("status") == "True"
                      for c in conditions if isinstance(c, Mapping))
    if not in_progress or leader_sts is None:
        return RolloutView(in_progress)
    spec = leader_sts.get("spec") or {}
    partition = ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition")
    replicas = spec.get("replicas")
    return RolloutView(True, partition if isinstance(partition, int) else None,
                       replicas if isinstance(replicas, int) else None)


@dataclass(frozen=True)
class Memory:
    """What the previous snapshot showed, per LeaderWorkerSet."""

    groups: Mapping[str, GroupView] = field(default_factory=dict)
    # Leader UIDs whose time to Ready was observed, or that were Ready when first seen.
    ready_done: frozenset[str] = frozenset()
    rollout: RolloutView = RolloutView(False)
    step_started: float | None = None  # None: not under way, or began before we watched
    rollout_started: float | None = None


@dataclass(frozen=True)
class Observations:
    ready_seconds: tuple[float, ...] = ()
    recreations: tuple[str, ...] = ()  # one reason per recreated group
    step_seconds: tuple[float, ...] = ()
    rollout_seconds: tuple[float, ...] = ()


def _recreation_reason(old: GroupView, new: GroupView) -> str:
    if old.state == "exhausted":
        return "recovered"
    if old.revision != new.revision:
        return "rollout"
    if old.failure_seen:
        return "pod-failure"
    return "pod-deleted"


def _hash_recreation(view: GroupView, newest: GroupView | None) -> str | None:
    """Hash mode: a replacement comes under a new key, so a recreation shows as a live group
    starting to terminate: after a failure, or on another revision than the newest leader's (a
    rollout). Scale-down is neither (None)."""
    if view.failure_seen:
        return "pod-failure"
    if newest is not None and view.revision != newest.revision:
        return "rollout"
    return None


def _follow(old: GroupView | None, view: GroupView, first: bool, hash_mode: bool,
            newest: GroupView | None) -> tuple[GroupView, str | None]:
    """``view`` with the failure its leader's previous snapshot saw carried over, and the
    recreation the change from ``old`` shows (None: none)."""
    if old is not None and old.leader_uid == view.leader_uid:
        view = replace(view, failure_seen=view.failure_seen or old.failure_seen)
        if (hash_mode and not first and view.state == "terminating"
                and old.state not in ("terminating", "exhausted")):
            return view, _hash_recreation(view, newest)
        return view, None
    if old is not None and not first:
        return view, _recreation_reason(old, view)
    return view, None


def _observe_groups(previous: Memory, first: bool, lws: LWS, views: list[GroupView],
                    now: float) -> tuple[dict[str, GroupView], set[str], list[float], list[str]]:
    """The groups to remember, the leaders whose time to Ready is done, and the times to Ready
    and recreations seen since ``previous``."""
    spec = lws_view(lws)
    ready_seconds: list[float] = []
    recreations: list[str] = []
    groups: dict[str, GroupView] = {}
    ready_done = set()
    newest = max((v for v in views if v.state != "terminating" and v.created is not None),
                 key=lambda v: v.created or 0.0, default=None)
    for view in views:
        view, recreation = _follow(previous.groups.get(view.group), view, first, spec.hashed,
                                   newest)
        if recreation is not None:
            recreations.append(recreation)
        groups[view.group] = view
        done = view.leader_uid in previous.ready_done
        if view.state == "ready" and not done:
            if not first and view.created is not None:
                ready_seconds.append(max(now - view.created, 0.0))
            done = True
        if done:
            ready_done.add(view.leader_uid)
    # A group without a leader pod right now (between incarnations) keeps its last view, so the
    # next incarnation is compared with it; groups scaled away are forgotten.
    for group, old in previous.groups.items():
        if group not in groups and group.isdigit() and int(group) < spec.replicas:
            groups[group] = old
            if old.leader_uid in previous.ready_done:
                ready_done.add(old.leader_uid)
    return groups, ready_done, ready_seconds, recreations


def _observe_rollout(previous: Memory, first: bool, rollout: RolloutView, now: float,
                     ) -> tuple[float | None, float | None, list[float], list[float]]:
    """When the current rollout step and the rollout began (None: not under way, or began
    before we watched), and the steps and rollouts that ended since ``previous``."""
    step_seconds: list[float] = []
    rollout_seconds: list[float] = []
    step_started, rollout_started = previous.step_started, previous.rollout_started
    if first:
        return None, None, step_seconds, rollout_seconds
    if rollout == previous.rollout:
        return step_started, rollout_started, step_seconds, rollout_seconds
    if previous.rollout.in_progress and step_started is not None:
        step_seconds.append(max(now - step_started, 0.0))
    if previous.rollout.in_progress and not rollout.in_progress \
            and rollout_started is not None:
        rollout_seconds.append(max(now - rollout_started, 0.0))
    step_started = now if rollout.in_progress else None
    if rollout.in_progress and not previous.rollout.in_progress:
        rollout_started = now
    elif not rollout.in_progress:
        rollout_started = None
    return step_started, rollout_started, step_seconds, rollout_seconds


def observe(memory: Memory | None, lws: LWS, views: list[GroupView],
            rollout: RolloutView, now: float) -> tuple[Memory, Observations]:
    """The transitions between ``memory`` (None: the first snapshot, which only seeds) and now."""
    first = memory is None
    previous = memory or Memory()
    groups, ready_done, ready_seconds, recreations = _observe_groups(previous, first, lws,
                                                                     views, now)
    step_started, rollout_started, step_seconds, rollout_seconds = _observe_rollout(
        previous, first, rollout, now)
    return (Memory(groups, frozenset(ready_done), rollout, step_started, rollout_started),
            Observations(tuple(ready_seconds), tuple(recreations), tuple(step_seconds),
                         tuple(rollout_seconds)))
