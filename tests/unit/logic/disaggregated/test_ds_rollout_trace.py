"""The planner and the drain together over one simulated slice, pass by pass: the full-reconciler
traces of a mid-rollout template change (A -> B -> C) and of asymmetric sizes, where coordinated
drain spills budget over to the older revision (upstream's TestMidRolloutABC and
TestAsymmetricSizesCoordinatedDrain, executor_test.go, as traced with every LeaderWorkerSet made
ready after each pass).

The simulation applies exactly the controller's per-slice rules that sit around the pure parts:
drained revisions (every LeaderWorkerSet at 0) are deleted first; a slice with old replicas of
any role, removed roles included, takes the rollout path (start: snapshot the baselines, create
the new revision at 0; continue: plan a step, scale up, then drain); otherwise the simple path
sets the new revision to its target.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from lws_operator.logic.disaggregated.drain import OldLws, OldRevision, scale_down_old
from lws_operator.logic.disaggregated.planner import RoleBudget
from lws_operator.logic.disaggregated.rollout_config import role_budget
from lws_operator.logic.disaggregated.rollout_inputs import rollout_inputs
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
        if sum(m.replicas for r in old for m in r.members) == 0:
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
        removed = len(inputs.roles) - len(self.roles)
        step = inputs.next_step((*self.budgets, *(role_budget(None, 0),) * removed))
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


def abc_world(a: tuple[int, int], b: tuple[int, int], c: tuple[int, int]) -> Slice:
    """Upstream's ABC scenario: A and B old (baselines 2,2 each), C newest and the target 4,4."""
    world = Slice(("prefill", "decode"), "C", {"prefill": 4, "decode": 4},
                  (RoleBudget(1, 0), RoleBudget(1, 0)))
    for rev, counts in (("A", a), ("B", b), ("C", c)):
        for role, replicas in zip(world.roles, counts, strict=True):
            world.add(rev, role, replicas)
            if rev != "C":
                world.lws[f"ds-0-{rev}-{role}"].initial = 2
    return world


def continue_rollout(world: Slice) -> str:
    """One rollout-path pass without the drained-revision cleanup (upstream's scenario calls the
    rollout step directly)."""
    old = world.old()
    inputs = rollout_inputs(world.roles, old,
                            {r: x.replicas for r, x in world.new().items()}, world.targets)
    step = inputs.next_step(world.budgets)
    assert step is not None
    names = {role: f"ds-0-C-{role}" for role in world.roles}
    for up in scale_up_new(inputs.roles, world.roles, inputs.current_new, step.new, names):
        world.lws[up.name].replicas = up.to
    for down in scale_down_old(old, inputs.roles, inputs.budget(step)):
        world.lws[down.name].replicas = down.to
    return world.row("ABC")


# 134-136: TestReconcileRollingUpdateABCScenario, the planner and drain part of each pass.
def test_abc_first_step_scales_up_c_without_drain() -> None:
    assert continue_rollout(abc_world((2, 2), (2, 2), (0, 0))) == "A:2,2 B:2,2 C:1,1"


def test_abc_c_scales_up_while_b_stays() -> None:
    assert continue_rollout(abc_world((0, 0), (2, 2), (2, 2))) == "A:0,0 B:2,2 C:3,3"


def test_abc_drains_newest_old_workload_first() -> None:
    assert continue_rollout(abc_world((2, 2), (2, 2), (2, 2))) == "A:2,2 B:1,1 C:2,2"


def test_pause_mid_rollout_drains_everything() -> None:
    """All static roles set to 0 mid-rollout: the new side is at its target (0), so the final
    drain takes old to 0 at once; the next pass deletes it and the simple path pauses the new
    revision too."""
    world = Slice(("prefill", "decode"), "C", {"prefill": 3, "decode": 3},
                  (RoleBudget(1, 0), RoleBudget(1, 0)))
    world.add("A", "prefill", 3)
    world.add("A", "decode", 3)
    assert run(world, 3)[-1] == "A:2,2 B:- C:1,1 [step 2,2|1,1]"
    world.targets = {"prefill": 0, "decode": 0}
    assert run(world, 2) == ["A:0,0 B:- C:1,1 [step 0,0|1,1]", "A:- B:- C:0,0 [simple]"]


