"""DisaggregatedSet status: role statuses and the Available/Progressing merge (upstream's
status_test.go and the status cases of its controller tests)."""

from __future__ import annotations

from typing import Any

from lws_operator.logic.disaggregated.status import (
    AVAILABLE_MESSAGE,
    PROGRESSING_MESSAGE,
    compute_status,
    computed_condition,
    is_available,
    role_statuses,
    set_condition,
)
from tests.harness.ds_bodies import child, ds, role, scaler

NOW = "2026-12-01T18:00:00Z"
T0 = "2026-11-01T00:00:00Z"


def cond(kind: str, status: str, reason: str, message: str, generation: int = 1,
         when: str = T0) -> dict[str, Any]:
    return {"type": kind, "status": status, "observedGeneration": generation,
            "lastTransitionTime": when, "reason": reason, "message": message}


AVAILABLE = ("AllRolesReady", AVAILABLE_MESSAGE)
PROGRESSING = ("RolloutInProgress", PROGRESSING_MESSAGE)


def ready(role_name: str, rev: str, n: int, slice_index: int = 0) -> dict[str, Any]:
    return child(role_name, rev, slice_index, replicas=n, ready=n, status_replicas=n, updated=n)


def test_role_statuses_aggregate_all_slices_and_revisions() -> None:
    owner = ds(role("prefill"), role("decode"), role("encode"))
    children = [
        child("prefill", "new", 0, status_replicas=2, ready=1, updated=2),
        child("prefill", "new", 1, status_replicas=2, ready=2, updated=2),
        child("prefill", "old", 0, status_replicas=3, ready=3, updated=3),
        child("decode", "old", None, status_replicas=1, ready=1, updated=1),
        child("gone", "old", 0, status_replicas=4, ready=4, updated=4),
    ]
    assert role_statuses(owner, children, "new") == [
        {"name": "prefill", "replicas": 7, "readyReplicas": 6, "updatedReplicas": 4},
        {"name": "decode", "replicas": 1, "readyReplicas": 1},    # zero counts omitted
        {"name": "encode"},
    ]


# 204: TestStatusPopulatedOnFreshDeployment
def test_fresh_deployment() -> None:
    owner = ds(generation=4)
    decision = compute_status(owner, [], "r", {}, NOW)
    assert decision.changed
    assert decision.status == {
        "observedGeneration": 4,
        "roleStatuses": [{"name": "prefill"}, {"name": "decode"}],
        "conditions": [cond("Progressing", "True", *PROGRESSING, generation=4, when=NOW)],
    }


