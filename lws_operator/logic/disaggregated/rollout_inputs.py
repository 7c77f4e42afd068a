"""The planner's inputs for one slice of a DisaggregatedSet in the middle of a rollout.

The planner works on vectors over the **role universe**: the spec roles in spec order, then the
roles only old revisions still have (removed from the spec; they drain to 0 with the others).
Per role (upstream's buildPlannerState, executor.go):

* ``initial_old``: the sum over the existing old LeaderWorkerSets of their ``initial-replicas``
  baseline (their ``spec.replicas`` when the annotation is absent or not a count); recomputed
  every pass from what exists, so a revision deleted after draining drops out of it;
* ``current_old``: the sum of their ``spec.replicas``;

(a revision with two LeaderWorkerSets of one role, which the controller never makes, counts the
last one, as upstream's grouping does);
* ``current_new``: the new revision's ``spec.replicas`` (0 for a removed role, or when missing);
* ``target_new``: the role's replica target (0 for a removed role); for an External role never
  below ``current_new`` while old revisions exist, so an autoscaler writing a smaller value
  mid-rollout cannot shrink the new fleet while the old one drains (upstream's no-shrink guard).

Removed roles are ordered by name (upstream leaves their order to a map's iteration; the planner
does not depend on it, and a fixed order keeps logs and events stable).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from lws_operator.logic.disaggregated.drain import OldRevision
from lws_operator.logic.disaggregated.planner import RoleBudget, Step, Vector, next_step


@dataclass(frozen=True)
class RolloutInputs:
    """The four planner vectors over the role universe ``roles``."""

    roles: tuple[str, ...]
    initial_old: Vector
    current_old: Vector
    current_new: Vector
    target_new: Vector

    def next_step(self, budgets: Sequence[RoleBudget]) -> Step | None:
        return next_step(self.initial_old, self.current_old, self.current_new, self.target_new,
                         budgets)

    def budget(self, step: Step) -> tuple[int, ...]:
        """What the drain may take per role: ``current old - planned old`` (may be <= 0)."""
        return tuple(c - p for c, p in zip(self.current_old, step.past, strict=True))


def role_universe(spec_roles: Sequence[str], revisions: Iterable[OldRevision]) -> tuple[str, ...]:
    """The spec roles in spec order, then the old revisions' roles no longer in the spec."""
    spec = set(spec_roles)
    removed = {m.role for r in revisions for m in r.members if m.role not in spec}
    return (*spec_roles, *sorted(removed))


def spec_old_total(spec_roles: Collection[str], revisions: Iterable[OldRevision]) -> int:
    """Old replicas of the roles still in the spec: a slice takes the rollout path only while
    this is positive (removed roles' replicas do not count)."""
    return sum(m.replicas for r in revisions for m in r.by_role().values() if m.role in spec_roles)


def rollout_inputs(spec_roles: Sequence[str], revisions: Sequence[OldRevision],
                   new_replicas: Mapping[str, int], targets: Mapping[str, int],
                   external: Collection[str] = ()) -> RolloutInputs:
    """The planner's vectors from the old revisions of a slice, the new revision's replicas per
    role (roles without a new LeaderWorkerSet absent), each spec role's resolved target and the
    External roles among them."""
    roles = role_universe(spec_roles, revisions)
    spec = set(spec_roles)
    members = [m for r in revisions for m in r.by_role().values()]
    initial = tuple(sum(m.baseline for m in members if m.role == role) for role in roles)
    current = tuple(sum(m.replicas for m in members if m.role == role) for role in roles)
    new = tuple(int(new_replicas.get(role, 0)) if role in spec else 0 for role in roles)
    target = []
    for role, now in zip(roles, new, strict=True):
        value = int(targets.get(role, 0)) if role in spec else 0
        if role in external and revisions:
            value = max(value, now)
        target.append(value)
    return RolloutInputs(roles, initial, current, new, tuple(target))
