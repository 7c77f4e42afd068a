"""Placement policy affinity (upstream's TestSetPlacementAffinities, KEP-848)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.api.disaggregated import PlacementPolicy
from lws_operator.logic.disaggregated.placement import (
    placement_affinity,
    placement_terms,
    without_placement,
)

NAME = "disaggregatedset.x-k8s.io/name"
SLICE = "disaggregatedset.x-k8s.io/slice"
REQ = "requiredDuringSchedulingIgnoredDuringExecution"


def term(topology: str, *expressions: dict[str, Any]) -> dict[str, Any]:
    return {"topologyKey": topology, "labelSelector": {"matchExpressions": list(expressions)}}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


# 213-215: nil, None, a type without topology
@pytest.mark.parametrize("policy", [
    None,
    PlacementPolicy("None", "rack"),
    PlacementPolicy("", "rack"),
    PlacementPolicy("ExclusiveSlice", ""),
    PlacementPolicy("ExclusiveTopology", ""),
])
def test_nothing_injected(policy: PlacementPolicy | None) -> None:
    assert placement_affinity(None, "my-ds", 1, policy) is None
    user = {"nodeAffinity": {"x": 1}}
    assert placement_affinity(user, "my-ds", 1, policy) == user


# 216
def test_exclusive_slice_slice_1() -> None:
    affinity = placement_affinity(None, "my-ds", 1, PlacementPolicy("ExclusiveSlice", "rack"))
    assert affinity == {
        "podAffinity": {REQ: [term("rack", expr(NAME, "In", "my-ds"), expr(SLICE, "In", "1"))]},
        "podAntiAffinity": {REQ: [term("rack", expr(NAME, "In", "my-ds"),
                                       expr(SLICE, "NotIn", "1"))]},
    }


# 217
def test_exclusive_slice_slice_0_requires_the_slice_label_to_exist() -> None:
    affinity = placement_affinity(None, "my-ds", 0, PlacementPolicy("ExclusiveSlice", "rack"))
    assert affinity is not None
    assert affinity["podAntiAffinity"][REQ] == [term(
        "rack", expr(NAME, "In", "my-ds"), expr(SLICE, "Exists"), expr(SLICE, "NotIn", "0"))]


def test_exclusive_topology_the_spec_example() -> None:
    """The worker affinity for ds my-ds, slice 0, ExclusiveTopology on rack, term for term and
    expression for expression in order."""
    affinity = placement_affinity(None, "my-ds", 0,
                                  PlacementPolicy("ExclusiveTopology", "rack"))
    assert affinity == {
        "podAffinity": {REQ: [
            term("rack", expr(NAME, "In", "my-ds"), expr(SLICE, "In", "0"))]},
        "podAntiAffinity": {REQ: [
            term("rack", expr(NAME, "In", "my-ds"), expr(SLICE, "Exists"),
                 expr(SLICE, "NotIn", "0")),
            term("rack", expr(NAME, "Exists"), expr(NAME, "NotIn", "my-ds"),
                 expr(SLICE, "Exists")),
        ]},
    }


# 218
def test_exclusive_topology_slice_1_counts() -> None:
    pod_affinity, anti = placement_terms("d", 1, PlacementPolicy("ExclusiveTopology", "zone"))
    assert len(pod_affinity) == 1
    assert len(anti) == 2
    assert anti[1]["labelSelector"]["matchExpressions"] == [
        expr(NAME, "Exists"), expr(NAME, "NotIn", "d"), expr(SLICE, "Exists")]


def test_unknown_type_injects_nothing() -> None:
    assert placement_terms("d", 0, PlacementPolicy("Spread", "zone")) == ([], [])


# 219
def test_preserves_the_users_affinity_and_never_mutates_it() -> None:
    user_term = term("zone", expr("app", "In", "cache"))
    user: dict[str, Any] = {
        "nodeAffinity": {REQ: {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "gpu", "operator": "Exists"}]}]}},
        "podAffinity": {REQ: [user_term], "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 1, "podAffinityTerm": user_term}]},
    }
    before = copy.deepcopy(user)
    out = placement_affinity(user, "my-ds", 1, PlacementPolicy("ExclusiveSlice", "rack"))
    assert user == before
    assert out is not None
    assert out["nodeAffinity"] == user["nodeAffinity"]
    assert out["podAffinity"][REQ][0] == user_term
    assert out["podAffinity"][REQ][1]["topologyKey"] == "rack"
    assert out["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] == \
        user["podAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    out["nodeAffinity"][REQ]["nodeSelectorTerms"].clear()
    assert user == before


@pytest.mark.parametrize("policy", [PlacementPolicy("ExclusiveSlice", "rack"),
                                    PlacementPolicy("ExclusiveTopology", "zone")])
@pytest.mark.parametrize("slice_index", [0, 3])
def test_without_placement_undoes_the_injection(policy: PlacementPolicy,
                                                slice_index: int) -> None:
    assert without_placement(placement_affinity(None, "d", slice_index, policy)) is None
    user = {"nodeAffinity": {"n": 1}, "podAffinity": {REQ: [term("z", expr("a", "In", "b"))]}}
    assert without_placement(placement_affinity(user, "d", slice_index, policy)) == user
