"""A DisaggregatedSet as its users think of it: the set, one child LeaderWorkerSet per (slice,
revision, role) with its groups and pods (``group_tree``'s model of each), and the per-role
Services a router selects backends with.

``kubectl lws tree`` draws it and prints it as data (:func:`ds_tree_data`); the demo shows it.
Only the children and Services the set controls (a controller ownerReference to its UID) are
its own, as the controller judges them: a hand-made object carrying its labels is not shown.
Children are in slice order, then the target revision before old ones, then spec role order
(removed roles last), so a rollout reads from the top as new beside old. Pure: no client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lws_operator.api.disaggregated import REVISION_LABEL, ROLE_LABEL, DisaggregatedSetView
from lws_operator.api.view import labels, metadata
from lws_operator.logic.disaggregated import slices
from lws_operator.plugin.analysis.group_tree import SetNode, tree_data

KIND_NAME = "DisaggregatedSet"


@dataclass(frozen=True)
class ChildNode:
    """One child LeaderWorkerSet: its role, slice, revision, whether that is the set's target
    revision, and its tree."""

    role: str
    slice: int
    revision: str
    current: bool
    tree: SetNode


@dataclass(frozen=True)
class ServiceNode:
    name: str
    role: str
    revision: str


@dataclass(frozen=True)
class DsNode:
    """The set: its roles in spec order with their status counts, its target revision and
    conditions, its children and Services."""

    namespace: str
    name: str
    roles: tuple[str, ...]
    slices: int
    revision: str
    conditions: Mapping[str, str]
    role_statuses: tuple[Mapping[str, Any], ...]
    children: tuple[ChildNode, ...]
    services: tuple[ServiceNode, ...]


def _role_order(roles: Sequence[str], role: str) -> tuple[int, str]:
    return (roles.index(role), "") if role in roles else (len(roles), role)


def build_ds_tree(ds: Mapping[str, Any], revision: str, children: Sequence[Mapping[str, Any]],
                  trees: Mapping[str, SetNode],
                  services: Sequence[Mapping[str, Any]] = ()) -> DsNode:
    """The model of ``ds`` whose target revision is ``revision``: ``children`` its child
    LeaderWorkerSets (only those it controls are kept), ``trees`` each child's tree by name,
    ``services`` its Services (likewise)."""
    view = DisaggregatedSetView.of(ds)
    roles = tuple(r.name for r in view.roles)
    nodes = []
    for lws in slices.owned(children, view):
        name = str(metadata(lws).get("name") or "")
        if name not in trees:
            continue
        rev = slices.revision_label(lws)
        nodes.append(ChildNode(role=slices.role_of(lws), slice=slices.slice_index_of(lws) or 0,
                               revision=rev, current=rev == revision, tree=trees[name]))
    nodes.sort(key=lambda c: (c.slice, not c.current, c.revision, _role_order(roles, c.role)))
    svc = sorted((ServiceNode(str(metadata(s).get("name") or ""),
                              str(labels(s).get(ROLE_LABEL) or ""),
                              str(labels(s).get(REVISION_LABEL) or ""))
                  for s in slices.owned(services, view)), key=lambda s: s.name)
    status = view.status
    conditions = {str(c.get("type")): str(c.get("status"))
                  for c in status.get("conditions") or () if isinstance(c, Mapping)}
    statuses = tuple(dict(e) for e in status.get("roleStatuses") or () if isinstance(e, Mapping))
    return DsNode(namespace=view.namespace, name=view.name, roles=roles, slices=view.slices,
                  revision=revision, conditions=conditions, role_statuses=statuses,
                  children=tuple(nodes), services=tuple(svc))


def ds_tree_data(node: DsNode) -> dict[str, Any]:
    """The model as plain data (``-o json|yaml``); ``kind`` tells it from a LeaderWorkerSet's
    in a list of both."""
    return {
        "kind": KIND_NAME, "namespace": node.namespace, "name": node.name,
        "roles": list(node.roles), "slices": node.slices, "revision": node.revision,
        "conditions": dict(node.conditions), "roleStatuses": [dict(e) for e in node.role_statuses],
        "leaderWorkerSets": [{"role": c.role, "slice": c.slice, "revision": c.revision,
                              "current": c.current, "tree": tree_data(c.tree)}
                             for c in node.children],
        "services": [{"name": s.name, "role": s.role, "revision": s.revision}
                     for s in node.services],
    }
