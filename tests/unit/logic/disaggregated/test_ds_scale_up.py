"""The new revision's side of a rollout step (upstream's executor_test.go TestIsRevisionStable,
TestScaleUpNew and TestEnsureNewLWSExists, in order): the stability gate, the scale-ups of a
planned step, and which new-revision children are missing."""

from __future__ import annotations

import pytest

from lws_operator.logic.disaggregated.scale_up import (
    NewLws,
    ScaleUp,
    missing_roles,
    revision_stable,
    scale_up_new,
)

ROLES = ("prefill", "decode")
NAMES = {"prefill": "ds-0-rev2-prefill", "decode": "ds-0-rev2-decode"}


def new(prefill: tuple[int, int], decode: tuple[int, int]) -> dict[str, NewLws]:
    return {"prefill": NewLws(NAMES["prefill"], "prefill", *prefill),
            "decode": NewLws(NAMES["decode"], "decode", *decode)}


# 101-105: TestIsRevisionStable (replicas, ready).
@pytest.mark.parametrize(("prefill", "decode", "stable"), [
    ((3, 3), (2, 2), True),
    ((3, 2), (2, 2), False),
    ((3, 3), (2, 1), False),
    ((3, 1), (2, 0), False),
    ((0, 0), (0, 0), True),
], ids=["all_roles_stable", "prefill_unstable", "decode_unstable", "both_roles_unstable",
        "zero_replicas_stable"])
def test_is_revision_stable(prefill: tuple[int, int], decode: tuple[int, int],
                            stable: bool) -> None:
    assert revision_stable(new(prefill, decode), ROLES) is stable


def test_a_missing_role_is_not_stable() -> None:
    only = {"prefill": NewLws(NAMES["prefill"], "prefill", 1, 1)}
    assert not revision_stable(only, ROLES)


def test_removed_roles_are_not_gated() -> None:
    """Only spec roles are looked at: a removed role has no new LeaderWorkerSet."""
    assert revision_stable(new((1, 1), (1, 1)), ROLES)


# 128-131: TestScaleUpNew.
@pytest.mark.parametrize(("current", "planned", "expected"), [
    ((2, 4), (4, 4), [ScaleUp("prefill", NAMES["prefill"], 2, 4)]),
    ((4, 2), (4, 4), [ScaleUp("decode", NAMES["decode"], 2, 4)]),
    ((1, 2), (4, 4), [ScaleUp("prefill", NAMES["prefill"], 1, 4),
                      ScaleUp("decode", NAMES["decode"], 2, 4)]),
    ((4, 4), (4, 4), []),
], ids=["scales_up_prefill_only", "scales_up_decode_only", "scales_up_both_roles",
        "no_op_when_at_target"])
def test_scale_up_new(current: tuple[int, int], planned: tuple[int, int],
                      expected: list[ScaleUp]) -> None:
    assert scale_up_new(ROLES, ROLES, current, planned, NAMES) == expected


def test_scale_up_never_scales_down_nor_touches_removed_roles() -> None:
    """A planned new count below the current one is not a scale-up (the planner never plans it,
    and the drain is old-only); a removed role (no new LeaderWorkerSet) is skipped."""
    universe = ("prefill", "decode", "encode")
    assert scale_up_new(universe, ROLES, (3, 1, 0), (2, 2, 1), NAMES) == [
        ScaleUp("decode", NAMES["decode"], 1, 2)]


def test_scale_up_event_message() -> None:
    assert ScaleUp("prefill", "ds-0-rev2-prefill", 1, 2).message == (
        "Scaling up prefill LWS ds-0-rev2-prefill from 1 to 2 replicas")


def test_scale_up_vectors_must_align() -> None:
    with pytest.raises(ValueError, match="one count per role"):
        scale_up_new(ROLES, ROLES, (1,), (1, 2), NAMES)


# 132-133: TestEnsureNewLWSExists, as the decision which roles still need their new child.
def test_creates_workload_when_missing() -> None:
    assert missing_roles({"prefill"}, ROLES) == ["decode"]
    assert missing_roles(set(), ROLES) == ["prefill", "decode"]


def test_no_op_when_workload_already_exists() -> None:
    assert missing_roles(new((3, 3), (3, 3)), ROLES) == []
