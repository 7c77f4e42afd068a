"""The coordinated rollout planner of a DisaggregatedSet: one step at a time, N roles at once.

A rollout moves every role from the old revisions (summed per role) to the target revision. The
planner is a pure function over integer vectors, one element per role of the role universe (the
spec roles in spec order, then roles only old revisions still have): given the old baseline
``initial_old`` (the ``initial-replicas`` snapshot taken when the rollout started), the current
old totals, the current new counts and the targets, it returns the next :class:`Step`, the
desired old totals (``past``) and new counts (``new``), or None when nothing is left to do. The
controller applies one step per pass, and only once the new revision is ready (its stability
gate), so each step is taken against a settled world.

The shape is upstream's ComputeNextStep (planner.go), decision for decision, so that a rollout
paces exactly like the Go controller's (the 22 exact sequences of its tests are reproduced in
``tests/unit/logic/disaggregated/test_ds_planner.py``):

1. complete (no old left, every role at or above target): no step;
2. no step count (everything is 0): no step;
3. abnormal correction (an old total above its baseline, e.g. a user scaled an old child up):
   clamp the old totals to the baseline;
4. final drain (every new role at target): every old total to 0 at once;
5. scale-up: the new side's next batch, if it stays within ``target + surge`` per role;
6. proportional drain: the old side's next batch (each role drains in proportion to its
   baseline), never below the availability floor ``target - unavailable - new``;
7. force drain: when neither fits, drain what surge demands and scale up in the same step (the
   only step that changes both sides; the LWS docs' "drain + scale combined");
8. otherwise no step.

Orphan prevention keeps a revision from ever serving with one role at 0 and another alive:
whenever a candidate old vector has some, but not all, baseline roles at 0, either all old goes
(once the new side covers every non-growing role's availability floor) or the zeroed roles are
kept at 1 (the final drain takes them).

All arithmetic is on integers: every ``ceil``/``floor`` of a ratio is exact integer division,
never a float, so each rounding is right by construction rather than by float precision.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

Vector = tuple[int, ...]


@dataclass(frozen=True)
class RoleBudget:
    """One role's rollout budget in groups (already scaled from percentages): how far its old
    plus new may exceed the target (``surge``) and how far below it it may dip
    (``unavailable``)."""

    surge: int = 1
    unavailable: int = 0


DEFAULT_BUDGET = RoleBudget(1, 0)


@dataclass(frozen=True)
class Step:
    """A planned state: the old revisions' total per role (``past``) and the new revision's
    count per role (``new``), both in role-universe order."""

    past: Vector
    new: Vector

    def __str__(self) -> str:
        """``P,D|p,d``: the notation of the rollout traces (old totals | new counts)."""
        return f"{','.join(map(str, self.past))}|{','.join(map(str, self.new))}"


def default_budgets(roles: int) -> tuple[RoleBudget, ...]:
    """The controller's own budget for each of ``roles`` roles: surge 1, unavailable 0 (upstream's
    DefaultRollingUpdateConfig)."""
    return (DEFAULT_BUDGET,) * roles


def _ceil_div(numerator: int, denominator: int) -> int:
    return -(-numerator // denominator)


def batch_size(budget: RoleBudget) -> int:
    """Groups a role moves per step: its surge when positive, else its unavailability (at least
    1, so a 0/0 budget still progresses)."""
    return budget.surge if budget.surge > 0 else max(1, budget.unavailable)


def total_steps(initial_old: Sequence[int], target: Sequence[int],
                budgets: Sequence[RoleBudget]) -> int:
    """The step count T that paces every role: the number of batches the slowest role needs to
    cover the larger of its baseline and its target."""
    return max((_ceil_div(max(i, t, 0), batch_size(b))
                for i, t, b in zip(initial_old, target, budgets, strict=True)), default=0)


def next_new(current_new: Sequence[int], target: Sequence[int], steps: int) -> Vector:
    """The new side's next batch: the furthest-behind role's step index plus one, applied to
    every role (``ceil(k * target / T)``, capped at the target, never below the current count).
    With no steps (T == 0) it is the target itself."""
    if steps == 0:
        return tuple(target)
    index = min((steps if t == 0 else c * steps // t for c, t in zip(current_new, target,
                                                                     strict=True)),
                default=steps)
    k = index + 1
    return tuple(max(min(_ceil_div(k * t, steps), t), c)
                 for c, t in zip(current_new, target, strict=True))


def next_old(initial_old: Sequence[int], current_old: Sequence[int], steps: int) -> Vector:
    """The old side's next proportional batch: the furthest-ahead role's drain index plus one,
    each role draining ``floor(k * initial / T)`` of its baseline (never above its current
    total; roles without a baseline stay 0). With no steps (T == 0) everything is 0."""
    if steps == 0:
        return (0,) * len(initial_old)
    index = max((((i - c) * steps) // i
                 for i, c in zip(initial_old, current_old, strict=True) if i > 0), default=0)
    k = max(0, index) + 1
    return tuple(min(max(0, i - (k * i) // steps), c) if i > 0 else 0
                 for i, c in zip(initial_old, current_old, strict=True))


def correct_abnormal(initial_old: Sequence[int], current_old: Sequence[int],
                     current_new: Sequence[int]) -> Step | None:
    """When an old total exceeds its baseline (someone scaled an old child up), the step that
    clamps every old total back to the baseline; None when the state is normal."""
    if not any(c > i for i, c in zip(initial_old, current_old, strict=True)):
        return None
    return Step(tuple(min(i, c) for i, c in zip(initial_old, current_old, strict=True)),
                tuple(current_new))


def _availability_floor(initial_old: Sequence[int], current_new: Sequence[int],
                        target: Sequence[int], budgets: Sequence[RoleBudget]) -> Vector:
    """The least old capacity each role must keep so old + new stays at or above
    ``target - unavailable``; only for roles that are not growing (baseline >= target): a
    growing role never had that capacity to lose."""
    return tuple(max(0, t - b.unavailable - n) if i >= t else 0
                 for i, n, t, b in zip(initial_old, current_new, target, budgets, strict=True))


def _prevent_orphans(old: list[int], initial_old: Sequence[int], new: Sequence[int],
                     target: Sequence[int], budgets: Sequence[RoleBudget]) -> list[int]:
    """Never let one baseline role reach 0 while another keeps old capacity: either drain all
    of old (when ``new`` already covers the availability floor of every non-growing role) or
    put the zeroed roles back at 1."""
    baseline = [r for r, i in enumerate(initial_old) if i > 0]
    zeroed = [r for r in baseline if old[r] == 0]
    if not zeroed or len(zeroed) == len(baseline):
        return old
    covered = all(n >= t - b.unavailable
                  for i, n, t, b in zip(initial_old, new, target, budgets, strict=True) if i >= t)
    if covered:
        return [0] * len(old)
    return [1 if r in zeroed else v for r, v in enumerate(old)]


def next_step(initial_old: Sequence[int], current_old: Sequence[int],
              current_new: Sequence[int], target_new: Sequence[int],
              budgets: Sequence[RoleBudget]) -> Step | None:
    """The next step of the rollout from the current state, or None when it is complete (or no
    step is possible). Every argument has one element per role of the role universe."""
    n = len(initial_old)
    if not (len(current_old) == len(current_new) == len(target_new) == len(budgets) == n):
        raise ValueError("planner vectors must have one element per role")
    new_now = tuple(current_new)
    if (all(c == 0 for c in current_old)
            and all(c >= t for c, t in zip(current_new, target_new, strict=True))):
        return None
    steps = total_steps(initial_old, target_new, budgets)
    if steps == 0:
        return None
    corrected = correct_abnormal(initial_old, current_old, current_new)
    if corrected is not None:
        return corrected
    if all(c >= t for c, t in zip(current_new, target_new, strict=True)):
        return Step((0,) * n, new_now)

    planned_new = next_new(current_new, target_new, steps)
    floor_old = _availability_floor(initial_old, current_new, target_new, budgets)

    grows = any(p > c for p, c in zip(planned_new, current_new, strict=True))
    within_surge = all(o + p <= t + b.surge
                       for o, p, t, b in zip(current_old, planned_new, target_new, budgets,
                                             strict=True) if t > 0)
    if grows and within_surge:
        return Step(tuple(current_old), planned_new)

    proportional = [max(p, f) for p, f in zip(next_old(initial_old, current_old, steps),
                                              floor_old, strict=True)]
    proportional = _prevent_orphans(proportional, initial_old, current_new, target_new, budgets)
    if any(v < c for v, c in zip(proportional, current_old, strict=True)):
        return Step(tuple(proportional), new_now)

    return _forced_step(initial_old, current_old, planned_new, target_new, budgets)


def _forced_step(initial_old: Sequence[int], current_old: Sequence[int],
                 planned_new: Vector, target_new: Sequence[int],
                 budgets: Sequence[RoleBudget]) -> Step | None:
    """When neither growing new nor the proportional drain of old moves the rollout: old
    shrunk to what the surge leaves room for beside the planned new, never below a
    non-growing role's availability floor, with the new planned; None when old cannot shrink
    either."""
    forced = []
    for i, c, p, t, b in zip(initial_old, current_old, planned_new, target_new, budgets,
                             strict=True):
        value = max(0, min(c, t + b.surge - p))
        if i >= t:
            value = max(value, max(0, t - b.unavailable - p))
        forced.append(value)
    if any(v < c for v, c in zip(forced, current_old, strict=True)):
        forced = _prevent_orphans(forced, initial_old, planned_new, target_new, budgets)
        return Step(tuple(forced), planned_new)
    return None


def all_steps(initial_old: Sequence[int], target: Sequence[int],
              budgets: Sequence[RoleBudget] | None = None) -> list[Step]:
    """The whole rollout as the controller would walk it when every step settles: the start
    state (baseline old, nothing new) followed by each step, fed back as the current state
    (upstream's ComputeAllSteps). Bounded at ``2 * max(baseline, target) + 10`` steps, so a
    planner bug shows as a sequence that does not end at ``0...|target`` rather than a hang."""
    budgets = default_budgets(len(initial_old)) if budgets is None else tuple(budgets)
    state = Step(tuple(initial_old), (0,) * len(initial_old))
    states = [state]
    limit = 2 * max((*initial_old, *target), default=0) + 10
    for _ in range(limit):
        step = next_step(initial_old, state.past, state.new, target, budgets)
        if step is None:
            break
        state = step
        states.append(state)
    return states
