"""The planner's inputs of a slice mid-rollout (upstream's buildPlannerState and the role
universe, executor.go): baselines from the ``initial-replicas`` snapshot, removed roles at the
end of the universe with target 0, and the External roles' no-shrink guard."""

from __future__ import annotations

from datetime import UTC, datetime

from lws_operator.logic.disaggregated.drain import OldLws, OldRevision, old_revision
from lws_operator.logic.disaggregated.planner import RoleBudget, Step
from lws_operator.logic.disaggregated.rollout_inputs import (
    RolloutInputs,
    role_universe,
    rollout_inputs,
)

T = datetime(2026, 1, 1, tzinfo=UTC)
SPEC = ("prefill", "decode")


def rev(name: str, *members: tuple[str, int, int | None]) -> OldRevision:
    return OldRevision(name, T, tuple(OldLws(f"ds-{name}-{role}", role, replicas, initial)
                                      for role, replicas, initial in members))


def test_role_universe_spec_order_then_removed_roles() -> None:
    revisions = [rev("a", ("zeta", 1, None), ("decode", 1, None), ("encode", 2, None))]
    assert role_universe(SPEC, revisions) == ("prefill", "decode", "encode", "zeta")


def test_inputs_sum_baselines_and_current_over_old_revisions() -> None:
    """A (annotated 2,4, now 1,4) and B (unannotated, 3,1): initial (3,5), current (4,5)."""
    revisions = [rev("a", ("prefill", 1, 2), ("decode", 4, 4)),
                 rev("b", ("prefill", 3, None), ("decode", 1, None))]
    inputs = rollout_inputs(SPEC, revisions, {"prefill": 2}, {"prefill": 5, "decode": 6})
    assert inputs == RolloutInputs(SPEC, (5, 5), (4, 5), (2, 0), (5, 6))


def test_removed_role_has_target_zero_and_no_new() -> None:
    revisions = [rev("a", ("prefill", 4, 4), ("decode", 6, 6), ("encode", 2, 2))]
    inputs = rollout_inputs(SPEC, revisions, {"prefill": 1, "decode": 1, "encode": 9},
                            {"prefill": 4, "decode": 6, "encode": 9})
    assert inputs == RolloutInputs(("prefill", "decode", "encode"), (4, 6, 2), (4, 6, 2),
                                   (1, 1, 0), (4, 6, 0))


def test_external_role_target_never_below_new_while_old_exists() -> None:
    revisions = [rev("a", ("prefill", 3, 3), ("decode", 3, 3))]
    inputs = rollout_inputs(SPEC, revisions, {"prefill": 2, "decode": 2},
                            {"prefill": 1, "decode": 1}, external={"decode"})
    assert inputs.target_new == (1, 2)


def test_budget_is_current_old_minus_planned() -> None:
    """Decode is one behind prefill on the old side: the proportional drain brings prefill level
    (budget 1, 0), and a planned old above the current one is a negative budget."""
    inputs = RolloutInputs(SPEC, (4, 4), (4, 3), (1, 1), (4, 4))
    step = inputs.next_step((RoleBudget(1, 0),) * 2)
    assert step == Step((3, 3), (1, 1))
    assert inputs.budget(step) == (1, 0)
    assert inputs.budget(Step((3, 4), (1, 1))) == (1, -1)


def test_duplicate_role_in_a_revision_counts_the_last() -> None:
    revisions = [rev("a", ("prefill", 5, None), ("prefill", 2, None), ("decode", 1, None))]
    assert rollout_inputs(SPEC, revisions, {}, {"prefill": 2, "decode": 1}).current_old == (2, 1)


def test_old_revision_reads_the_baseline_through_the_given_reader() -> None:
    objs = [{"metadata": {"name": "x", "labels": {"r": "prefill"},
                          "annotations": {"initial": "3"}}, "spec": {"replicas": 1}}]
    revision = old_revision("a", objs, "r", initial_of=lambda o: int(
        o["metadata"]["annotations"]["initial"]))
    assert revision.members == (OldLws("x", "prefill", 1, 3),)
    assert revision.members[0].baseline == 3
