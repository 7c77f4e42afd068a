"""The group disruption budget: its annotation (``api.disruption``), its validation, the groups
it counts as disrupted and the decision on one eviction (``logic.disruption.budget``)."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api import disruption, validation
from lws_operator.api.constants import GROUP_INDEX_LABEL, MAX_DISRUPTED_GROUPS_ANNOTATION
from lws_operator.logic.disruption.budget import decide, disrupted_groups


def pod(group: str, ready: bool = True, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"labels": {GROUP_INDEX_LABEL: group}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "status": {"conditions": [
        {"type": "Ready", "status": "True" if ready else "False"}]}}


def whole(*groups: str, size: int = 2) -> list[dict[str, Any]]:
    return [pod(g) for g in groups for _ in range(size)]


@pytest.mark.parametrize(("value", "replicas", "budget"), [
    ("1", 4, 1), ("0", 4, 0), ("3", 2, 3),
    ("25%", 4, 1), ("25%", 3, 1), ("50%", 3, 2), ("0%", 8, 0), ("100%", 5, 5),
    ("1%", 1, 1), ("10%", 0, 0),
])
def test_budget_resolves_like_a_pdb_max_unavailable(value: str, replicas: int,
                                                     budget: int) -> None:
    assert disruption.budget_of({MAX_DISRUPTED_GROUPS_ANNOTATION: value}, replicas) == budget


@pytest.mark.parametrize("value", ["", "-1", "1.5", "x", "101%", "%", "1 ", "1%%"])
def test_bad_values_guard_nothing_and_are_refused_by_validation(value: str) -> None:
    assert disruption.budget_of({MAX_DISRUPTED_GROUPS_ANNOTATION: value}, 4) is None
    lws = {"metadata": {"name": "a", "annotations": {MAX_DISRUPTED_GROUPS_ANNOTATION: value}},
           "spec": {"replicas": 1, "leaderWorkerTemplate": {
               "size": 1, "workerTemplate": {"spec": {"containers": [
                   {"name": "c", "image": "i"}]}}}}}
    errors = validation.validate(lws, None)
    assert [e.path for e in errors] == [f"metadata.annotations.{MAX_DISRUPTED_GROUPS_ANNOTATION}"]
    text = validation.aggregate_message(errors)
    assert text.startswith(f"metadata.annotations.{MAX_DISRUPTED_GROUPS_ANNOTATION}: "
                           f"Invalid value: ")
    assert ("100%" in text) if value == "101%" else ("percentage of spec.replicas" in text)


def test_unannotated_sets_have_no_budget() -> None:
    assert disruption.budget_of({}, 4) is None


@pytest.mark.parametrize(("pods", "replicas", "size", "disrupted"), [
    (whole("0", "1", "2"), 3, 2, set()),
    (whole("0", "1"), 3, 2, {"2"}),  # a group with no pod at all
    ([*whole("0", "1"), pod("2")], 3, 2, {"2"}),  # a missing worker
    ([*whole("0", "1"), pod("2"), pod("2", ready=False)], 3, 2, {"2"}),
    ([*whole("0", "1"), pod("2"), pod("2", deleting=True)], 3, 2, {"2"}),  # being evicted
    ([*whole("0", "1", "2"), pod("2", deleting=True)], 3, 2, {"2"}),  # replaced, old going
    (whole("0", "1", "2", "3"), 3, 2, set()),  # index 3 is scaling away: not counted
    ([*whole("0"), pod("3", ready=False)], 2, 2, {"1"}),
    ([pod("0", ready=False)], 1, 1, {"0"}),
    ([], 0, 1, set()),
])
def test_disrupted_groups(pods: list[dict[str, Any]], replicas: int, size: int,
                          disrupted: set[str]) -> None:
    assert disrupted_groups(pods, replicas, size) == disrupted


@pytest.mark.parametrize(("pods", "replicas", "disrupted"), [
    (whole("aaaa", "bbbb"), 2, set()),
    ([*whole("aaaa"), pod("bbbb")], 2, {"bbbb"}),
    (whole("aaaa"), 2, {"missing-0"}),  # a group torn down, its replacement not created yet
    ([*whole("aaaa", "bbbb"), pod("cccc", ready=False)], 2, {"cccc"}),  # a replacement
    ([], 2, {"missing-0", "missing-1"}),
])
def test_hash_groups_are_the_keys_seen_and_the_missing(pods: list[dict[str, Any]],
                                                      replicas: int,
                                                      disrupted: set[str]) -> None:
    assert disrupted_groups(pods, replicas, 2, hashed=True) == disrupted
    assert decide(group="aaaa", budget=1, disrupted=disrupted,
                  set_name="ns/h").allowed is (not disrupted)


@pytest.mark.parametrize(("group", "budget", "disrupted", "allowed", "reserve"), [
    ("0", 1, set(), True, True),  # the first group may go
    ("1", 1, {"0"}, False, False),  # a second healthy group may not
    ("0", 1, {"0"}, True, False),  # more of an already disrupted group: free
    ("2", 1, {"0", "1"}, False, False),  # over budget already (a rollout): still refused
    ("1", 1, {"0", "1"}, True, False),  # ... but a disrupted group's pods may go
    ("1", 2, {"0"}, True, True),
    ("2", 2, {"0", "1"}, False, False),
    ("0", 0, set(), False, False),  # 0: never a healthy group
    ("0", 0, {"0"}, True, False),
    (None, 1, {"0"}, True, False),  # a pod of no counted group
])
def test_decision(group: str | None, budget: int, disrupted: set[str], allowed: bool,
                  reserve: bool) -> None:
    decision = decide(group=group, budget=budget, disrupted=disrupted, set_name="ns/serve")
    assert (decision.allowed, decision.reserve) == (allowed, reserve)
    if not allowed:
        assert decision.message.startswith("Cannot evict pod as it would violate the group "
                                           "disruption budget of LeaderWorkerSet ns/serve")
        assert f"at most {budget} group" in decision.message
    else:
        assert decision.message == ""
