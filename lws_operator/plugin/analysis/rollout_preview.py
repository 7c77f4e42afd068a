"""A dry run of an Ordinal-mode rollout: the LWS docs' step table ("Rolling Update Process"),
computed by running the controller's own pacing (``logic.rollout.pacing.plan_rollout``) pass after
pass over a simulated leader StatefulSet.

The simulation starts from the live state (the leader StatefulSet's replicas, partition and
``replicas`` annotation, and which groups are ready and on the current revision), then
alternates two things until nothing moves:

* **controller passes** (``plan_rollout``), each applied the way the StatefulSet controller
  applies the leader StatefulSet: ordinals added by a larger ``replicas`` are created on the
  new revision at or above the partition (the old one below it), ordinals at or above a lower
  ``replicas`` are removed, and every old-revision group at or above the partition is
  recreated on the new revision (not Ready yet);
* **a group becoming Ready**: only groups the simulation created or recreated; a group that
  was already not Ready on the live set stays so unless the rollout replaces it (what is broken
  now is not assumed to heal). Which groups turn Ready first is a choice the real cluster
  makes; the default (``batch``) lets every group whose update began in the same pass turn
  Ready together, oldest batch first; ``one`` turns one group Ready at a time (oldest batch
  first, lowest ordinal first); a test passes the LWS docs' own order (``schedule``).

Rows follow the LWS docs' trace: one row per controller pass that changes the leader StatefulSet
and one per readiness change; a pass that follows a readiness change and only lowers the
partition (releasing more groups) shares that change's row, one that changes ``replicas``
(surge created or reclaimed) gets its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from lws_operator.logic.rollout.pacing import (
    GroupState,
    LeaderStatefulSetState,
    RolloutError,
    RolloutSnapshot,
    plan_rollout,
)

# A group's state in a row, relative to the revision being rolled out (the first row: to the
# live current revision).
UPDATED: Final = "updated"  # new revision, Ready
UPDATING: Final = "updating"  # new revision, not Ready yet
OLD: Final = "old"  # previous revision, Ready
OLD_NOT_READY: Final = "old-not-ready"  # previous revision, not Ready
SYMBOLS: Final = {UPDATED: "✅", OLD: "❎", UPDATING: "⏳", OLD_NOT_READY: "❌"}

BATCH: Final = "batch"
ONE: Final = "one"
READY_ORDERS: Final = (BATCH, ONE)


@dataclass(frozen=True)
class LiveGroup:
    """One ordinal of the live leader StatefulSet."""

    ready: bool
    current: bool  # on the live current revision


@dataclass(frozen=True)
class PreviewInput:
    """What the dry run starts from: the set after the change, and the live rollout state."""

    name: str
    replicas: int  # spec.replicas after the change
    partition: int  # rollingUpdateConfiguration.partition after the change
    max_unavailable: int | str
    max_surge: int | str
    size: int
    template_changed: bool
    leader_sts: LeaderStatefulSetState
    groups: tuple[LiveGroup, ...]


@dataclass(frozen=True)
class Row:
    stage: int
    partition: int
    replicas: int  # the leader StatefulSet's replicas (groups, surge included)
    groups: tuple[str, ...]  # one state per ordinal
    available: int  # groups Ready, surge included
    description: str


@dataclass(frozen=True)
class Preview:
    rows: tuple[Row, ...]
    complete: bool  # every group at or above the user's partition updated and Ready
    min_available: int  # the fewest Ready groups at any step
    error: str | None = None


@dataclass(frozen=True)
class _Group:
    new: bool
    ready: bool
    since: int  # the pass whose decision created or recreated it; -1: live, untouched


def _symbolic(groups: Sequence[_Group]) -> tuple[str, ...]:
    out = []
    for g in groups:
        if g.new:
            out.append(UPDATED if g.ready else UPDATING)
        else:
            out.append(OLD if g.ready else OLD_NOT_READY)
    return tuple(out)


def _names(indices: Sequence[int]) -> str:
    return ", ".join(f"R-{i}" for i in indices)


def _verb(indices: Sequence[int], one: str, many: str) -> str:
    return one if len(indices) == 1 else many


class _Simulation:
    def __init__(self, inp: PreviewInput) -> None:
        self.inp = inp
        self.sts = inp.leader_sts
        # Relative to the revision rolled out: with a template change every live group is old.
        self.groups = [_Group(new=g.current and not inp.template_changed, ready=g.ready,
                              since=-1) for g in inp.groups]
        self.passes = 0
        self.first = True
        self.rows: list[Row] = []

    def row(self, description: str) -> None:
        self.rows.append(Row(len(self.rows) + 1, self.sts.partition, self.sts.replicas,
                             _symbolic(self.groups), sum(g.ready for g in self.groups),
                             description))

    def amend(self, description: str) -> None:
        last = self.rows[-1]
        self.rows[-1] = replace(last, partition=self.sts.partition, replicas=self.sts.replicas,
                                groups=_symbolic(self.groups),
                                available=sum(g.ready for g in self.groups),
                                description=f"{last.description}; {description}")

    def one_pass(self) -> tuple[str, bool] | None:
        """Run the controller's decision once and apply it; what changed (text, and whether
        ``replicas`` did), or None when nothing did."""
        inp = self.inp
        snapshot = RolloutSnapshot(
            lws_name=inp.name, replicas=inp.replicas, lws_partition=inp.partition,
            max_unavailable=inp.max_unavailable, max_surge=inp.max_surge, size=inp.size,
            lws_updated=self.first and inp.template_changed, current_key="new",
            leader_sts=self.sts,
            groups=tuple(GroupState(ready=g.ready, updated=g.new) for g in self.groups))
        self.first = False
        decision = plan_rollout(snapshot)
        self.passes += 1
        old_p, old_r = self.sts.partition, self.sts.replicas
        self.sts = LeaderStatefulSetState(decision.replicas, decision.partition,
                                          str(inp.replicas))
        parts: list[str] = []
        if decision.replicas > old_r:
            parts += self._scaled_up(old_r, decision.replicas, decision.partition)
        elif decision.replicas < old_r:
            parts += self._scaled_down(old_r, decision.replicas)
        if decision.partition != old_p:
            verb = "decreases" if decision.partition < old_p else "rises"
            parts.append(f"partition {verb} to {decision.partition}")
        begun = []
        for i in range(decision.partition, min(old_r, decision.replicas)):
            if not self.groups[i].new:
                self.groups[i] = _Group(new=True, ready=False, since=self.passes)
                begun.append(i)
        if begun:
            parts.append(f"{_names(begun)} {_verb(begun, 'begins', 'begin')} update")
        if not parts:
            return None
        return "; ".join(parts), decision.replicas != old_r

    def _scaled_up(self, old_r: int, replicas: int, partition: int) -> list[str]:
        """Groups ``old_r`` to ``replicas`` created (new past the partition); what it says, the
        surge groups (past ``spec.replicas``) apart."""
        added = list(range(old_r, replicas))
        for i in added:
            self.groups.append(_Group(new=i >= partition, ready=False, since=self.passes))
        surge = [i for i in added if i >= self.inp.replicas]
        plain = [i for i in added if i < self.inp.replicas]
        parts = []
        if plain:
            parts.append(f"{_names(plain)} created")
        if surge:
            parts.append(f"{len(surge)} surge {_verb(surge, 'replica', 'replicas')} "
                         f"created ({_names(surge)})")
        return parts

    def _scaled_down(self, old_r: int, replicas: int) -> list[str]:
        """Groups from ``replicas`` on removed; what it says (a surge reclaimed, when only
        surge groups went)."""
        removed = list(range(replicas, old_r))
        del self.groups[replicas:]
        surge = [i for i in removed if i >= self.inp.replicas]
        if surge and len(surge) == len(removed):
            return [f"scaled down to {replicas} replicas; surge "
                    f"{_verb(surge, 'replica', 'replicas')} reclaimed"]
        return [f"scaled down to {replicas} replicas ({_names(removed)} removed)"]

    def settle(self, after_readiness: bool) -> None:
        """Passes until nothing changes (bounded: the pacing converges in a few passes)."""
        for _ in range(8):
            changed = self.one_pass()
            if changed is None:
                return
            text, replicas_changed = changed
            if after_readiness and not replicas_changed:
                self.amend(text)
            else:
                self.row(text[0].upper() + text[1:])
            after_readiness = False
        raise RolloutError("the simulated rollout did not settle")

    def candidates(self) -> list[int]:
        return [i for i, g in enumerate(self.groups) if not g.ready and g.since >= 0]

    def next_ready(self, order: str) -> list[int]:
        waiting = self.candidates()
        if not waiting:
            return []
        oldest = min(self.groups[i].since for i in waiting)
        batch = [i for i in waiting if self.groups[i].since == oldest]
        return batch if order == BATCH else batch[:1]

    def become_ready(self, indices: Sequence[int]) -> None:
        for i in indices:
            self.groups[i] = replace(self.groups[i], ready=True)
        self.row(f"{_names(indices)} {_verb(indices, 'becomes', 'become')} ready")

    def complete(self) -> bool:
        inp = self.inp
        return (self.sts.replicas == inp.replicas and len(self.groups) == inp.replicas
                and all(g.new and g.ready for g in self.groups[inp.partition:]))


def preview_rollout(inp: PreviewInput, order: str = BATCH,
                    schedule: Sequence[Sequence[int]] | None = None,
                    max_rows: int = 400) -> Preview:
    """The step table of the rollout ``inp`` describes. ``schedule``: the groups that turn
    Ready at each readiness step, in order (instead of ``order``)."""
    sim = _Simulation(inp)
    first_row = Row(1, sim.sts.partition, sim.sts.replicas,
                    _symbolic([_Group(new=g.current, ready=g.ready, since=-1)
                               for g in inp.groups]),
                    sum(g.ready for g in inp.groups), "Before the change")
    sim.rows.append(first_row)
    error = None
    try:
        sim.settle(after_readiness=False)
        steps = iter(schedule) if schedule is not None else None
        while len(sim.rows) < max_rows:
            ready = list(next(steps, [])) if steps is not None else sim.next_ready(order)
            if not ready:
                break
            sim.become_ready(ready)
            sim.settle(after_readiness=True)
    except RolloutError as exc:
        error = str(exc)
    complete = sim.complete() and error is None
    rows = sim.rows
    if complete and len(rows) > 1:
        last = rows[-1]
        rows[-1] = replace(last, description=f"{last.description}; rolling update complete")
    return Preview(tuple(rows), complete, min(r.available for r in rows), error)