def test_replica_edit_mid_rollout_keeps_the_baseline() -> None:
    """Targets raised mid-rollout: the old baseline (the initial-replicas snapshot) stays, the
    new side paces toward the new targets, and no old role ever drains alone."""
    world = Slice(("prefill", "decode"), "C", {"prefill": 2, "decode": 2},
                  (RoleBudget(1, 0), RoleBudget(1, 0)))
    world.add("A", "prefill", 2)
    world.add("A", "decode", 2)
    assert run(world, 2)[-1] == "A:2,2 B:- C:1,1 [step 2,2|1,1]"
    world.targets = {"prefill": 4, "decode": 3}
    rows = run(world, 8)
    assert rows == [
        "A:2,2 B:- C:2,2 [step 2,2|2,2]",
        # decode's next batch would pass 3 + 1: the force drain takes one old decode with it
        "A:2,1 B:- C:3,3 [step 2,1|3,3]",
        "A:1,1 B:- C:3,3 [step 1,1|3,3]",
        "A:1,1 B:- C:4,3 [step 1,1|4,3]",
        "A:0,0 B:- C:4,3 [step 0,0|4,3]",
        "A:- B:- C:4,3 [simple]",
        "A:- B:- C:4,3 [simple]",
        "A:- B:- C:4,3 [simple]",
    ]


def test_revert_mid_rollout_makes_the_old_revision_new_again() -> None:
    """A -> B reverted to A mid-rollout: A's LeaderWorkerSets are the target again (no start
    step, no snapshot on B), so B's baseline is its own shrinking replicas; A grows back first,
    then B drains whole."""
    world = Slice(("prefill", "decode"), "B", {"prefill": 3, "decode": 3},
                  (RoleBudget(1, 0), RoleBudget(1, 0)))
    world.add("A", "prefill", 3)
    world.add("A", "decode", 3)
    assert run(world, 3)[-1] == "A:2,2 B:1,1 C:- [step 2,2|1,1]"
    world.target_revision = "A"
    assert run(world, 3) == ["A:3,3 B:1,1 C:- [step 1,1|3,3]",
                             "A:3,3 B:0,0 C:- [step 0,0|3,3]",
                             "A:3,3 B:- C:- [simple]"]


def test_full_rename_drains_the_old_revision() -> None:
    """Every role renamed (prefill/decode -> p/d): no old replica belongs to a spec role, yet
    the slice takes the rollout path (every old role counts; upstream counted spec roles only,
    took the simple path and left the old revision serving forever). It rolls like any add +
    remove: the new roles grow in surge batches beside the old pair (a removed role's target is
    0, so no surge bound ties the two sides), then the old pair drains together and is
    deleted."""
    world = Slice(("p", "d"), "B", {"p": 2, "d": 2}, (RoleBudget(1, 0), RoleBudget(1, 0)))
    world.add("A", "prefill", 2)
    world.add("A", "decode", 2)
    states = []
    for _ in range(6):
        action = world.reconcile()
        states.append(",".join(str(world.lws[n].replicas) if n in world.lws else "-" for n in (
            "ds-0-A-prefill", "ds-0-A-decode", "ds-0-B-p", "ds-0-B-d")) + f" [{action}]")
    # planner vectors over the universe p, d, then the removed decode, prefill
    assert states == ["2,2,0,0 [start]", "2,2,1,1 [step 0,0,2,2|1,1,0,0]",
                      "2,2,2,2 [step 0,0,2,2|2,2,0,0]", "0,0,2,2 [step 0,0,0,0|2,2,0,0]",
                      "-,-,2,2 [simple]", "-,-,2,2 [simple]"]


def test_random_multi_revision_rollouts_converge_without_a_lone_role() -> None:
    """Seeded random slices: 1-3 old revisions over 2-4 of five role names (so roles are added,
    removed and renamed), random sizes, targets and budgets. Each one ends with only the target
    revision, at its targets, and no pass ever leaves an old revision with one role at 0 beside
    a live sibling (checked by ``run`` after every pass)."""
    rng = random.Random(20)
    budgets = (RoleBudget(1, 0), RoleBudget(2, 0), RoleBudget(0, 1), RoleBudget(1, 1),
               RoleBudget(0, 2))
    names = ("r0", "r1", "r2", "r3", "r4")
    for _ in range(300):
        spec = tuple(rng.sample(names, rng.randint(2, 4)))
        targets = {r: rng.randint(0, 5) for r in spec}
        world = Slice(spec, "Z", targets, tuple(rng.choice(budgets) for _ in spec))
        for rev in "ABC"[:rng.randint(1, 3)]:
            for role in rng.sample(names, rng.randint(2, 4)):
                world.add(rev, role, rng.randint(1, 5))
        start = {n: x.replicas for n, x in world.lws.items()}
        rows = run(world, 80)
        assert {(x.revision, x.role, x.replicas) for x in world.lws.values()} == {
            ("Z", r, t) for r, t in targets.items()}, (spec, targets, start, rows[-3:])
