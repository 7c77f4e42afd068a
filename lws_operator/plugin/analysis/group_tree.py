"""A LeaderWorkerSet as its users think of it: the set, its groups, each group's pods.

``kubectl lws tree`` and ``make demo`` show this model; ``-o json|yaml`` emits it as data
(:func:`tree_data`), so a script reads exactly what the tree shows. It is built from what the
API returns for a set (the LeaderWorkerSet, its pods, its leader StatefulSet or Deployment) and
reads only labels and annotations the upstream controller writes too (``api.constants``), so
it shows a set managed by either controller. The restart budget (an exhausted group) is this
operator's own: a set run by the upstream controller never shows one.

Pure: no client. A group is keyed by its ``group-index`` label (the ordinal, or in Hash mode
the first characters of its group key), the same key ``kubectl lws recover`` and ``restart``
take.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.api.constants import (
    CONTROLLER_REVISION_HASH_LABEL,
    GROUP_KEY_LABEL,
    NAME_LABEL,
    SUBGROUP_INDEX_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.api.view import (
    deleting,
    group_index,
    is_leader,
    labels,
    lws_view,
    revision_of,
)
from lws_operator.logic.failures.restart_budget import exhausted
from lws_operator.logic.identity.keys import parse_int
from lws_operator.logic.objects.meta import name_of
from lws_operator.logic.status.readiness import pod_running_and_ready

# Group states, in the order of their urgency.
READY = "Ready"
NOT_READY = "NotReady"
TERMINATING = "Terminating"
EXHAUSTED = "RestartBudgetExhausted"


@dataclass(frozen=True)
class PodNode:
    """One pod of a group."""

    name: str
    role: str  # "leader" or "worker"
    worker_index: int | None
    subgroup: str | None
    node: str | None
    phase: str
    ready: bool
    revision: str
    controller_revision: str | None
    restarts: int
    gated: bool  # held by scheduling gates (not yet admitted to the scheduler)
    terminating: bool


@dataclass(frozen=True)
class GroupNode:
    """One group (replica): the leader and its workers."""

    index: str
    key: str | None  # the group key, shown for Hash identity only
    revision: str
    state: str
    updated: bool  # on the set's current revision
    pods: tuple[PodNode, ...]

    @property
    def ready(self) -> bool:
        return self.state == READY


@dataclass(frozen=True)
class SetNode:
    """One LeaderWorkerSet and its groups, in group order."""

    namespace: str
    name: str
    group_identity: str
    replicas: int
    size: int
    ready_replicas: int
    updated_replicas: int
    revision: str  # the revision the leader StatefulSet or Deployment carries ('' if none)
    conditions: Mapping[str, str]  # condition type -> status
    groups: tuple[GroupNode, ...]


def _restarts(pod: Mapping[str, Any]) -> int:
    status = pod.get("status") or {}
    total = 0
    for key in ("containerStatuses", "initContainerStatuses"):
        for container in status.get(key) or ():
            if isinstance(container, Mapping):
                total += int(container.get("restartCount") or 0)
    return total


def _int_or_none(value: Any) -> int | None:
    try:
        return parse_int(str(value))
    except ValueError:
        return None


def pod_node(pod: Mapping[str, Any]) -> PodNode:
    """What the tree shows of one pod."""
    own = labels(pod)
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    node = spec.get("nodeName")
    subgroup = own.get(SUBGROUP_INDEX_LABEL)
    controller_revision = own.get(CONTROLLER_REVISION_HASH_LABEL)
    return PodNode(
        name=name_of(pod),
        role="leader" if is_leader(pod) else "worker",
        worker_index=_int_or_none(own.get(WORKER_INDEX_LABEL)),
        subgroup=None if subgroup is None else str(subgroup),
        node=str(node) if node else None,
        phase=str(status.get("phase") or "Pending"),
        ready=pod_running_and_ready(pod),
        revision=revision_of(pod),
        controller_revision=None if controller_revision is None else str(controller_revision),
        restarts=_restarts(pod),
        gated=bool(spec.get("schedulingGates")),
        terminating=deleting(pod))


def _group_order(index: str) -> tuple[int, int, str]:
    number = _int_or_none(index)
    return (0, number, "") if number is not None else (1, 0, index)


def _pod_order(pod: PodNode) -> tuple[int, str]:
    return (pod.worker_index if pod.worker_index is not None else 1 << 30, pod.name)


def _group_state(pods: list[Mapping[str, Any]], leader: Mapping[str, Any] | None,
                 size: int) -> str:
    if leader is not None and is_leader(leader) and exhausted(leader):
        return EXHAUSTED
    if leader is None or deleting(leader):
        return TERMINATING
    live = [p for p in pods if not deleting(p)]
    if len(live) >= size and all(pod_running_and_ready(p) for p in live):
        return READY
    return NOT_READY


def build_tree(lws: Mapping[str, Any], pods: Iterable[Mapping[str, Any]],
               leader_workload: Mapping[str, Any] | None = None) -> SetNode:
    """The tree of ``lws`` from its pods (those labelled with its name; others are ignored)
    and its leader StatefulSet or Deployment (whose revision label is the set's current
    revision, as the controllers write it)."""
    view = lws_view(lws)
    mine = [p for p in pods if labels(p).get(NAME_LABEL) == view.name]
    by_group: dict[str, list[Mapping[str, Any]]] = {}
    for pod in mine:
        by_group.setdefault(group_index(pod) or "?", []).append(pod)
    current = revision_of(leader_workload)
    groups = []
    for index in sorted(by_group, key=_group_order):
        members = by_group[index]
        leaders = [p for p in members if is_leader(p)]
        leader = next((p for p in leaders if not deleting(p)), leaders[0] if leaders else None)
        revision = revision_of(leader) if leader is not None else revision_of(members[0])
        key = labels(members[0]).get(GROUP_KEY_LABEL) if view.hashed else None
        groups.append(GroupNode(
            index=index, key=None if key is None else str(key), revision=revision,
            state=_group_state(members, leader, view.size),
            updated=bool(current) and revision == current,
            pods=tuple(sorted((pod_node(p) for p in members), key=_pod_order))))
    status = view.status
    conditions = {str(c.get("type")): str(c.get("status"))
                  for c in status.get("conditions") or () if isinstance(c, Mapping)}
    return SetNode(
        namespace=view.namespace, name=view.name, group_identity=view.group_identity,
        replicas=view.replicas, size=view.size,
        ready_replicas=int(status.get("readyReplicas") or 0),
        updated_replicas=int(status.get("updatedReplicas") or 0),
        revision=current, conditions=conditions, groups=tuple(groups))


def pod_data(pod: PodNode) -> dict[str, Any]:
    return {"name": pod.name, "role": pod.role, "workerIndex": pod.worker_index,
            "subgroup": pod.subgroup, "node": pod.node, "phase": pod.phase, "ready": pod.ready,
            "revision": pod.revision, "controllerRevisionHash": pod.controller_revision,
            "restarts": pod.restarts, "schedulingGated": pod.gated,
            "terminating": pod.terminating}


def tree_data(tree: SetNode) -> dict[str, Any]:
    """The tree as plain data (what ``-o json|yaml`` prints), keys in camelCase like the API."""
    return {
        "namespace": tree.namespace, "name": tree.name, "groupIdentity": tree.group_identity,
        "replicas": tree.replicas, "size": tree.size, "readyReplicas": tree.ready_replicas,
        "updatedReplicas": tree.updated_replicas, "revision": tree.revision,
        "conditions": dict(tree.conditions),
        "groups": [{"index": g.index, "groupKey": g.key, "revision": g.revision,
                    "state": g.state, "updated": g.updated,
                    "pods": [pod_data(p) for p in g.pods]} for g in tree.groups],
    }
