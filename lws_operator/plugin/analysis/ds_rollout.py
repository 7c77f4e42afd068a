"""Where a DisaggregatedSet's coordinated rollout stands, slice by slice, and the steps it takes:
read with the controller's own planner (``logic.disaggregated``), so what ``kubectl lws plan``
and ``kubectl lws rollout status`` show is what the controller does.

The controller walks a rollout one planner step per pass, each taken once the new revision's
groups are all Ready (its stability gate): from the old revisions' baseline (their
``initial-replicas`` annotation, recorded when the rollout started) and nothing new, to nothing
old and every role at its target. :func:`slice_rollout` rebuilds the planner's inputs for one
slice exactly as the controller's rollout step does (``steps._rollout``), walks the planner from
the baseline (:func:`walk`) and finds the live state among the steps. :func:`proposed_rollout`
does the same for a changed set (``kubectl lws plan``): every child not at the changed set's
revision becomes old.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lws_operator.api.disaggregated import ROLE_LABEL, DisaggregatedSetView, RoleScalerView
from lws_operator.logic.disaggregated import scaling, slices
from lws_operator.logic.disaggregated.drain import old_revision
from lws_operator.logic.disaggregated.planner import RoleBudget, Step, next_step
from lws_operator.logic.disaggregated.rollout_config import role_budgets
from lws_operator.logic.disaggregated.rollout_inputs import RolloutInputs, rollout_inputs
from lws_operator.logic.disaggregated.scale_up import NewLws, revision_stable

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class SliceRollout:
    """One slice's rollout to ``revision``: the role universe, the planner's steps from the
    baseline (``steps[0]`` is the start: the baseline old, nothing new), the live state and its
    place among the steps (None: between steps, e.g. while a step's scale is under way), and
    whether the new revision's groups are all Ready (the controller takes the next step only
    then). ``in_progress`` False: no old revision holds a replica, nothing to roll."""

    slice: int
    revision: str
    roles: tuple[str, ...]
    old_revisions: tuple[str, ...]
    steps: tuple[Step, ...]
    current: Step
    index: int | None
    stable: bool

    @property
    def in_progress(self) -> bool:
        return any(self.current.past)

    @property
    def total(self) -> int:
        """Steps the rollout takes (the start is not one)."""
        return max(0, len(self.steps) - 1)


def walk(start: Step, target: Sequence[int], initial_old: Sequence[int],
         budgets: Sequence[RoleBudget]) -> tuple[Step, ...]:
    """``start`` and every planner step after it, each fed back as the next current state (the
    controller's walk when every step settles). Bounded as ``planner.all_steps`` is, so a
    planner that never ends shows as a walk that does not end at the target, not a hang."""
    states = [start]
    limit = 2 * max((*initial_old, *target, *start.past, *start.new), default=0) + 10
    for _ in range(limit):
        step = next_step(initial_old, states[-1].past, states[-1].new, target, budgets)
        if step is None:
            break
        states.append(step)
    return tuple(states)


def _scalers(ds: DisaggregatedSetView, scalers: Sequence[Obj]) -> dict[str, RoleScalerView]:
    """The set's role scalers by role, as the controller binds them: External roles only."""
    external = {r.name for r in ds.roles if r.external}
    views = (RoleScalerView(s) for s in scalers)
    return {v.role: v for v in views if v.role in external}


def _inputs(ds: DisaggregatedSetView, old: Sequence[Obj], new: Mapping[str, int],
            scalers: Mapping[str, RoleScalerView]) -> tuple[RolloutInputs, tuple[RoleBudget, ...]]:
    """The planner's vectors and budgets, as the controller's rollout step builds them."""
    spec_roles = [role.name for role in ds.roles]
    revisions = [old_revision(r, members.values(), ROLE_LABEL, slices.lws_replicas,
                              slices.initial_replicas)
                 for r, members in slices.group_by_revision(old).items()]
    inputs = rollout_inputs(
        spec_roles, revisions, new,
        {role.name: scaling.target_replicas(role, scalers, new.get(role.name, 0))
         for role in ds.roles},
        {role.name for role in ds.roles if role.external})
    budgets = role_budgets(ds, inputs.roles, {
        role.name: scaling.target_replicas(role, scalers, 0) for role in ds.roles})
    return inputs, budgets


def _rollout(ds: DisaggregatedSetView, k: int, revision: str, mine: Sequence[Obj],
             scalers: Mapping[str, RoleScalerView], from_now: bool) -> SliceRollout:
    # An old revision drained to 0 on every role is deleted by the controller before it plans.
    live = {r for r, members in slices.group_by_revision(mine).items()
            if any(slices.lws_replicas(m) > 0 for m in members.values())}
    old = [lws for lws in mine if slices.revision_label(lws) != revision
           and slices.revision_label(lws) in live]
    new_objs = {slices.role_of(lws): lws for lws in mine
                if slices.revision_label(lws) == revision}
    new = {role: slices.lws_replicas(lws) for role, lws in new_objs.items()}
    inputs, budgets = _inputs(ds, old, new, scalers)
    current = Step(inputs.current_old, inputs.current_new)
    start = current if from_now else Step(inputs.initial_old, (0,) * len(inputs.roles))
    steps = walk(start, inputs.target_new, inputs.initial_old, budgets) if old else (current,)
    settled = {role: NewLws(str((lws.get("metadata") or {}).get("name") or ""), role,
                            slices.lws_replicas(lws), slices.status_count(lws, "readyReplicas"))
               for role, lws in new_objs.items()}
    return SliceRollout(
        slice=k, revision=revision, roles=inputs.roles,
        old_revisions=tuple(sorted({slices.revision_label(lws) for lws in old})),
        steps=steps, current=current,
        index=next((i for i, s in enumerate(steps) if s == current), None),
        stable=revision_stable(settled, [role.name for role in ds.roles]))


def slice_rollout(ds: Obj | DisaggregatedSetView, children: Sequence[Obj], revision: str,
                  k: int, scalers: Sequence[Obj] = ()) -> SliceRollout:
    """Slice ``k``'s rollout to ``revision`` from the set's children (every slice; those being
    deleted left out by the caller; only those it controls count) and its role scalers."""
    view = DisaggregatedSetView.of(ds)
    mine = slices.in_slice_objects(slices.owned(children, view), k)
    return _rollout(view, k, revision, mine, _scalers(view, scalers), from_now=False)


def proposed_rollout(ds: Obj | DisaggregatedSetView, children: Sequence[Obj], revision: str,
                     k: int, scalers: Sequence[Obj] = ()) -> SliceRollout:
    """The rollout a changed set (``ds``, whose revision is ``revision``) would walk in slice
    ``k`` from the live children: every child at another revision is old, with its baseline
    (its ``initial-replicas`` when a rollout is already under way, else its replicas); the
    walk starts from the live state."""
    view = DisaggregatedSetView.of(ds)
    mine = slices.in_slice_objects(slices.owned(children, view), k)
    return _rollout(view, k, revision, mine, _scalers(view, scalers), from_now=True)


def step_kind(before: Step, after: Step) -> str:
    """What a step does, in the words of the LWS docs' rollout traces."""
    up = any(a > b for a, b in zip(after.new, before.new, strict=True))
    down = any(a < b for a, b in zip(after.past, before.past, strict=True))
    if up and down:
        return "drain + scale up"
    if up:
        return "scale up new"
    if down:
        return "final drain" if not any(after.past) else "drain old"
    return "correct"


def vector_text(roles: Sequence[str], step: Step) -> str:
    """Each role's old|new groups, e.g. ``prefill 2|0, decode 1|0``."""
    return ", ".join(f"{role} {o}|{n}" for role, o, n in zip(roles, step.past, step.new,
                                                             strict=True))


def position(rollout: SliceRollout) -> str:
    """Where the live state stands, in one phrase: ``step 2 of 5`` or between steps."""
    if rollout.index is None:
        return f"between steps (of {rollout.total})"
    if rollout.index == 0:
        return f"starting (0 of {rollout.total} steps)"
    return f"step {rollout.index} of {rollout.total}"


def progress_line(rollout: SliceRollout) -> str:
    """One slice's rollout as ``kubectl lws rollout status`` prints it."""
    where = position(rollout)
    now = vector_text(rollout.roles, rollout.current)
    gate = ("new groups Ready: the next step is the controller's" if rollout.stable
            else "waiting for the new revision's groups to be Ready")
    return f"slice {rollout.slice}: {where}, old|new {now}; {gate}"


def steps_data(rollout: SliceRollout) -> dict[str, Any]:
    """The slice's walk as data (``-o json|yaml``)."""
    return {
        "slice": rollout.slice, "revision": rollout.revision, "roles": list(rollout.roles),
        "oldRevisions": list(rollout.old_revisions), "inProgress": rollout.in_progress,
        "current": {"old": list(rollout.current.past), "new": list(rollout.current.new)},
        "currentStep": rollout.index, "newRevisionReady": rollout.stable,
        "steps": [{"step": i, "old": list(s.past), "new": list(s.new),
                   "action": "start" if i == 0 else step_kind(rollout.steps[i - 1], s)}
                  for i, s in enumerate(rollout.steps)],
    }
