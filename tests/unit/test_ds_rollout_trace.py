"""The planner and the drain together over one simulated slice, pass by pass: the full-reconciler
traces of a mid-rollout template change (A -> B -> C) and of asymmetric sizes, where coordinated
drain spills budget over to the older revision (upstream's TestMidRolloutABC and
TestAsymmetricSizesCoordinatedDrain, executor_test.go, as traced with every LeaderWorkerSet made
ready after each pass).

The simulation applies exactly the controller's per-slice rules that sit around the pure parts:
drained revisions (every LeaderWorkerSet at 0) are deleted first; a slice with old replicas of
spec roles takes the rollout path (start: snapshot the baselines, create the new revision at 0;
continue: plan a step, scale up, then drain); otherwise the simple path sets the new revision to
its target.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from lws_operator.logic.disaggregated.drain import OldLws, OldRevision, scale_down_old
from lws_operator.logic.disaggregated.planner import RoleBudget
from lws_operator.logic.disaggregated.rollout_inputs import rollout_inputs, spec_old_total
from lws_operator.logic.disaggregated.scale_up import scale_up_new

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@dataclass
class Lws:
    revision: str
    role: str
    replicas: int
    created: int
    initial: int | None = None


@dataclass
class Slice:
    roles: tuple[str, ...]
    target_revision: str
    targets: dict[str, int]
    budgets: tuple[RoleBudget, ...]
    lws: dict[str, Lws] = field(default_factory=dict)
    clock: int = 0

    def add(self, revision: str, role: str, replicas: int) -> None:
        self.clock += 1
        self.lws[f"ds-0-{revision}-{role}"] = Lws(revision, role, replicas, self.clock)

    def old(self) -> list[OldRevision]:
        revisions: dict[str, list[tuple[str, Lws]]] = {}
        for name, lws in self.lws.items():
            if lws.revision != self.target_revision:
                revisions.setdefault(lws.revision, []).append((name, lws))
        return [OldRevision(rev, max(T0 + timedelta(minutes=lws.created) for _, lws in members),
                            tuple(OldLws(name, lws.role, lws.replicas, lws.initial)
                                  for name, lws in members))
                for rev, members in revisions.items()]

    def new(self) -> dict[str, Lws]:
        return {lws.role: lws for lws in self.lws.values()
                if lws.revision == self.target_revision}

    def reconcile(self) -> str:
        """One pass; returns what it did."""
        for revision in self.old():
            if all(m.replicas == 0 for m in revision.members):
                for m in revision.members:
                    del self.lws[m.name]
        old = self.old()
        if not old or spec_old_total(self.roles, old) == 0:
            for role in self.roles:
                name = f"ds-0-{self.target_revision}-{role}"
                if name in self.lws:
                    self.lws[name].replicas = self.targets[role]
                else:
                    self.add(self.target_revision, role, self.targets[role])
            return "simple"
        if not self.new():
            for lws in self.lws.values():
                lws.initial = lws.replicas
            for role in self.roles:
                self.add(self.target_revision, role, 0)
            return "start"
        inputs = rollout_inputs(self.roles, old, {r: x.replicas for r, x in self.new().items()},
                                self.targets)
        step = inputs.next_step(self.budgets)
        if step is None:
            return "complete"
        names = {role: f"ds-0-{self.target_revision}-{role}" for role in self.roles}
        for up in scale_up_new(inputs.roles, self.roles, inputs.current_new, step.new, names):
            self.lws[up.name].replicas = up.to
        for down in scale_down_old(old, inputs.roles, inputs.budget(step)):
            self.lws[down.name].replicas = down.to
        return f"step {step}"

    def row(self, revisions: str) -> str:
        cells = []
        for rev in revisions:
            counts = [self.lws[f"ds-0-{rev}-{role}"].replicas
                      for role in self.roles if f"ds-0-{rev}-{role}" in self.lws]
            cells.append(f"{rev}:{','.join(map(str, counts)) if counts else '-'}")
        return " ".join(cells)


def run(world: Slice, passes: int) -> list[str]:
    rows = []
    for _ in range(passes):
        action = world.reconcile()
        rows.append(f"{world.row('ABC')} [{action}]")
        for revision in world.old():
            live = [m.replicas > 0 for m in revision.members]
            assert all(live) or not any(live), f"orphaned role in {revision.revision}: {rows}"
    return rows


def test_mid_rollout_abc() -> None:
    """A(1,2) and B(1,2) old, C the target (2,4), surge 1: B (newest) pays first; when B's last
    step zeroes it, A is untouched; the drained B is deleted and A's share of the baseline drops
    out."""
    world = Slice(("prefill", "decode"), "C", {"prefill": 2, "decode": 4},
                  (RoleBudget(1, 0), RoleBudget(1, 0)))
    world.add("A", "prefill", 1)
    world.add("A", "decode", 2)
    world.add("B", "prefill", 1)
    world.add("B", "decode", 2)
    assert run(world, 9) == [
        "A:1,2 B:1,2 C:0,0 [start]",
        "A:1,2 B:1,2 C:1,1 [step 2,4|1,1]",
        "A:1,2 B:1,1 C:1,1 [step 2,3|1,1]",
        "A:1,2 B:1,1 C:1,2 [step 2,3|1,2]",
        "A:1,2 B:0,0 C:1,2 [step 1,2|1,2]",
        "A:1,2 B:- C:2,3 [step 1,2|2,3]",
        "A:1,1 B:- C:2,4 [step 1,1|2,4]",
        "A:0,0 B:- C:2,4 [step 0,0|2,4]",
        "A:- B:- C:2,4 [simple]",
    ]


def test_asymmetric_sizes_coordinated_drain() -> None:
    """A(1,2) and B(3,1), target (4,3), surge 1/2: at pass 4 B's decode reaching 0 zeroes B, the
    prefill budget B did not spend drains A to 0 too (budget spill-over, kept); with no old left,
    the simple path takes C straight to its target. No revision ever has one role at 0."""
    world = Slice(("prefill", "decode"), "C", {"prefill": 4, "decode": 3},
                  (RoleBudget(1, 0), RoleBudget(2, 0)))
    world.add("A", "prefill", 1)
    world.add("A", "decode", 2)
    world.add("B", "prefill", 3)
    world.add("B", "decode", 1)
    rows = run(world, 7)
    assert rows[:6] == [
        "A:1,2 B:3,1 C:0,0 [start]",
        "A:1,2 B:3,1 C:1,1 [step 4,3|1,1]",
        "A:1,2 B:2,1 C:1,1 [step 3,3|1,1]",
        "A:1,2 B:2,1 C:2,2 [step 3,3|2,2]",
        "A:0,0 B:0,0 C:2,2 [step 2,2|2,2]",
        "A:- B:- C:4,3 [simple]",
    ]
    assert rows[6] == "A:- B:- C:4,3 [simple]"
