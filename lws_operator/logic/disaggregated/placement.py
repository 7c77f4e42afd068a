"""Placement policy: the required pod (anti-)affinity that pins each slice of a
DisaggregatedSet into one topology domain (upstream's placement utilities, KEP-848).

``ExclusiveSlice`` co-locates a slice's roles and keeps the set's other slices out of its domain;
``ExclusiveTopology`` also keeps every other DisaggregatedSet's slices out. The terms select on
the set's name and slice labels (every pod carries them) and use the policy's topology key. The
first pod of a slice may land anywhere (a required self-affinity with no matching pod is
satisfiable); the others follow it.

For slice 0 the anti-affinity term also requires the slice label to exist: a legacy pod of slice
0 has no slice label, and ``NotIn ["0"]`` alone would match it and repel its own successor.

The terms are appended after the user's own required terms, to a deep copy of the user's
affinity (node affinity and preferred terms are kept), and only when the LeaderWorkerSet is
created: the policy is not part of the revision, so a change reaches a slice at its next rollout
or when the slice is new. The match expressions are in the order upstream writes them (its tests
compare the lists).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from lws_operator.api.disaggregated import (
    NAME_LABEL,
    PLACEMENT_EXCLUSIVE_SLICE,
    PLACEMENT_EXCLUSIVE_TOPOLOGY,
    SLICE_LABEL,
    PlacementPolicy,
)

_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        out["values"] = list(values)
    return out


def _term(topology: str, *expressions: dict[str, Any]) -> dict[str, Any]:
    return {"labelSelector": {"matchExpressions": list(expressions)}, "topologyKey": topology}


def placement_terms(ds: str, slice_index: int,
                    policy: PlacementPolicy | None) -> tuple[list[Any], list[Any]]:
    """The (podAffinity, podAntiAffinity) required terms the policy injects for one slice;
    both empty when nothing is injected (no policy, type None or empty, no topology, or a type
    this release does not know)."""
    if policy is None or not policy.active or policy.type not in (
            PLACEMENT_EXCLUSIVE_SLICE, PLACEMENT_EXCLUSIVE_TOPOLOGY):
        return [], []
    k = str(slice_index)
    topology = policy.topology
    affinity = [_term(topology, _expr(NAME_LABEL, "In", ds), _expr(SLICE_LABEL, "In", k))]
    spread = [_expr(NAME_LABEL, "In", ds)]
    if slice_index == 0:
        spread.append(_expr(SLICE_LABEL, "Exists"))
    spread.append(_expr(SLICE_LABEL, "NotIn", k))
    anti = [_term(topology, *spread)]
    if policy.type == PLACEMENT_EXCLUSIVE_TOPOLOGY:
        anti.append(_term(topology, _expr(NAME_LABEL, "Exists"),
                          _expr(NAME_LABEL, "NotIn", ds), _expr(SLICE_LABEL, "Exists")))
    return affinity, anti


def placement_affinity(affinity: Mapping[str, Any] | None, ds: str, slice_index: int,
                       policy: PlacementPolicy | None) -> dict[str, Any] | None:
    """A deep copy of a pod spec's ``affinity`` with the policy's terms appended to the required
    lists (None stays None when nothing is injected). The argument is never modified."""
    out = copy.deepcopy(dict(affinity)) if isinstance(affinity, Mapping) else None
    pod_affinity, pod_anti = placement_terms(ds, slice_index, policy)
    if not pod_affinity and not pod_anti:
        return out
    out = out if out is not None else {}
    for kind, terms in (("podAffinity", pod_affinity), ("podAntiAffinity", pod_anti)):
        if not terms:
            continue
        section = out.get(kind)
        section = section if isinstance(section, dict) else {}
        required = section.get(_REQUIRED)
        section[_REQUIRED] = [*(required if isinstance(required, list) else []), *terms]
        out[kind] = section
    return out


def _injected_shape(term: Any) -> bool:
    """Whether a required term has the shape :func:`placement_terms` writes (any topology, any
    slice), whoever wrote it."""
    if not isinstance(term, Mapping) or set(term) != {"labelSelector", "topologyKey"}:
        return False
    selector = term.get("labelSelector")
    if not isinstance(selector, Mapping) or set(selector) != {"matchExpressions"}:
        return False
    expressions = selector.get("matchExpressions")
    if not isinstance(expressions, list) or not expressions:
        return False
    return all(isinstance(e, Mapping) and e.get("key") in (NAME_LABEL, SLICE_LABEL)
               for e in expressions) and any(
        isinstance(e, Mapping) and e.get("key") == SLICE_LABEL for e in expressions)


def without_placement(affinity: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """``affinity`` without the terms a placement policy injects, and without the sections left
    empty by their removal: what a user wrote, recovered from a child's template to compare it
    with the role's (the policy may have changed since the child was created, so the terms are
    recognised by shape, not rebuilt)."""
    if not isinstance(affinity, Mapping):
        return None
    out = copy.deepcopy(dict(affinity))
    for kind in ("podAffinity", "podAntiAffinity"):
        section = out.get(kind)
        if not isinstance(section, dict) or not isinstance(section.get(_REQUIRED), list):
            continue
        kept = [t for t in section[_REQUIRED] if not _injected_shape(t)]
        if kept:
            section[_REQUIRED] = kept
        else:
            del section[_REQUIRED]
        if not section:
            del out[kind]
    return out or None
