"""Slices, legacy (pre-slices) children and the replica reads of child LeaderWorkerSets
(upstream's TestSliceLabelMatches, TestGetInitialReplicas, TestSetInitialReplicas,
TestComputeInitialReplicaState, TestParseInitialReplicasAnnotation, TestGetLWSReplicas,
TestManagerListSliceBucketing, TestManagerGetForRoleIgnoresForeignOwnedLWS)."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.logic.disaggregated.slices import (
    ALL_SLICES,
    drained_revisions,
    duplicate_roles,
    find_role_lws,
    group_by_revision,
    in_removed_slice,
    in_slice_objects,
    initial_replica_state,
    initial_replicas_patch,
    legacy_migrations,
    lws_replicas,
    owned,
    parse_initial_replicas,
    replica_totals,
    set_initial_replicas,
    slice_index_of,
    slice_label_matches,
    with_initial_replicas,
)
from tests.harness.ds_bodies import child, ds, service

ANN = "disaggregatedset.x-k8s.io/initial-replicas"
SLICE = "disaggregatedset.x-k8s.io/slice"


# 238-245: TestSliceLabelMatches
@pytest.mark.parametrize(("labels", "slice_index", "matches"), [
    ({}, ALL_SLICES, True),
    ({SLICE: "3"}, ALL_SLICES, True),
    (None, 0, True),
    ({SLICE: ""}, 0, True),
    ({SLICE: "0"}, 0, True),
    ({SLICE: "1"}, 0, False),
    ({}, 1, False),
    ({SLICE: "1"}, 1, True),
])
def test_slice_label_matches(labels: dict[str, str] | None, slice_index: int,
                             matches: bool) -> None:
    assert slice_label_matches(labels, slice_index) is matches


# 139-143 and 220-225: the annotation parser
@pytest.mark.parametrize(("annotations", "value"), [
    (None, None),
    ({}, None),
    ({"other": "1"}, None),
    ({ANN: "not-a-number"}, None),
    ({ANN: ""}, None),
    ({ANN: "5"}, 5),
    ({ANN: "0"}, 0),
    ({ANN: "-3"}, None),             # a hand edit: unreadable (module docstring)
    ({ANN: "2147483647"}, 2147483647),
    ({ANN: "2147483648"}, None),     # beyond int32
    ({ANN: " 5"}, None),
])
def test_parse_initial_replicas(annotations: dict[str, str] | None, value: int | None) -> None:
    assert parse_initial_replicas(annotations) == value


# 226-229: TestSetInitialReplicas
def test_with_initial_replicas() -> None:
    assert with_initial_replicas(None, 3) == {ANN: "3"}
    original = {"keep": "me"}
    assert with_initial_replicas(original, 4) == {"keep": "me", ANN: "4"}
    assert original == {"keep": "me"}
    assert with_initial_replicas({ANN: "10"}, 7) == {ANN: "7"}
    assert with_initial_replicas({}, 0) == {ANN: "0"}


def test_set_initial_replicas_returns_the_previous_value() -> None:
    annotations: dict[str, Any] = {ANN: "5"}
    assert set_initial_replicas(annotations, 5) == 5
    assert set_initial_replicas(annotations, 10) == 5
    assert annotations == {ANN: "10"}
    fresh: dict[str, Any] = {}
    assert set_initial_replicas(fresh, 2) is None
    assert fresh == {ANN: "2"}


def test_initial_replicas_patch_writes_only_a_change() -> None:
    assert initial_replicas_patch(child("prefill", "a", replicas=5, initial="5")) is None
    assert initial_replicas_patch(child("prefill", "a", replicas=10, initial="5")) == {
        "metadata": {"annotations": {ANN: "10"}}}
    assert initial_replicas_patch(child("prefill", "a", replicas=None)) == {
        "metadata": {"annotations": {ANN: "1"}}}
    assert initial_replicas_patch(child("prefill", "a", replicas=0, initial="x")) == {
        "metadata": {"annotations": {ANN: "0"}}}


# 144-146: TestGetLWSReplicas
@pytest.mark.parametrize(("replicas", "value"), [(None, 1), (5, 5), (0, 0)])
def test_lws_replicas(replicas: int | None, value: int) -> None:
    assert lws_replicas(child("prefill", "a", replicas=replicas)) == value


# 230-237: TestComputeInitialReplicaState
@pytest.mark.parametrize(("children", "state"), [
    ([], {}),
    ([child("prefill", "a", initial="3"), child("prefill", "b", initial="2")], {"prefill": 5}),
    ([child("decode", "a", initial="4"), child("decode", "b", initial="6")], {"decode": 10}),
    ([child("prefill", "a", initial="5"), child("decode", "a", initial="6")],
     {"prefill": 5, "decode": 6}),
    ([child("prefill", "a", replicas=4)], {"prefill": 4}),
    ([child("prefill", "a", replicas=5, initial="invalid")], {"prefill": 5}),
    ([child("prefill", "a", initial="3"), child("prefill", "b", replicas=2, initial="bad")],
     {"prefill": 5}),
    ([child("prefill", "a", replicas=None)], {"prefill": 1}),
])
def test_initial_replica_state(children: list[dict[str, Any]], state: dict[str, int]) -> None:
    assert initial_replica_state(children) == state


# 167-169: TestManagerListSliceBucketing
def test_slice_bucketing() -> None:
    s0 = child("prefill", "r", 0, name="s0")
    s1 = child("prefill", "r", 1, name="s1")
    legacy = child("prefill", "r", None, name="legacy")
    unowned = child("prefill", "r", 0, name="unowned", uid="someone-else")
    mine = owned([s0, s1, legacy, unowned], ds())
    assert in_slice_objects(mine, 0) == [s0, legacy]
    assert in_slice_objects(mine, 1) == [s1]
    assert in_slice_objects(mine, ALL_SLICES) == [s0, s1, legacy]


def test_owned_needs_a_controller_reference() -> None:
    not_controller = child("prefill", "r")
    not_controller["metadata"]["ownerReferences"][0]["controller"] = False
    assert owned([not_controller, child("prefill", "r", uid=None)], ds()) == []


# 170-172: TestManagerGetForRoleIgnoresForeignOwnedLWS
def test_find_role_lws_ignores_foreign_objects() -> None:
    owner = ds()
    foreign = child("prefill", "rev", 0, uid="other")
    assert find_role_lws([foreign], owner, 0, "rev", "prefill") is None
    foreign_legacy = child("prefill", "rev", None, uid="other")
    assert find_role_lws([foreign_legacy], owner, 0, "rev", "prefill") is None
    mine = child("prefill", "rev", 0)
    assert find_role_lws([foreign_legacy, mine], owner, 0, "rev", "prefill") is mine


def test_find_role_lws_adopts_legacy_only_in_slice_0() -> None:
    owner = ds()
    legacy = child("prefill", "rev", None)
    assert find_role_lws([legacy], owner, 0, "rev", "prefill") is legacy
    assert find_role_lws([legacy], owner, 1, "rev", "prefill") is None
    aware = child("prefill", "rev", 0)
    assert find_role_lws([legacy, aware], owner, 0, "rev", "prefill") is aware


@pytest.mark.parametrize(("label", "index"), [
    (None, None), ("", None), ("x", None), ("0", 0), ("12", 12), ("+1", 1), ("-1", -1),
])
def test_slice_index_of(label: str | None, index: int | None) -> None:
    obj = child("prefill", "r", None)
    if label is not None:
        obj["metadata"]["labels"][SLICE] = label
    assert slice_index_of(obj) == index


def test_in_removed_slice() -> None:
    assert in_removed_slice(child("p", "r", 1), 1)
    assert in_removed_slice(child("p", "r", 2), 1)
    assert not in_removed_slice(child("p", "r", 0), 1)
    assert not in_removed_slice(child("p", "r", None), 1)   # legacy: never removed this way
    assert in_removed_slice(service("s", "r", "p", 3), 2)
    assert not in_removed_slice(service("s", "r", "p", None), 1)


def test_group_by_revision_keeps_the_last_duplicate() -> None:
    first = child("prefill", "a", 0, name="first")
    second = child("prefill", "a", 0, name="second")
    decode = child("decode", "a", 0)
    other = child("prefill", "b", 0)
    groups = group_by_revision([first, decode, second, other])
    assert list(groups) == ["a", "b"]
    assert groups["a"] == {"prefill": second, "decode": decode}
    assert duplicate_roles([first, decode, second, other]) == [("a", "prefill")]


def test_drained_revisions() -> None:
    groups = group_by_revision([
        child("prefill", "old", replicas=0), child("decode", "old", replicas=0),
        child("prefill", "half", replicas=0), child("decode", "half", replicas=1),
        child("prefill", "nil", replicas=None), child("decode", "nil", replicas=0),
        child("prefill", "target", replicas=0), child("decode", "target", replicas=0),
    ])
    # The target is never drained; absent replicas count as 1.
    assert drained_revisions(groups, "target") == ["old"]


def test_legacy_migrations() -> None:
    owner = ds(slices=2)
    legacy_prefill = child("prefill", "rev", None)
    legacy_decode = child("decode", "rev", None)
    older = child("prefill", "old", None)
    foreign = child("decode", "rev", None, uid="other")
    assert legacy_migrations(owner, "rev", [legacy_prefill, legacy_decode, older]) == [
        ("my-ds-rev-prefill-prv", "my-ds-rev-prefill"),
        ("my-ds-rev-decode-prv", "my-ds-rev-decode"),
    ]
    # A foreign object at the legacy name is ignored; an older revision is left to the rollout.
    assert legacy_migrations(owner, "rev", [foreign, older]) == []
    # One slice: the legacy child is adopted in place.
    assert legacy_migrations(ds(slices=1), "rev", [legacy_prefill]) == []
    assert legacy_migrations(ds(), "rev", [legacy_prefill]) == []
    # A slice-labelled object at the legacy name is not legacy.
    labelled = child("prefill", "rev", 0, name="my-ds-rev-prefill")
    assert legacy_migrations(owner, "rev", [labelled]) == []


def test_replica_totals() -> None:
    assert replica_totals([]) == {}
    assert replica_totals([child("prefill", "a", replicas=2), child("prefill", "b", replicas=None),
                           child("decode", "a", replicas=0)]) == {"prefill": 3, "decode": 0}