# 205: TestStatusRoleCountsAggregateFromOwnedLWS
def test_all_roles_ready() -> None:
    owner = ds(role("prefill", replicas=2), role("decode", replicas=2), status={
        "observedGeneration": 1,
        "conditions": [cond("Progressing", "True", *PROGRESSING)]})
    decision = compute_status(owner, [ready("prefill", "r", 2), ready("decode", "r", 2)], "r",
                              {}, NOW)
    assert decision.status["roleStatuses"] == [
        {"name": "prefill", "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2},
        {"name": "decode", "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2}]
    assert decision.status["conditions"] == [
        cond("Progressing", "False", *AVAILABLE, when=NOW),
        cond("Available", "True", *AVAILABLE, when=NOW)]


# 206: TestStatusProgressingWhenUnderDesiredCount
def test_under_desired_count() -> None:
    owner = ds(role("prefill", replicas=3), role("decode", replicas=1))
    statuses = role_statuses(owner, [ready("prefill", "r", 1), ready("decode", "r", 1)], "r")
    assert not is_available(owner, {}, statuses)


def test_not_updated_or_not_ready_is_not_available() -> None:
    owner = ds()
    old = child("prefill", "old", replicas=1, ready=1, status_replicas=1, updated=1)
    assert not is_available(owner, {}, role_statuses(owner, [old, ready("decode", "r", 1)], "r"))
    unready = child("prefill", "r", replicas=1, ready=0, status_replicas=1, updated=1)
    assert not is_available(owner, {}, role_statuses(owner, [unready, ready("decode", "r", 1)],
                                                     "r"))
    # More than wanted is not available either.
    assert not is_available(owner, {}, role_statuses(
        owner, [ready("prefill", "r", 2), ready("decode", "r", 1)], "r"))


# 207: TestStatusAvailableWhenPausedAtZero
def test_paused_at_zero_is_available() -> None:
    owner = ds(role("prefill", replicas=0), role("decode", replicas=0))
    assert is_available(owner, {}, role_statuses(owner, [], "r"))


def test_slices_multiply_the_wanted_count() -> None:
    owner = ds(role("prefill", replicas=2), role("decode", replicas=1), slices=2)
    one_slice = [ready("prefill", "r", 2), ready("decode", "r", 1)]
    assert not is_available(owner, {}, role_statuses(owner, one_slice, "r"))
    both = [*one_slice, ready("prefill", "r", 2, 1), ready("decode", "r", 1, 1)]
    assert is_available(owner, {}, role_statuses(owner, both, "r"))


# 208: TestStatusUsesScalerTargetForExternalRoles
def test_external_role_uses_its_scaler() -> None:
    owner = ds(role("prefill", replicas=5, external=True), role("decode", replicas=2))
    children = [ready("prefill", "r", 1), ready("decode", "r", 2)]
    statuses = role_statuses(owner, children, "r")
    assert is_available(owner, {"prefill": scaler("prefill", 1)}, statuses)
    assert not is_available(owner, {"prefill": scaler("prefill", 3)}, statuses)


# 209: TestStatusProgressingWhenExternalRoleScalerMissing
def test_external_role_without_scaler_is_progressing() -> None:
    owner = ds(role("prefill", external=True), role("decode", replicas=0))
    assert not is_available(owner, {}, role_statuses(owner, [], "r"))


# 210: TestStatusDropsRemovedRoleEvenWhileItsLWSStillDrains
def test_removed_role_drops_out_at_once() -> None:
    three = ds(role("prefill"), role("decode"), role("extra"))
    children = [ready("prefill", "a", 1), ready("decode", "a", 1), ready("extra", "a", 1)]
    assert [s["name"] for s in role_statuses(three, children, "a")] == [
        "prefill", "decode", "extra"]
    two = ds(role("prefill"), role("decode"))
    assert [s["name"] for s in role_statuses(two, children, "b")] == ["prefill", "decode"]


# 192: ..._ObservedGenerationOnlyDoesNotResetTransitionTime
def test_generation_only_keeps_transition_time() -> None:
    existing = [cond("Available", "True", *AVAILABLE, generation=1)]
    new = computed_condition(ds(generation=2), True, NOW)
    out, changed = set_condition(existing, new, NOW)
    assert changed
    assert out == [cond("Available", "True", *AVAILABLE, generation=2, when=T0)]


# 193: ..._StatusFlipUpdatesTransitionTime
def test_status_flip() -> None:
    existing = [cond("Available", "True", *AVAILABLE),
                cond("Progressing", "False", *AVAILABLE)]
    new = computed_condition(ds(generation=2), False, NOW)
    out, changed = set_condition(existing, new, NOW)
    assert changed
    assert out == [cond("Available", "False", *PROGRESSING, generation=2, when=NOW),
                   cond("Progressing", "True", *PROGRESSING, generation=2, when=NOW)]


# 194: ..._SameStatusSyncsReasonAndMessage
def test_same_status_syncs_reason_and_message() -> None:
    existing = [cond("Progressing", "True", "OldReason", "old message")]
    out, changed = set_condition(existing, computed_condition(ds(), False, NOW), NOW)
    assert changed
    assert out == [cond("Progressing", "True", *PROGRESSING, when=T0)]


# 195: ..._StaleFalseConditionObservedGenerationCatchesUp
def test_stale_false_condition_catches_up_on_generation_only() -> None:
    existing = [cond("Available", "True", *AVAILABLE, generation=1),
                cond("Progressing", "False", "SomeReason", "some message", generation=1)]
    out, changed = set_condition(existing, computed_condition(ds(generation=3), True, NOW), NOW)
    assert changed
    assert out[1] == cond("Progressing", "False", "SomeReason", "some message", generation=3)
    assert out[0] == cond("Available", "True", *AVAILABLE, generation=3)


# 196: ..._LeavesUnrelatedConditionTypeUntouched
def test_unrelated_condition_untouched() -> None:
    foreign = {"type": "Custom", "status": "True", "reason": "Mine", "message": "m",
               "lastTransitionTime": T0}
    out, changed = set_condition([foreign], computed_condition(ds(), True, NOW), NOW)
    assert changed
    assert out[0] == foreign
    assert out[1] == cond("Available", "True", *AVAILABLE, when=NOW)


def test_nothing_changed() -> None:
    existing = [cond("Progressing", "False", *AVAILABLE),
                cond("Available", "True", *AVAILABLE)]
    out, changed = set_condition(existing, computed_condition(ds(), True, NOW), NOW)
    assert not changed
    assert out == existing


def test_compute_status_unchanged_writes_nothing() -> None:
    owner = ds()
    children = [ready("prefill", "r", 1), ready("decode", "r", 1)]
    first = compute_status(owner, children, "r", {}, T0)
    settled = ds(status=first.status)
    again = compute_status(settled, children, "r", {}, NOW)
    assert not again.changed
    assert again.status == first.status
    regenerated = ds(status=first.status, generation=2)
    assert compute_status(regenerated, children, "r", {}, NOW).changed
