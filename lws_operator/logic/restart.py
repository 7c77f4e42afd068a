"""Group restart policies (SPEC 4.6, guide "Failure Handling"): which groups to recreate.

A group is the unit of failure: when one of its pods restarts a container or is deleted, the
whole group is recreated by deleting its leader with foreground propagation (the leader
StatefulSet then recreates the leader, and with it a fresh worker StatefulSet).

* ``RecreateGroupOnPodRestart`` (default): any container restart (``restartCount > 0`` on a
  Running or Pending pod) or pod deletion triggers it.
* ``RecreateGroupAfterStart`` (or the legacy experimental annotation): the same, except while
  the group is still starting: fewer pods than ``size`` exist, or one of them is Pending.
* ``None`` (and the deprecated ``Default``): never.

A trigger from a worker is ignored when the worker belongs to a group already being replaced:
its leader is gone or deleting, carries another revision, or is another incarnation (the
worker's StatefulSet is not owned by this leader's UID). Without these guards, the background
deletion of an old group's workers would recreate the replacement leader again.

Deletions are seen either as a ``deletionTimestamp`` or, because kwok and kubelets may delete a
pod before any watcher sees it terminating, as the pod's final state from a watch DELETED event
(SPEC 4.6 porting note): the caller passes those as ``deleted``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    RECREATE_GROUP_AFTER_START_ANNOTATION,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.logic.keys import split_ordinal
from lws_operator.logic.objects import labels_of, meta_of

RECREATING_POLICIES = ("RecreateGroupOnPodRestart", "RecreateGroupAfterStart")


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return next((r for r in meta_of(obj).get("ownerReferences") or [] if r.get("controller")), None)


def restarted(pod: Mapping[str, Any]) -> bool:
    """A Running or Pending pod whose containers (or init containers) restarted."""
    status = pod.get("status") or {}
    if status.get("phase") not in ("Running", "Pending"):
        return False
    statuses = [*(status.get("containerStatuses") or []),
                *(status.get("initContainerStatuses") or [])]
    return any(int(s.get("restartCount") or 0) > 0 for s in statuses)


@dataclass(frozen=True)
class Recreation:
    """Delete ``leader`` (by UID) to recreate group ``group``, because of ``trigger``."""

    leader: str
    leader_uid: str
    trigger: str
    group: str
    why: str = ""

    @property
    def note(self) -> str:
        return (f"Worker pod {self.trigger} failed, deleted leader pod {self.leader} to recreate "
                f"group {self.group}")


def _group_starting(pods: list[Mapping[str, Any]], group: str, size: int) -> bool:
    members = [p for p in pods if labels_of(p).get(GROUP_INDEX_LABEL) == group
               and not meta_of(p).get("deletionTimestamp")]
    return len(members) != size or any(
        (p.get("status") or {}).get("phase") == "Pending" for p in members)


def _belongs_to(worker: Mapping[str, Any], leader: Mapping[str, Any],
                statefulsets: Mapping[str, Mapping[str, Any]]) -> bool:
    """Whether ``worker`` is of ``leader``'s current incarnation (owner UID chain)."""
    leader_meta = meta_of(leader)
    owner = _controller(worker)
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
    sts_owner = _controller(sts)
    return bool(sts_owner and sts_owner.get("kind") == "Pod"
                and sts_owner.get("name") == leader_meta.get("name")
                and sts_owner.get("uid") == leader_meta.get("uid"))


def _why(pod: Mapping[str, Any], leader: Mapping[str, Any]) -> str:
    """The facts behind a recreation, for the log: which incarnation failed and how."""
    meta = meta_of(pod)
    how = ("deleted" if meta.get("deletionTimestamp") or not pod.get("status")
           else "restarted" if restarted(pod) else "gone")
    owner = _controller(pod) or {}
    return (f"pod {meta.get('name')} (uid {meta.get('uid')}, owner {owner.get('kind')} "
            f"{owner.get('uid')}, phase {(pod.get('status') or {}).get('phase')}) {how}; "
            f"leader uid {meta_of(leader).get('uid')}")


def plan_recreations(lws: Mapping[str, Any], pods: Iterable[Mapping[str, Any]],
                     statefulsets: Iterable[Mapping[str, Any]],
                     deleted: Iterable[Mapping[str, Any]] = ()) -> list[Recreation]:
    """The groups to recreate this pass, at most one per leader."""
    spec = lws.get("spec") or {}
    template = spec.get("leaderWorkerTemplate") or {}
    policy = template.get("restartPolicy") or "RecreateGroupOnPodRestart"
    if policy not in RECREATING_POLICIES:
        return []
    after_start = policy == "RecreateGroupAfterStart" or (
        RECREATE_GROUP_AFTER_START_ANNOTATION in (meta_of(lws).get("annotations") or {}))
    size = int(template.get("size") or 1)
    live = list(pods)
    by_name = {str(meta_of(p).get("name")): p for p in live}
    sts_by_name = {str(meta_of(s).get("name")): s for s in statefulsets}
    triggers = [p for p in live if restarted(p) or meta_of(p).get("deletionTimestamp")]
    triggers += list(deleted)
    out: dict[str, Recreation] = {}
    for pod in triggers:
        name = str(meta_of(pod).get("name"))
        group = str(labels_of(pod).get(GROUP_INDEX_LABEL) or "")
        if after_start and _group_starting(live, group, size):
            continue
        if labels_of(pod).get(WORKER_INDEX_LABEL) == "0":
            leader: Mapping[str, Any] | None = by_name.get(name)
            if leader is None or meta_of(leader).get("uid") != meta_of(pod).get("uid"):
                continue  # this leader is gone already: its group is being recreated
        else:
            parsed = split_ordinal(name)
            leader = by_name.get(parsed[0]) if parsed else None
            if leader is None:
                continue
            if (labels_of(leader).get(TEMPLATE_REVISION_HASH_LABEL)
                    != labels_of(pod).get(TEMPLATE_REVISION_HASH_LABEL)):
                continue
            if not _belongs_to(pod, leader, sts_by_name):
                continue
        leader_meta = meta_of(leader)
        if leader_meta.get("deletionTimestamp"):
            continue
        leader_name = str(leader_meta.get("name"))
        out.setdefault(leader_name, Recreation(
            leader_name, str(leader_meta.get("uid")), name,
            str(labels_of(leader).get(GROUP_INDEX_LABEL) or group), _why(pod, leader)))
    return list(out.values())
