"""The DisaggregatedSet rollout planner (upstream's planner_test.go, every case, in its order):
the 22 exact step sequences, the surge/unavailable property tests, the helpers' edge cases and
the N-role rollouts, plus the worked traces of the KEP example, the e2e rollouts and the
add/remove-role rollouts (exact).

Sequences are written in the traces' notation, one state per ``->``: ``P,D|p,d`` is the old total
per role | the new count per role; the first state is the start (baseline old, nothing new).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Sequence

import pytest

from lws_operator.logic.disaggregated.planner import (
    RoleBudget,
    Step,
    all_steps,
    batch_size,
    correct_abnormal,
    default_budgets,
    next_new,
    next_old,
    next_step,
    total_steps,
)


def trace(initial: Sequence[int], target: Sequence[int],
          budgets: Sequence[RoleBudget] | None = None) -> str:
    return " -> ".join(str(s) for s in all_steps(initial, target, budgets))


def same(budget: RoleBudget, roles: int) -> tuple[RoleBudget, ...]:
    return (budget,) * roles


def surges(*values: int) -> tuple[RoleBudget, ...]:
    return tuple(RoleBudget(v, 0) for v in values)


def completes(states: list[Step], target: Sequence[int]) -> bool:
    return states[-1] == Step((0,) * len(target), tuple(target))


def totals(states: list[Step]) -> list[int]:
    return [sum(s.past) + sum(s.new) for s in states]


S1 = RoleBudget(1, 0)
S2 = RoleBudget(2, 0)
U1 = RoleBudget(0, 1)
U2 = RoleBudget(0, 2)

# 9.1 items 1-22: TestComputeAllSteps_ExactSequence.
EXACT = [
    ("small_1_1_surge1", (1, 1), (1, 1), None,
     "1,1|0,0 -> 1,1|1,1 -> 0,0|1,1"),
    ("small_2_2_surge1", (2, 2), (2, 2), None,
     "2,2|0,0 -> 2,2|1,1 -> 1,1|1,1 -> 1,1|2,2 -> 0,0|2,2"),
    ("small_3_3_surge1", (3, 3), (3, 3), None,
     "3,3|0,0 -> 3,3|1,1 -> 2,2|1,1 -> 2,2|2,2 -> 1,1|2,2 -> 1,1|3,3 -> 0,0|3,3"),
    ("medium_6_2_surge1", (6, 2), (6, 2), None,
     "6,2|0,0 -> 6,2|1,1 -> 5,2|1,1 -> 5,2|2,1 -> 4,2|2,1 -> 4,2|3,1 -> 3,1|3,1 -> 3,1|4,2 -> "
     "2,1|4,2 -> 2,1|5,2 -> 1,1|5,2 -> 1,1|6,2 -> 0,0|6,2"),
    ("medium_6_2_surge2", (6, 2), (6, 2), surges(2, 2),
     "6,2|0,0 -> 6,2|2,1 -> 4,2|2,1 -> 4,2|4,2 -> 2,1|4,2 -> 2,1|6,2 -> 0,0|6,2"),
    ("medium_6_4_surge2", (6, 4), (6, 4), surges(2, 2),
     "6,4|0,0 -> 6,4|2,2 -> 4,3|2,2 -> 4,3|4,3 -> 2,2|4,3 -> 2,2|6,4 -> 0,0|6,4"),
    ("asymmetric_10_1_surge1", (10, 1), (10, 1), None,
     "10,1|0,0 -> 10,1|1,1 -> 9,1|1,1 -> 9,1|2,1 -> 8,1|2,1 -> 8,1|3,1 -> 7,1|3,1 -> 7,1|4,1 -> "
     "6,1|4,1 -> 6,1|5,1 -> 5,1|5,1 -> 5,1|6,1 -> 4,1|6,1 -> 4,1|7,1 -> 3,1|7,1 -> 3,1|8,1 -> "
     "2,1|8,1 -> 2,1|9,1 -> 1,1|9,1 -> 1,1|10,1 -> 0,0|10,1"),
    ("asymmetric_1_10_surge1", (1, 10), (1, 10), None,
     "1,10|0,0 -> 1,10|1,1 -> 1,9|1,1 -> 1,9|1,2 -> 1,8|1,2 -> 1,8|1,3 -> 1,7|1,3 -> 1,7|1,4 -> "
     "1,6|1,4 -> 1,6|1,5 -> 1,5|1,5 -> 1,5|1,6 -> 1,4|1,6 -> 1,4|1,7 -> 1,3|1,7 -> 1,3|1,8 -> "
     "1,2|1,8 -> 1,2|1,9 -> 1,1|1,9 -> 1,1|1,10 -> 0,0|1,10"),
    ("large_10_10_surge1", (10, 10), (10, 10), None,
     "10,10|0,0 -> 10,10|1,1 -> 9,9|1,1 -> 9,9|2,2 -> 8,8|2,2 -> 8,8|3,3 -> 7,7|3,3 -> "
     "7,7|4,4 -> 6,6|4,4 -> 6,6|5,5 -> 5,5|5,5 -> 5,5|6,6 -> 4,4|6,6 -> 4,4|7,7 -> 3,3|7,7 -> "
     "3,3|8,8 -> 2,2|8,8 -> 2,2|9,9 -> 1,1|9,9 -> 1,1|10,10 -> 0,0|10,10"),
    ("large_10_10_surge3", (10, 10), (10, 10), surges(3, 3),
     "10,10|0,0 -> 10,10|3,3 -> 8,8|3,3 -> 8,8|5,5 -> 5,5|8,8 -> 3,3|8,8 -> 3,3|10,10 -> "
     "0,0|10,10"),
    ("large_12_6_surge2", (12, 6), (12, 6), surges(2, 2),
     "12,6|0,0 -> 12,6|2,1 -> 10,5|2,1 -> 10,5|4,2 -> 8,4|4,2 -> 8,4|6,3 -> 6,3|6,3 -> "
     "6,3|8,4 -> 4,2|8,4 -> 4,2|10,5 -> 2,1|10,5 -> 2,1|12,6 -> 0,0|12,6"),
    ("scale_up_1_1_to_3_3", (1, 1), (3, 3), None,
     "1,1|0,0 -> 1,1|1,1 -> 1,1|2,2 -> 1,1|3,3 -> 0,0|3,3"),
    ("scale_up_4_4_to_6_6", (4, 4), (6, 6), None,
     "4,4|0,0 -> 4,4|1,1 -> 4,4|2,2 -> 4,4|3,3 -> 3,3|4,4 -> 2,2|5,5 -> 1,1|6,6 -> 0,0|6,6"),
    ("scale_down_5_5_to_2_2", (5, 5), (2, 2), None,
     "5,5|0,0 -> 4,4|0,0 -> 3,3|0,0 -> 2,2|0,0 -> 2,2|1,1 -> 1,1|1,1 -> 1,1|2,2 -> 0,0|2,2"),
    ("mixed_scale_3_5_to_5_3", (3, 5), (5, 3), None,
     "3,5|0,0 -> 3,4|0,0 -> 2,3|0,0 -> 2,3|1,1 -> 2,2|1,1 -> 2,2|2,2 -> 2,2|3,2 -> 1,1|3,2 -> "
     "1,1|4,3 -> 1,1|5,3 -> 0,0|5,3"),
    ("asymmetric_2_4_to_4_2", (2, 4), (4, 2), None,
     "2,4|0,0 -> 2,3|0,0 -> 1,2|0,0 -> 1,2|1,1 -> 1,2|2,1 -> 1,1|2,1 -> 1,1|3,2 -> 1,1|4,2 -> "
     "0,0|4,2"),
    ("proportional_3_5_to_4_2", (3, 5), (4, 2), None,
     "3,5|0,0 -> 3,4|0,0 -> 2,3|0,0 -> 2,2|0,0 -> 2,2|1,1 -> 2,2|2,1 -> 1,1|2,1 -> 1,1|3,2 -> "
     "1,1|4,2 -> 0,0|4,2"),
    ("medium_4_4_surge2", (4, 4), (4, 4), surges(2, 2),
     "4,4|0,0 -> 4,4|2,2 -> 2,2|2,2 -> 2,2|4,4 -> 0,0|4,4"),
    ("asymmetric_surge_4_6", (4, 6), (4, 6), surges(2, 3),
     "4,6|0,0 -> 4,6|2,3 -> 2,3|2,3 -> 2,3|4,6 -> 0,0|4,6"),
    ("asymmetric_5_3_surge2", (5, 3), (5, 3), surges(2, 2),
     "5,3|0,0 -> 5,3|2,1 -> 4,2|2,1 -> 3,2|2,1 -> 3,2|4,2 -> 2,1|4,2 -> 2,1|5,3 -> 0,0|5,3"),
    ("fresh_deploy_0_0_to_3_3", (0, 0), (3, 3), None,
     "0,0|0,0 -> 0,0|1,1 -> 0,0|2,2 -> 0,0|3,3"),
    ("empty_0_0_to_0_0", (0, 0), (0, 0), None,
     "0,0|0,0"),
]


@pytest.mark.parametrize(("initial", "target", "budgets", "expected"),
                         [case[1:] for case in EXACT], ids=[case[0] for case in EXACT])
def test_exact_sequence(initial: tuple[int, ...], target: tuple[int, ...],
                        budgets: tuple[RoleBudget, ...] | None, expected: str) -> None:
    assert trace(initial, target, budgets) == expected


def test_exact_sequence_catalogue_is_complete() -> None:
    """All 22 sequences, the long ones at the 21 states the catalogue counts."""
    assert len(EXACT) == 22
    lengths = {name: len(expected.split(" -> ")) for name, *_, expected in EXACT}
    assert lengths["asymmetric_10_1_surge1"] == lengths["large_10_10_surge1"] == 21


# 3.9 (a)-(d): the worked traces (the KEP-766 example as the code behaves, the e2e rollouts).
TRACES = [
    ("kep_766_example_5_2_surge2_unavail1", (5, 2), (5, 2), same(RoleBudget(2, 1), 2),
     "5,2|0,0 -> 5,2|2,1 -> 4,2|2,1 -> 3,2|4,2 -> 2,1|4,2 -> 2,1|5,2 -> 0,0|5,2"),
    ("e2e_scale_down_role0_scale_up_role1", (10, 2), (6, 8), surges(2, 2),
     "10,2|0,0 -> 8,2|0,0 -> 6,2|0,0 -> 6,2|2,2 -> 4,1|2,2 -> 4,1|3,4 -> 4,1|4,5 -> 2,1|4,5 -> "
     "2,1|5,7 -> 2,1|6,8 -> 0,0|6,8"),
    ("e2e_surge_0_unavail_2", (4, 4), (4, 4), same(U2, 2),
     "4,4|0,0 -> 2,2|0,0 -> 2,2|2,2 -> 0,0|2,2 -> 0,0|4,4"),
    # 3.10: roles prefill, decode, encode; surge 1.
    ("add_encode", (4, 6, 0), (4, 6, 2), None,
     "4,6,0|0,0,0 -> 4,6,0|1,1,1 -> 4,5,0|1,1,1 -> 3,5,0|1,1,1 -> 3,5,0|2,2,1 -> 3,4,0|2,2,1 -> "
     "3,4,0|2,3,1 -> 2,3,0|2,3,1 -> 2,3,0|3,4,2 -> 2,2,0|3,4,2 -> 1,2,0|3,4,2 -> 1,2,0|4,5,2 -> "
     "1,1,0|4,5,2 -> 1,1,0|4,6,2 -> 0,0,0|4,6,2"),
    ("remove_encode", (4, 6, 2), (4, 6, 0), None,
     "4,6,2|0,0,0 -> 4,6,2|1,1,0 -> 4,5,2|1,1,0 -> 3,5,2|1,1,0 -> 3,5,2|2,2,0 -> 3,4,2|2,2,0 -> "
     "3,4,2|2,3,0 -> 2,3,1|2,3,0 -> 2,3,1|3,4,0 -> 2,2,1|3,4,0 -> 1,2,1|3,4,0 -> 1,2,1|4,5,0 -> "
     "1,1,1|4,5,0 -> 1,1,1|4,6,0 -> 0,0,0|4,6,0"),
]


@pytest.mark.parametrize(("initial", "target", "budgets", "expected"),
                         [case[1:] for case in TRACES], ids=[case[0] for case in TRACES])
def test_worked_trace(initial: tuple[int, ...], target: tuple[int, ...],
                      budgets: tuple[RoleBudget, ...] | None, expected: str) -> None:
    assert trace(initial, target, budgets) == expected


# 3.9 (a)/(c): the single steps the traces explain, each from its state.
def test_medium_6_2_step_2_reasons() -> None:
    """3.9(a) row 2, at 6,2|1,1 with T = 6: the next new batch (2,1) breaks prefill's surge
    (6 + 2 > 7), so the proportional drain (kOld 1: 5,2) runs, above the floor (5,1)."""
    assert total_steps((6, 2), (6, 2), default_budgets(2)) == 6
    assert next_new((1, 1), (6, 2), 6) == (2, 1)
    assert next_old((6, 2), (6, 2), 6) == (5, 2)
    assert next_step((6, 2), (6, 2), (1, 1), (6, 2), default_budgets(2)) == Step((5, 2), (1, 1))


def test_medium_6_2_step_3_reasons() -> None:
    """Row 3, at 5,2|1,1: idxNew (1, 3), so kNew 2 gives (2, 1), within surge: scale-up."""
    assert next_new((1, 1), (6, 2), 6) == (2, 1)
    assert next_step((6, 2), (5, 2), (1, 1), (6, 2), default_budgets(2)) == Step((5, 2), (2, 1))


def test_medium_6_2_prop_drain_keeps_availability_floor() -> None:
    """At 4,2|3,1 the next new batch (4,2) breaks surge (4+4 > 7); the proportional drain goes to
    kOld 3: 3,1 (the floor is also 3,1)."""
    assert next_step((6, 2), (4, 2), (3, 1), (6, 2), default_budgets(2)) == Step((3, 1), (3, 1))


def test_large_10_10_surge3_force_drain_changes_both_sides() -> None:
    """At 8,8|5,5: scale-up (8,8) is blocked, the proportional drain changes nothing, so the force
    drain takes old to min(8, 10+3-8) = 5 and new to 8 in one step."""
    step = next_step((10, 10), (8, 8), (5, 5), (10, 10), surges(3, 3))
    assert step == Step((5, 5), (8, 8))


def test_orphan_prevention_drains_everything_once_new_covers_the_floors() -> None:
    """Prefill goes away (target 0), decode grows with surge 0: at 1,1|0,1 the force drain would
    zero prefill's old alone; new decode (2) covers decode's floor (2 - 1), so all old goes at
    once instead of leaving the old decode without its prefill."""
    assert trace((1, 1), (0, 2), (S1, U1)) == "1,1|0,0 -> 1,1|0,1 -> 0,0|0,2"


def test_force_drain_keeps_the_availability_floor() -> None:
    """An old role already below its floor (decode: old 0 beside new 0, target 2, e.g. scaled
    down by hand) is planned back at its floor, and orphan prevention keeps prefill's old at 1
    with it rather than draining both."""
    step = next_step((1, 2), (1, 0), (2, 0), (1, 2), default_budgets(2))
    assert step == Step((1, 1), (2, 1))


# 9.1 items 23-36: the property tests.
def test_unavailable_basic_symmetric_4_4() -> None:  # 23
    states = all_steps((4, 4), (4, 4), same(U1, 2))
    assert completes(states, (4, 4))
    assert min(totals(states)) < 8


def test_unavailable_basic_step_sequence() -> None:  # 24
    states = all_steps((4, 4), (4, 4), same(U1, 2))
    assert any(sum(a.past) - sum(b.past) > sum(b.new) - sum(a.new)
               for a, b in itertools.pairwise(states))


def test_surge_takes_priority_over_unavailable() -> None:  # 25
    states = all_steps((4, 4), (4, 4), same(RoleBudget(1, 1), 2))
    assert completes(states, (4, 4))
    assert min(totals(states)) >= 8


def test_unavailable_when_surge_zero() -> None:  # 26
    states = all_steps((4, 4), (4, 4), same(U1, 2))
    assert completes(states, (4, 4))
    assert min(totals(states)) < 8


def test_surge_2_behaviour() -> None:  # 27
    states = all_steps((6, 6), (6, 6), same(S2, 2))
    assert completes(states, (6, 6))
    assert min(totals(states)) >= 12


def test_unavailable_2_behaviour() -> None:  # 28
    states = all_steps((6, 6), (6, 6), same(U2, 2))
    assert completes(states, (6, 6))
    assert min(totals(states)) < 12


def test_both_surge_and_unavailable_uses_surge() -> None:  # 29
    states = all_steps((6, 6), (6, 6), same(RoleBudget(2, 2), 2))
    assert completes(states, (6, 6))
    assert min(totals(states)) >= 12


@pytest.mark.parametrize(("initial", "budgets"), [
    ((4, 4), (S1, U1)),  # 30 role 0 surge, role 1 unavailable
    ((4, 4), (U1, S1)),  # 31 the other way round
    ((6, 2), (S1, U1)),  # 32 asymmetric
    ((2, 6), (S1, U1)),
    ((8, 4), (S1, U1)),
], ids=["role0_surge_role1_unavail", "role0_unavail_role1_surge", "asymmetric_6_2",
        "asymmetric_2_6", "asymmetric_8_4"])
def test_mixed_surge_unavailable(initial: tuple[int, int],
                                 budgets: tuple[RoleBudget, RoleBudget]) -> None:
    assert completes(all_steps(initial, initial, budgets), initial)


@pytest.mark.parametrize(("initial", "target"), [
    ((2, 2), (4, 4)),  # 33 scale up
    ((4, 4), (2, 2)),  # 34 scale down
    ((0, 0), (4, 4)),  # 35 fresh deploy
], ids=["scale_up", "scale_down", "fresh_deploy"])
def test_unavailable_edge_cases(initial: tuple[int, int], target: tuple[int, int]) -> None:
    assert completes(all_steps(initial, target, same(U1, 2)), target)


@pytest.mark.parametrize(("size", "unavailable"), [(4, 1), (6, 2), (10, 5)])
def test_unavailable_no_infinite_loop(size: int, unavailable: int) -> None:  # 36
    states = all_steps((size, size), (size, size), same(RoleBudget(0, unavailable), 2))
    assert completes(states, (size, size))
    assert len(states) <= 4 * size


# 37: TestBatchSize.
@pytest.mark.parametrize(("surge", "unavailable", "expected"),
                         [(1, 0, 1), (2, 0, 2), (0, 1, 1), (0, 2, 2), (0, 0, 1), (3, 2, 3)])
def test_batch_size(surge: int, unavailable: int, expected: int) -> None:
    assert batch_size(RoleBudget(surge, unavailable)) == expected


# 38: TestComputeTotalSteps.
@pytest.mark.parametrize(("initial", "target", "budgets", "expected"), [
    ((4, 4), (4, 4), default_budgets(2), 4),
    ((6, 2), (6, 2), default_budgets(2), 6),
    ((4, 4), (4, 4), surges(2, 2), 2),
    ((0, 0), (3, 3), default_budgets(2), 3),
])
def test_total_steps(initial: tuple[int, int], target: tuple[int, int],
                     budgets: tuple[RoleBudget, ...], expected: int) -> None:
    assert total_steps(initial, target, budgets) == expected


# 39-40: TestCorrectAbnormalState.
def test_correct_abnormal_state_normal() -> None:
    assert correct_abnormal((4, 4), (2, 2), (2, 2)) is None


def test_correct_abnormal_state_abnormal() -> None:
    assert correct_abnormal((4, 4), (5, 5), (2, 2)) == Step((4, 4), (2, 2))
    # and next_step takes that correction before anything else
    assert next_step((4, 4), (5, 5), (2, 2), (4, 4), default_budgets(2)) == Step((4, 4), (2, 2))


# 41-42: TestComputeNextStep_ReturnsNilWhenDone.
@pytest.mark.parametrize("new", [(3, 6), (4, 7)], ids=["exactly_at_target", "new_exceeds_target"])
def test_next_step_none_when_done(new: tuple[int, int]) -> None:
    assert next_step((3, 6), (0, 0), new, (3, 6), default_budgets(2)) is None


def test_next_step_fresh_start() -> None:  # 43
    step = next_step((4, 4), (4, 4), (0, 0), (4, 4), default_budgets(2))
    assert step is not None
    assert all(n > 0 for n in step.new)


# 44-46: TestComputeNextNewReplicas_EdgeCases.
def test_next_new_target_role0_zero() -> None:
    planned = next_new((0, 2), (0, 4), 4)
    assert planned[0] == 0
    assert planned[1] > 2


def test_next_new_target_role1_zero() -> None:
    planned = next_new((2, 0), (4, 0), 4)
    assert planned[1] == 0
    assert planned[0] > 2


def test_next_new_total_steps_zero() -> None:
    assert next_new((0, 0), (4, 4), 0) == (4, 4)


# 47-49: TestComputeNextOldReplicas_EdgeCases.
def test_next_old_source_role0_zero() -> None:
    planned = next_old((0, 4), (0, 3), 4)
    assert planned[0] == 0
    assert planned[1] <= 3


def test_next_old_source_role1_zero() -> None:
    planned = next_old((4, 0), (3, 0), 4)
    assert planned[1] == 0
    assert planned[0] <= 3


def test_next_old_total_steps_zero() -> None:
    assert next_old((4, 4), (2, 2), 0) == (0, 0)


def budgets_of(surge: Sequence[int], unavailable: Sequence[int] | None = None
               ) -> tuple[RoleBudget, ...]:
    unavailable = unavailable or (0,) * len(surge)
    return tuple(RoleBudget(s, u) for s, u in zip(surge, unavailable, strict=True))


# 50-77: TestNRole_RolloutCompletes (initial, target, surge, unavailable).
N_ROLE = [
    ("3role_symmetric", (3, 3, 3), (3, 3, 3), (1, 1, 1), None),
    ("3role_asymmetric", (6, 3, 2), (6, 3, 2), (2, 1, 1), None),
    ("3role_different_surge", (4, 4, 4), (4, 4, 4), (2, 1, 3), None),
    ("3role_scale_up", (2, 2, 2), (4, 4, 4), (1, 1, 1), None),
    ("3role_scale_down", (4, 4, 4), (2, 2, 2), (1, 1, 1), None),
    ("3role_fresh_deploy", (0, 0, 0), (3, 3, 3), (1, 1, 1), None),
    ("3role_unavailable", (4, 4, 4), (4, 4, 4), (0, 0, 0), (1, 1, 1)),
    ("3role_mixed_surge_unavail", (4, 4, 4), (4, 4, 4), (1, 0, 2), (0, 1, 0)),
    ("4role_symmetric", (4,) * 4, (4,) * 4, (1,) * 4, None),
    ("4role_asymmetric", (8, 4, 2, 1), (8, 4, 2, 1), (2, 2, 1, 1), None),
    ("4role_scale_up", (1,) * 4, (3,) * 4, (1,) * 4, None),
    ("4role_scale_down", (5,) * 4, (2,) * 4, (1,) * 4, None),
    ("4role_fresh_deploy", (0,) * 4, (4,) * 4, (1,) * 4, None),
    ("5role_symmetric", (5,) * 5, (5,) * 5, (1,) * 5, None),
    ("5role_asymmetric", (10, 5, 3, 2, 1), (10, 5, 3, 2, 1), (2, 2, 1, 1, 1), None),
    ("5role_scale_up", (1,) * 5, (2,) * 5, (1,) * 5, None),
    ("5role_scale_down", (6,) * 5, (3,) * 5, (1,) * 5, None),
    ("5role_fresh_deploy", (0,) * 5, (5,) * 5, (1,) * 5, None),
    ("add_role_2to3", (4, 4, 0), (4, 4, 4), (1,) * 3, None),
    ("add_role_3to4", (3, 3, 3, 0), (3, 3, 3, 3), (1,) * 4, None),
    ("add_role_5to6", (2,) * 5 + (0,), (2,) * 6, (1,) * 6, None),
    ("remove_role_3to2", (4, 4, 4), (4, 4, 0), (1,) * 3, None),
    ("remove_role_4to3", (3,) * 4, (3, 3, 3, 0), (1,) * 4, None),
    ("rename_role_5to5", (10, 10, 10, 10, 0, 10), (10, 10, 10, 10, 10, 0), (1,) * 6, None),
    ("scale_down_prefill_up_decode", (10, 2), (6, 8), (2, 2), None),
    ("scale_down_both", (10, 10), (4, 4), (2, 2), None),
    ("scale_down_asymmetric", (8, 4), (3, 2), (1, 1), None),
    ("unavail_asymmetric_5_2", (5, 2), (5, 2), (0, 0), (1, 1)),
]


@pytest.mark.parametrize(("initial", "target", "surge", "unavailable"),
                         [case[1:] for case in N_ROLE], ids=[case[0] for case in N_ROLE])
def test_n_role_rollout_completes(initial: tuple[int, ...], target: tuple[int, ...],
                                  surge: tuple[int, ...], unavailable: tuple[int, ...] | None
                                  ) -> None:
    states = all_steps(initial, target, budgets_of(surge, unavailable))
    assert completes(states, target), " -> ".join(map(str, states))
    # never a revision with one role at 0 beside a live sibling (old side, baseline roles)
    for state in states[:-1]:
        live = [state.past[i] for i, v in enumerate(initial) if v > 0]
        assert all(v > 0 for v in live) or not any(live), state


def test_n_role_catalogue_is_complete() -> None:
    assert len(N_ROLE) == 28


# 78-83: TestNRole_SurgeConstraint.
NRoleCase = tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...] | None]
SURGE_CASES: dict[str, NRoleCase] = {
    case[0]: (case[1], case[2], case[3], case[4]) for case in N_ROLE
    if case[0] in ("3role_symmetric", "4role_symmetric", "5role_symmetric",
                   "scale_down_prefill_up_decode", "scale_down_both",
                   "scale_down_asymmetric")}


@pytest.mark.parametrize("name", sorted(SURGE_CASES))
def test_n_role_surge_constraint(name: str) -> None:
    initial, target, surge, unavailable = SURGE_CASES[name]
    for state in all_steps(initial, target, budgets_of(surge, unavailable)):
        for i, new in enumerate(state.new):
            if new > 0:
                assert state.past[i] + new <= target[i] + surge[i], (name, str(state))


# 84-87: TestNRole_UnavailableConstraint (surge 0, unavailable 1).
@pytest.mark.parametrize("initial", [(4, 4), (5, 2), (2, 5), (3, 3, 3)],
                         ids=["symmetric_4_4", "asymmetric_5_2", "asymmetric_2_5",
                              "3role_symmetric"])
def test_n_role_unavailable_constraint(initial: tuple[int, ...]) -> None:
    states = all_steps(initial, initial, same(U1, len(initial)))
    assert completes(states, initial)
    for state in states:
        for i, target in enumerate(initial):
            assert state.past[i] + state.new[i] >= target - 1, str(state)


# 88-90: TestNRole_DefaultConfig.
@pytest.mark.parametrize("roles", [3, 4, 5])
def test_n_role_default_config(roles: int) -> None:
    budgets = default_budgets(roles)
    assert len(budgets) == roles
    assert all(b == RoleBudget(1, 0) for b in budgets)


def test_vectors_must_align() -> None:
    with pytest.raises(ValueError, match="one element per role"):
        next_step((1, 1), (1,), (0, 0), (1, 1), default_budgets(2))


# The properties of 3.7 over every small two-role rollout, and a sample of three-role ones.
GRID_BUDGETS = (S1, S2, U1, U2, RoleBudget(1, 1), RoleBudget(0, 0))


def check_properties(initial: tuple[int, ...], target: tuple[int, ...],
                     budgets: tuple[RoleBudget, ...]) -> None:
    states = all_steps(initial, target, budgets)
    label = f"{initial}->{target} {budgets}: " + " -> ".join(map(str, states))
    assert completes(states, target), label
    all_surge = all(b.surge > 0 for b in budgets)
    baseline = [i for i, v in enumerate(initial) if v > 0]
    for state in states:
        for i, b in enumerate(budgets):
            # the surge bound holds when every role surges (with a surge-0 role, orphan
            # prevention may keep an old group beside a new one: upstream does the same)
            if all_surge and state.new[i] > 0:
                assert state.past[i] + state.new[i] <= target[i] + b.surge, label
            # the availability floor of a role that is not growing, under surge 0
            if b.surge == 0 and initial[i] >= target[i]:
                assert state.past[i] + state.new[i] >= target[i] - b.unavailable, label
        # no old role of the baseline alone at 0
        zeroed = [i for i in baseline if state.past[i] == 0]
        assert not zeroed or len(zeroed) == len(baseline), label
    if initial == target and all(b.surge > 0 and b.unavailable == 0 for b in budgets):
        assert min(totals(states)) >= sum(target), label


@pytest.mark.parametrize("budgets", [(a, b) for a in GRID_BUDGETS for b in GRID_BUDGETS],
                         ids=lambda b: f"{b[0].surge}{b[0].unavailable}_{b[1].surge}"
                                       f"{b[1].unavailable}")
def test_properties_over_every_small_two_role_rollout(budgets: tuple[RoleBudget, ...]) -> None:
    for initial in itertools.product(range(5), repeat=2):
        for target in itertools.product(range(5), repeat=2):
            check_properties(initial, target, budgets)


def test_properties_over_three_role_rollouts() -> None:
    rng = random.Random(20)
    for _ in range(400):
        initial = tuple(rng.randrange(0, 7) for _ in range(3))
        target = tuple(rng.randrange(0, 7) for _ in range(3))
        budgets = tuple(rng.choice(GRID_BUDGETS) for _ in range(3))
        check_properties(initial, target, budgets)


def test_orphan_prevention_may_exceed_a_surge_0_roles_bound() -> None:
    """The exception the surge property leaves out: prefill surge 0 would drain to 0 in the
    force step, orphan prevention keeps it at 1 beside its new group (1 + 1 > 1 + 0)."""
    assert trace((1, 2), (1, 2), (U1, S1)) == "1,2|0,0 -> 1,2|1,1 -> 1,1|1,1 -> 0,0|1,2"
