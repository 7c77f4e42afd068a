"""Group restart policies (upstream's handleRestartPolicy (pod_controller.go), LWS docs "Failure
Handling"): which groups to recreate.

A group is the unit of failure: when one of its pods restarts a container or is deleted, the
whole group is recreated by deleting its leader with foreground propagation (the leader
StatefulSet then recreates the leader, and with it a fresh worker StatefulSet).

* ``RecreateGroupOnPodRestart`` (default): any container restart (``restartCount > 0`` on a
  Running or Pending pod) or pod deletion triggers it.
* ``RecreateGroupAfterStart`` (or the legacy experimental annotation): the same, except while
  the group is still starting: fewer pods than ``size`` exist, or one of them is Pending. The
  docs distinguish three Pending states (:func:`pending_state`), none of which recreates the
  group; a skip because a pod is unschedulable is reported (the ``GroupUnschedulable`` Event),
  since waiting is then a capacity problem the user may need to act on.
* ``None`` (and the deprecated ``Default``): never.

A trigger from a worker is ignored when the worker belongs to a group already being replaced:
its leader is gone or deleting, carries another revision, or is another incarnation (the
worker's StatefulSet is not owned by this leader's UID). Without these guards, the background
deletion of an old group's workers would recreate the replacement leader again.

Deletions are seen either as a ``deletionTimestamp`` or, because kwok and kubelets may delete a
pod before any watcher sees it terminating, as the pod's final state from a watch DELETED event
(a porting note on upstream's handleRestartPolicy): the caller passes those as ``deleted``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from lws_operator.api.constants import (
    CONDITION_PROGRESSING,
    MESSAGE_GROUPS_PROGRESSING,
    REASON_GROUPS_PROGRESSING,
)
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import deleting, group_index, is_leader, lws_view, revision_of
from lws_operator.logic.identity.keys import split_ordinal
from lws_operator.logic.objects.meta import controller_ref, host_name, meta_of


def _why(pod: Mapping[str, Any], leader: Mapping[str, Any]) -> str:
    """Which incarnation of which pod failed and how: what an operator reading the log needs
    to tell a real failure from a stale event."""
    meta = meta_of(pod)
    how = "restarted" if restarted(pod) else "deleted"
    owner = controller_ref(pod) or {}
    return (f"pod {meta.get('name')} (uid {meta.get('uid')}, owner {owner.get('kind')} "
            f"{owner.get('uid')}, phase {(pod.get('status') or {}).get('phase')}) {how}; "
            f"leader uid {meta_of(leader).get('uid')}")


def restarted(pod: Mapping[str, Any]) -> bool:
    """A Running or Pending pod whose containers (or init containers) restarted."""
    status = pod.get("status") or {}
    if status.get("phase") not in ("Running", "Pending"):
        return False
    for kind in ("containerStatuses", "initContainerStatuses"):
        for container in status.get(kind) or ():
            if int(container.get("restartCount") or 0) > 0:
                return True
    return False


def failure_trigger(pod: Mapping[str, Any]) -> bool:
    """Whether a live pod may call for its group's recreation: it restarted or is deleting
    (``scan_failures`` judges whether it does)."""
    return restarted(pod) or deleting(pod)


PendingState = Literal["gated", "starting", "unschedulable"]


def pending_state(pod: Mapping[str, Any]) -> PendingState | None:
    """The documented Pending sub-state of a pod, or None when it is not Pending.

    ``gated``: PodScheduled=False with reason SchedulingGated (the scheduler has not tried yet);
    ``unschedulable``: PodScheduled=False with any other reason (it tried and failed);
    ``starting``: placed (PodScheduled=True), or no PodScheduled condition reported yet."""
    status = pod.get("status") or {}
    if status.get("phase") != "Pending":
        return None
    scheduled = next((c for c in status.get("conditions") or []
                      if c.get("type") == "PodScheduled"), None)
    if scheduled is None or scheduled.get("status") != "False":
        return "starting"
    return "gated" if scheduled.get("reason") == "SchedulingGated" else "unschedulable"


def unschedulable_groups(pods: Iterable[Mapping[str, Any]]) -> list[str]:
    """The group indexes with a live pod the scheduler could not place, sorted."""
    groups = {group_index(p) or "" for p in pods
              if not deleting(p) and pending_state(p) == "unschedulable"}
    return sorted(groups, key=lambda g: (len(g), g))


@dataclass(frozen=True)
class Recreation:
    """Delete ``leader`` (by UID) to recreate group ``group``, because of ``trigger``.

    ``revision`` (the leader's template-revision-hash) and ``created`` (its creationTimestamp)
    are what the restart budget and backoff are keyed and timed by."""

    leader: str
    leader_uid: str
    trigger: str
    group: str
    revision: str = field(default="", compare=False)
    created: str = field(default="", compare=False)
    why: str = field(default="", compare=False)  # the facts behind it, for the log

    @property
    def note(self) -> str:
        return (f"Worker pod {self.trigger} failed, deleted leader pod {self.leader} to recreate "
                f"group {self.group}")


@dataclass(frozen=True)
class UnschedulableSkip:
    """A recreation skipped under RecreateGroupAfterStart because ``pod`` cannot be scheduled."""

    group: str
    trigger: str
    trigger_uid: str
    pod: str

    @property
    def note(self) -> str:
        return (f"Pod {self.trigger} failed, but group {self.group} is not recreated while pod "
                f"{self.pod} cannot be scheduled")


@dataclass(frozen=True)
class FailureScan:
    """What the failures seen this pass call for."""

    recreations: list[Recreation]
    unschedulable: list[UnschedulableSkip]


def _starting(pods: list[Mapping[str, Any]], group: str,
              size: int) -> tuple[bool, Mapping[str, Any] | None]:
    """Whether the group is still starting, and its first unschedulable pod if any."""
    members = [p for p in pods if group_index(p) == group and not deleting(p)]
    states = [(pending_state(p), p) for p in members]
    blocked = next((p for state, p in states if state == "unschedulable"), None)
    return len(members) != size or any(state for state, _ in states), blocked


def _belongs_to(worker: Mapping[str, Any], leader: Mapping[str, Any],
                statefulsets: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether ``worker`` is of ``leader``'s current incarnation (owner UID chain)."""
    leader_meta = meta_of(leader)
    owner = controller_ref(worker)
    if owner is None:
        return False
    if owner.get("kind") == "Pod":
        return bool(owner.get("name") == leader_meta.get("name")
                    and owner.get("uid") == leader_meta.get("uid"))
    if owner.get("kind") != "StatefulSet":
        return False
    sts = statefulsets.get(str(owner.get("name")))
    if sts is None or meta_of(sts).get("uid") != owner.get("uid"):
        return False
    sts_owner = controller_ref(sts)
    return bool(sts_owner and sts_owner.get("kind") == "Pod"
                and sts_owner.get("name") == leader_meta.get("name")
                and sts_owner.get("uid") == leader_meta.get("uid"))


def _live_leader(pod: Mapping[str, Any], name: str, by_name: Mapping[str, Mapping[str, Any]],
                 by_host: Mapping[str, Mapping[str, Any]],
                 sts_by_name: Mapping[str, Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The leader whose group the failure of ``pod`` (named ``name``) recreates, or None when
    it recreates none: the leader is gone or going already (its group is being recreated), or
    the failed worker is of another revision or incarnation than the leader now."""
    if is_leader(pod):
        leader = by_name.get(name)
        if leader is None or meta_of(leader).get("uid") != meta_of(pod).get("uid"):
            return None
    else:
        parsed = split_ordinal(name)
        leader = by_host.get(parsed[0]) if parsed else None
        if leader is None or revision_of(leader) != revision_of(pod) \
                or not _belongs_to(pod, leader, sts_by_name):
            return None
    return None if deleting(leader) else leader


def plan_recreations(lws: LWS, pods: Iterable[Mapping[str, Any]],
                     statefulsets: Iterable[Mapping[str, Any]],
                     deleted: Iterable[Mapping[str, Any]] = ()) -> list[Recreation]:
    """The groups to recreate this pass, at most one per leader."""
    return scan_failures(lws, pods, statefulsets, deleted).recreations


def recreating(lws: LWS) -> bool:
    """Whether the restart policy recreates groups at all."""
    return lws_view(lws).recreates_groups


def scan_failures(lws: LWS, pods: Iterable[Mapping[str, Any]],
                  statefulsets: Iterable[Mapping[str, Any]],
                  deleted: Iterable[Mapping[str, Any]] = (),
                  triggered: Iterable[Mapping[str, Any]] | None = None) -> FailureScan:
    """The groups to recreate this pass (at most one per leader), and the recreations skipped
    because a pod of the group is unschedulable. ``triggered``: the ``pods`` that are a
    ``failure_trigger``, in their order, when the caller knows them already."""
    view = lws_view(lws)
    if not view.recreates_groups:
        return FailureScan([], [])
    live = list(pods)
    triggers = ([p for p in live if failure_trigger(p)] if triggered is None
                else list(triggered))
    triggers += list(deleted)
    if not triggers:
        return FailureScan([], [])  # the common case: nothing failed
    waits = view.recreate_after_start
    size = view.size
    by_name = {str(meta_of(p).get("name")): p for p in live}
    # A worker names its leader by host name (the pod name in Ordinal mode, `<lws>-<key prefix>`
    # in Hash mode).
    by_host = {host_name(p): p for p in live if is_leader(p)}
    sts_by_name = {str(meta_of(s).get("name")): s for s in statefulsets}
    out: dict[str, Recreation] = {}
    skips: dict[str, UnschedulableSkip] = {}
    for pod in triggers:
        name = str(meta_of(pod).get("name"))
        group = group_index(pod) or ""
        if waits:
            starting, blocked = _starting(live, group, size)
            if blocked is not None:
                skips.setdefault(group, UnschedulableSkip(
                    group, name, str(meta_of(pod).get("uid") or ""),
                    str(meta_of(blocked).get("name"))))
            if starting:
                continue
        leader = _live_leader(pod, name, by_name, by_host, sts_by_name)
        if leader is None:
            continue
        leader_meta = meta_of(leader)
        leader_name = str(leader_meta.get("name"))
        out.setdefault(leader_name, Recreation(
            leader_name, str(leader_meta.get("uid")), name,
            group_index(leader) or group,
            revision_of(leader),
            str(leader_meta.get("creationTimestamp") or ""), _why(pod, leader)))
    return FailureScan(list(out.values()), list(skips.values()))


REASON_GROUP_UNSCHEDULABLE = "GroupUnschedulable"


def after_start(lws: LWS) -> bool:
    """RecreateGroupAfterStart, by policy or by the legacy annotation."""
    return lws_view(lws).recreate_after_start


def apply_unschedulable(status: dict[str, Any], lws: LWS,
                        pods: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """Under RecreateGroupAfterStart, a True ``Progressing`` condition says ``GroupUnschedulable``
    and how many replicas cannot be scheduled while any can't (as documented); it goes back to the
    standard reason and message once none is. Its status and transition time are left alone."""
    view = lws_view(lws)
    if not view.recreate_after_start:
        return status
    groups = unschedulable_groups(pods)
    replicas = view.replicas
    conditions = [dict(c) for c in status.get("conditions") or []]
    for cond in conditions:
        if cond.get("type") != CONDITION_PROGRESSING or cond.get("status") != "True":
            continue
        if groups:
            cond.update(reason=REASON_GROUP_UNSCHEDULABLE,
                        message=f"{len(groups)} of {replicas} replicas cannot be scheduled")
        elif cond.get("reason") == REASON_GROUP_UNSCHEDULABLE:
            cond.update(reason=REASON_GROUPS_PROGRESSING, message=MESSAGE_GROUPS_PROGRESSING)
    return {**status, "conditions": conditions}
