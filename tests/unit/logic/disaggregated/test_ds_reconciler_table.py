"""The DisaggregatedSet reconciler as a table: a world in, one pass's requests and Events out.

Each case is one of upstream's reconciler tests (executor_test.go's TestReconcilerIntegration,
TestReconcileRollingUpdateABCScenario, TestMidRolloutABC, TestAsymmetricSizesCoordinatedDrain;
disaggregatedset_controller_test.go), run through the real reconciler, runner, executor and
cache against a simulated API server (``tests/harness/ds_world.py``); multi-pass traces make every
LeaderWorkerSet ready after each pass, as upstream's do. A set at rest plans nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.disaggregated import (
    INITIAL_REPLICAS_ANNOTATION,
    NAME_LABEL,
    REVISION_LABEL,
    ROLE_LABEL,
    SCALER_KIND,
    SLICE_LABEL,
)
from lws_operator.controllers.disaggregatedset import WATCH_GAP_REQUEUE
from lws_operator.logic.disaggregated import children
from lws_operator.logic.disaggregated.names import legacy_lws_name, lws_name, service_name
from lws_operator.logic.disaggregated.revision import compute_revision
from tests.harness.ds_world import (
    DS_NAME,
    DS_UID,
    DsWorld,
    disaggregated_set,
    new_world,
    role,
)

PD = ("prefill", "decode")
OLD_A = "aaaaaaaa"
OLD_B = "bbbbbbbb"
T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:01:00Z"


def world_of(*roles: dict[str, Any], slices: int | None = None) -> tuple[DsWorld, str]:
    ds = disaggregated_set(*roles, slices=slices)
    return new_world(ds), compute_revision(ds)


def name(rev: str, role_name: str, slice_index: int = 0) -> str:
    return lws_name(DS_NAME, slice_index, rev, role_name)


def old_revision(world: DsWorld, rev: str, counts: tuple[int, ...], created: str,
                 annotate: bool = False, roles: tuple[str, ...] = PD,
                 ready: bool = True) -> None:
    for role_name, count in zip(roles, counts, strict=True):
        world.child(name(rev, role_name), role_name, rev, count, created=created, ready=ready,
                    annotations={INITIAL_REPLICAS_ANNOTATION: str(count)} if annotate else None)


def new_children(world: DsWorld, rev: str, counts: tuple[int, ...], ready: bool = True,
                 roles: tuple[str, ...] = PD) -> None:
    for role_name, count in zip(roles, counts, strict=True):
        world.child(name(rev, role_name), role_name, rev, count, ready=ready,
                    created="2026-01-01T00:30:00Z")


def at_rest(world: DsWorld) -> None:
    """A second pass over what the first left (every child ready) writes nothing, its revision
    history included."""
    world.ready()
    world.reconcile()
    world.ready()
    recorded = len(world.history)
    again = world.reconcile()
    assert again.lines == [], again.lines
    assert world.history[recorded:] == []
    assert again.error is None


# ------------------------------------------------------------------- executor_test.go


def test_completes_and_cleans_up_old_workloads() -> None:
    """Upstream's TestReconcilerIntegration/completes_and_cleans_up_old_workloads: old 0/0 and
    new 2/2 ready: the drained revision is deleted; no requeue."""
    world, rev = world_of(role("prefill", 2), role("decode", 2))
    old_revision(world, OLD_A, (0, 0), T0)
    new_children(world, rev, (2, 2))
    done = world.reconcile()
    assert done.lines[:4] == [
        f"delete LeaderWorkerSet {name(OLD_A, 'prefill')}",
        f"event LWSDeleted: Deleted drained LWS {name(OLD_A, 'prefill')}",
        f"delete LeaderWorkerSet {name(OLD_A, 'decode')}",
        f"event LWSDeleted: Deleted drained LWS {name(OLD_A, 'decode')}"]
    assert set(world.lws()) == {name(rev, "prefill"), name(rev, "decode")}
    assert done.requeue is None
    assert done.error is None


def test_advances_through_rolling_update() -> None:
    """…/advances_through_rolling_update: old 2/2 and no new: the rollout starts (baselines
    recorded, the new revision's children created at 0) and asks to look again."""
    world, rev = world_of(role("prefill", 2), role("decode", 2))
    old_revision(world, OLD_A, (2, 2), T0)
    started = world.reconcile()
    assert started.lines == [
        f"event RollingUpdateStarted: Started rolling update to revision {rev}",
        f"annotate {name(OLD_A, 'prefill')} initial-replicas=2",
        f"annotate {name(OLD_A, 'decode')} initial-replicas=2",
        f"create LeaderWorkerSet {name(rev, 'prefill')} replicas=0",
        f"create LeaderWorkerSet {name(rev, 'decode')} replicas=0",
        f"status DisaggregatedSet {DS_NAME}"]
    assert started.requeue is not None
    assert started.requeue > 0


def test_no_scale_down_until_new_ready() -> None:
    """…/no_scale_down_until_new_ready: old 4, new at 2 with nothing ready yet, surge 2: the
    stability gate holds the old revision."""
    world, rev = world_of(role("prefill", 4, surge=2, unavailable=0),
                          role("decode", 4, surge=2, unavailable=0))
    old_revision(world, OLD_A, (4, 4), T0, annotate=True)
    new_children(world, rev, (2, 2), ready=False)
    held = world.reconcile()
    assert [line for line in held.writes() if not line.startswith("status")] == []
    assert world.by_revision(PD)[OLD_A] == (4, 4)
    assert held.requeue == 1.0


def test_a_watch_gap_holds_the_pass_until_the_childrens_watches_are_open() -> None:
    """The final drain decided on a cache whose LeaderWorkerSet watch is relisting could take
    the old revision down on the new one's readiness from before the gap: the pass writes
    nothing and looks again soon; with the watches open it drains."""
    world, rev = world_of(role("prefill", 4), role("decode", 4))
    old_revision(world, OLD_A, (4, 4), T0, annotate=True)
    new_children(world, rev, (4, 4))
    held = world.reconcile(caches_current=False)
    assert held.lines == []
    assert held.requeue == WATCH_GAP_REQUEUE
    assert world.by_revision(PD)[OLD_A] == (4, 4)
    drained = world.reconcile()
    assert drained.lines[0] == f"scale {name(OLD_A, 'prefill')} to 0"


def test_scales_down_when_new_ready() -> None:
    """…/scales_down_when_new_ready: old 4, new 4/4 ready: the final drain."""
    world, rev = world_of(role("prefill", 4), role("decode", 4))
    old_revision(world, OLD_A, (4, 4), T0, annotate=True)
    new_children(world, rev, (4, 4))
    drained = world.reconcile()
    assert drained.lines[:4] == [
        f"scale {name(OLD_A, 'prefill')} to 0",
        f"event ScalingDown: Scaling down prefill LWS {name(OLD_A, 'prefill')} from 4 to 0 "
        "replicas",
        f"scale {name(OLD_A, 'decode')} to 0",
        f"event ScalingDown: Scaling down decode LWS {name(OLD_A, 'decode')} from 4 to 0 "
        "replicas"]
    world.ready()
    world.reconcile()
    assert set(world.lws()) == {name(rev, "prefill"), name(rev, "decode")}


@pytest.mark.parametrize(("a", "b", "c", "after"), [
    # first_step_scales_up_C_without_drain
    ((2, 2), (2, 2), (0, 0), {OLD_A: (2, 2), OLD_B: (2, 2), "C": (1, 1)}),
    # C_scales_up_while_B_stays (A drained: deleted)
    ((0, 0), (2, 2), (2, 2), {OLD_B: (2, 2), "C": (3, 3)}),
    # drains_newest_old_workload_first
    ((2, 2), (2, 2), (2, 2), {OLD_A: (2, 2), OLD_B: (1, 1), "C": (2, 2)}),
], ids=["first_step_scales_up_C_without_drain", "C_scales_up_while_B_stays",
        "drains_newest_old_workload_first"])
def test_rolling_update_abc(a: tuple[int, int], b: tuple[int, int], c: tuple[int, int],
                            after: dict[str, tuple[int, int]]) -> None:
    """Upstream's TestReconcileRollingUpdateABCScenario: A and B old (baselines 2), C the
    target at 4/4, newest; one pass."""
    world, rev = world_of(role("prefill", 4), role("decode", 4))
    old_revision(world, OLD_A, a, T0)
    old_revision(world, OLD_B, b, T1)
    for lws in world.lws().values():
        lws["metadata"]["annotations"] = {INITIAL_REPLICAS_ANNOTATION: "2"}
        world.put("LeaderWorkerSet", lws)
    new_children(world, rev, c)
    world.reconcile()
    got = world.by_revision(PD)
    assert {("C" if k == rev else k): v for k, v in got.items()} == after


def _trace(world: DsWorld, rev: str, passes: int) -> list[dict[str, tuple[int, ...]]]:
    """The replicas per revision after each pass, every child made ready in between; asserts
    no pass fails."""
    states = []
    for _ in range(passes):
        done = world.reconcile()
        assert done.error is None, done.error
        world.ready()
        states.append({("C" if k == rev else k): v for k, v in world.by_revision(PD).items()})
    return states


def test_mid_rollout_abc() -> None:
    """Upstream's TestMidRolloutABC: A(1,2) and B(1,2) old, B newer; target C (2,4), surge 1.
    The exact pass-by-pass trace: B (newest) pays first, coordinated drain zeroes it whole, then
    A drains, and both are deleted once at 0."""
    world, rev = world_of(role("prefill", 2), role("decode", 4))
    old_revision(world, OLD_A, (1, 2), T0)
    old_revision(world, OLD_B, (1, 2), T1)
    assert _trace(world, rev, 9) == [
        {OLD_A: (1, 2), OLD_B: (1, 2), "C": (0, 0)},  # start
        {OLD_A: (1, 2), OLD_B: (1, 2), "C": (1, 1)},  # up
        {OLD_A: (1, 2), OLD_B: (1, 1), "C": (1, 1)},  # proportional: B pays
        {OLD_A: (1, 2), OLD_B: (1, 1), "C": (1, 2)},  # up
        {OLD_A: (1, 2), OLD_B: (0, 0), "C": (1, 2)},  # B drained whole
        {OLD_A: (1, 2), "C": (2, 3)},  # B deleted; up
        {OLD_A: (1, 1), "C": (2, 4)},  # force: drain and scale
        {OLD_A: (0, 0), "C": (2, 4)},  # final drain
        {"C": (2, 4)},  # A deleted; simple path
    ]
    baseline = {n: o["metadata"].get("annotations") for n, o in world.lws().items()}
    assert baseline == {name(rev, "prefill"): None, name(rev, "decode"): None}


def test_asymmetric_sizes_coordinated_drain() -> None:
    """Upstream's TestAsymmetricSizesCoordinatedDrain: A(1,2) and B(3,1) old, target (4,3),
    surge 1/2. No revision ever has one role at 0 while another serves; coordinated drain
    empties both old revisions at pass 4 and the simple path takes C to target at pass 5."""
    world, rev = world_of(role("prefill", 4, surge=1, unavailable=0),
                          role("decode", 3, surge=2, unavailable=0))
    old_revision(world, OLD_A, (1, 2), T0)
    old_revision(world, OLD_B, (3, 1), T1)
    trace = _trace(world, rev, 7)
    for state in trace:
        for counts in state.values():
            assert not (0 in counts and any(counts)), trace
    assert trace[:6] == [
        {OLD_A: (1, 2), OLD_B: (3, 1), "C": (0, 0)},
        {OLD_A: (1, 2), OLD_B: (3, 1), "C": (1, 1)},
        {OLD_A: (1, 2), OLD_B: (2, 1), "C": (1, 1)},
        {OLD_A: (1, 2), OLD_B: (2, 1), "C": (2, 2)},
        {OLD_A: (0, 0), OLD_B: (0, 0), "C": (2, 2)},
        {"C": (4, 3)},
    ]
    assert trace[6] == {"C": (4, 3)}


# ------------------------------------------------------ disaggregatedset_controller_test.go


def test_fresh_deployment_no_rolling_update() -> None:
    """TestFreshDeploymentNoRollingUpdate: one child per role at the spec's replicas; at rest
    afterwards."""
    world, rev = world_of(role("prefill", 3), role("decode", 2))
    created = world.reconcile()
    assert created.lines == [
        f"create LeaderWorkerSet {name(rev, 'prefill')} replicas=3",
        f"create LeaderWorkerSet {name(rev, 'decode')} replicas=2",
        f"status DisaggregatedSet {DS_NAME}"]
    assert created.requeue is None
    at_rest(world)


def test_scaling_without_rolling_update() -> None:
    """TestScalingWithoutRollingUpdate: children at the target revision are scaled in place,
    without Events."""
    world, rev = world_of(role("prefill", 5), role("decode", 4))
    new_children(world, rev, (3, 2))
    scaled = world.reconcile()
    assert scaled.writes()[:2] == [f"scale {name(rev, 'prefill')} to 5",
                                   f"scale {name(rev, 'decode')} to 4"]
    assert scaled.events() == []


def test_slices_create_one_set_per_slice() -> None:
    """TestSlicesCreateOneSetPerSlice: slices 2: four children, labelled by slice, replicas per
    slice."""
    world, rev = world_of(role("prefill", 3), role("decode", 2), slices=2)
    world.reconcile()
    got = {n: (o["metadata"]["labels"][SLICE_LABEL], o["spec"]["replicas"])
           for n, o in world.lws().items()}
    assert got == {name(rev, "prefill", 0): ("0", 3), name(rev, "decode", 0): ("0", 2),
                   name(rev, "prefill", 1): ("1", 3), name(rev, "decode", 1): ("1", 2)}


def test_slices_scale_down_deletes_removed_slice() -> None:
    """TestSlicesScaleDownDeletesRemovedSlice: slices 1 with slice 1's children present: they
    are deleted directly, slice 0 kept."""
    world, rev = world_of(role("prefill", 1), role("decode", 1))
    for k in (0, 1):
        for role_name in PD:
            world.child(name(rev, role_name, k), role_name, rev, 1, slice_index=k)
    done = world.reconcile()
    assert done.lines[:4] == [
        f"delete LeaderWorkerSet {name(rev, 'prefill', 1)}",
        f"event LWSDeleted: Deleted LWS {name(rev, 'prefill', 1)} for removed slice 1",
        f"delete LeaderWorkerSet {name(rev, 'decode', 1)}",
        f"event LWSDeleted: Deleted LWS {name(rev, 'decode', 1)} for removed slice 1"]
    assert set(world.lws()) == {name(rev, "prefill"), name(rev, "decode")}


def test_legacy_adopted_in_place() -> None:
    """TestLegacyAdoptedInPlace: a legacy (pre-slices) child at the target revision is kept
    under its name and scaled there; no slice-aware duplicate."""
    world, rev = world_of(role("prefill", 2), role("decode", 1))
    for role_name in PD:
        world.child(legacy_lws_name(DS_NAME, rev, role_name), role_name, rev, 1,
                    slice_index=None)
    done = world.reconcile()
    assert done.writes()[0] == f"scale {legacy_lws_name(DS_NAME, rev, 'prefill')} to 2"
    assert set(world.lws()) == {legacy_lws_name(DS_NAME, rev, r) for r in PD}


def test_legacy_migrates_to_slice_aware_on_rollout() -> None:
    """TestLegacyMigratesToSliceAwareOnRollout: a legacy slice 0 at an old revision: the new
    revision's children are slice-aware (label 0); the legacy ones drain under their names."""
    world, rev = world_of(role("prefill", 1), role("decode", 1))
    for role_name in PD:
        world.child(legacy_lws_name(DS_NAME, OLD_A, role_name), role_name, OLD_A, 1,
                    slice_index=None)
    world.reconcile()
    lws = world.lws()
    assert lws[name(rev, "prefill")]["metadata"]["labels"][SLICE_LABEL] == "0"
    assert legacy_lws_name(DS_NAME, OLD_A, "prefill") in lws


def test_slices_increase_recreates_legacy_slice0() -> None:
    """TestSlicesIncreaseRecreatesLegacySlice0: slices 2 over a legacy slice 0 at the target
    revision: its Service and then itself are deleted, and slice 0 and slice 1 are created in
    slice-aware form in the same pass."""
    world, rev = world_of(role("prefill", 1), role("decode", 1), slices=2)
    legacy = {r: legacy_lws_name(DS_NAME, rev, r) for r in PD}
    for role_name, lws_name_ in legacy.items():
        world.child(lws_name_, role_name, rev, 1, slice_index=None)
        world.put("Service", {"apiVersion": "v1", "kind": "Service", "metadata": {
            "name": service_name(lws_name_), "labels": {
                NAME_LABEL: DS_NAME, ROLE_LABEL: role_name, REVISION_LABEL: rev},
            "ownerReferences": [{"apiVersion": "disaggregatedset.x-k8s.io/v1",
                                 "kind": "DisaggregatedSet", "name": DS_NAME, "uid": DS_UID,
                                 "controller": True}]},
            "spec": {"clusterIP": "None"}})
    done = world.reconcile()
    migrate = (f"event LWSDeleted: Deleted legacy slice-0 LWS {legacy['prefill']} to "
               "recreate it in slice-aware form")
    assert done.lines[:3] == [f"delete Service {service_name(legacy['prefill'])}",
                              f"delete LeaderWorkerSet {legacy['prefill']}", migrate]
    assert set(world.lws()) == {name(rev, r, k) for r in PD for k in (0, 1)}
    assert world.objects("Service") == {}


def _conditions(world: DsWorld) -> dict[str, str]:
    return {c["type"]: c["status"] for c in world.ds["status"]["conditions"]}


def test_status_populated_on_fresh_deployment() -> None:
    """TestStatusPopulatedOnFreshDeployment: role statuses in spec order with no counts yet,
    the generation observed, Progressing True and no Available."""
    world, _rev = world_of(role("prefill", 2), role("decode", 1))
    world.reconcile()
    status = world.ds["status"]
    assert status["roleStatuses"] == [{"name": "prefill"}, {"name": "decode"}]
    assert status["observedGeneration"] == 1
    assert _conditions(world) == {"Progressing": "True"}


def test_status_counts_and_available() -> None:
    """TestStatusRoleCountsAggregateFromOwnedLWS: 2/2/2 per role: counts 2, Available True,
    Progressing False."""
    world, rev = world_of(role("prefill", 2), role("decode", 2))
    world.reconcile()
    world.ready()
    world.reconcile()
    status = world.ds["status"]
    assert status["roleStatuses"] == [
        {"name": r, "replicas": 2, "readyReplicas": 2, "updatedReplicas": 2} for r in PD]
    assert _conditions(world) == {"Progressing": "False", "Available": "True"}
    del rev


def test_status_progressing_when_under_desired_count() -> None:
    """TestStatusProgressingWhenUnderDesiredCount: prefill at 1 of 3 (ready, updated)."""
    world, rev = world_of(role("prefill", 3), role("decode", 1))
    new_children(world, rev, (1, 1))
    world.put("LeaderWorkerSet", {**world.lws()[name(rev, "prefill")], "spec": {
        **world.lws()[name(rev, "prefill")]["spec"], "replicas": 3}})
    world.reconcile()
    assert _conditions(world) == {"Progressing": "True"}


def test_status_available_when_paused_at_zero() -> None:
    """TestStatusAvailableWhenPausedAtZero: every role at 0 is available."""
    world, _rev = world_of(role("prefill", 0), role("decode", 0))
    world.reconcile()
    world.ready()
    world.reconcile()
    assert _conditions(world) == {"Available": "True"}


def test_status_uses_scaler_target_for_external_roles() -> None:
    """TestStatusUsesScalerTargetForExternalRoles: an External role's inline replicas (5) are
    ignored: its scaler is seeded with 1 and the child created with 1; once ready, Available."""
    world, rev = world_of(role("prefill", 5, external=True), role("decode", 2))
    first = world.reconcile()
    scaler = f"{DS_NAME}-prefill"
    assert first.lines[:2] == [f"create {SCALER_KIND} {scaler}",
                               f"event ScalerCreated: Created scaler {scaler} for role prefill"]
    assert world.get(SCALER_KIND, scaler)["spec"] == {"replicas": 1}  # type: ignore[index]
    assert world.replicas() == {name(rev, "prefill"): 1, name(rev, "decode"): 2}
    world.ready()
    world.reconcile()
    assert _conditions(world)["Available"] == "True"
    at_rest(world)


def test_status_progressing_when_external_role_scaler_missing() -> None:
    """TestStatusProgressingWhenExternalRoleScalerMissing: a scaler the set does not control
    holds the name: a ScalerConflict Warning, the pass succeeds, the set is Progressing."""
    world, _rev = world_of(role("prefill", 1, external=True), role("decode", 1))
    world.put(SCALER_KIND, {"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": SCALER_KIND,
                            "metadata": {"name": f"{DS_NAME}-prefill"},
                            "spec": {"replicas": 3}})
    done = world.reconcile()
    assert done.error is None
    assert done.lines[0] == (
        f"event ScalerConflict: Scaler {DS_NAME}-prefill exists but is not controlled by "
        "this DisaggregatedSet; not adopting")
    world.ready()
    world.reconcile()
    assert _conditions(world) == {"Progressing": "True"}
    assert "ownerReferences" not in world.get(SCALER_KIND, f"{DS_NAME}-prefill")["metadata"]  # type: ignore[index]


def test_status_drops_removed_role_while_it_drains() -> None:
    """TestStatusDropsRemovedRoleEvenWhileItsLWSStillDrains: 3 roles, then `extra` removed: 2
    role statuses at once, while the extra child still exists (it drains with its revision)."""
    world, rev = world_of(role("prefill", 1), role("decode", 1), role("extra", 1))
    world.reconcile()
    world.ready()
    world.reconcile()
    assert [s["name"] for s in world.ds["status"]["roleStatuses"]] == [*PD, "extra"]
    world.edit(lambda ds: ds["spec"]["roles"].pop())
    world.reconcile()
    assert [s["name"] for s in world.ds["status"]["roleStatuses"]] == list(PD)
    assert name(rev, "extra") in world.lws()


def test_slices_increase_with_rollout_not_blocked() -> None:
    """TestSlicesIncreaseWithRolloutNotBlocked: a legacy slice 0 at an old revision and slices
    2: slice 0's new revision and slice 1 are created."""
    world, rev = world_of(role("prefill", 1), role("decode", 1), slices=2)
    for role_name in PD:
        world.child(legacy_lws_name(DS_NAME, OLD_A, role_name), role_name, OLD_A, 1,
                    slice_index=None)
    world.reconcile()
    assert {name(rev, r, k) for r in PD for k in (0, 1)} <= set(world.lws())


def test_slices_increase_ignores_foreign_owned_legacy_slice0() -> None:
    """TestSlicesIncreaseIgnoresForeignOwnedLegacySlice0: a legacy-named child another owner
    controls is left untouched; slice 0 and slice 1 are created."""
    world, rev = world_of(role("prefill", 1), role("decode", 1), slices=2)
    foreign = legacy_lws_name(DS_NAME, rev, "prefill")
    world.child(foreign, "prefill", rev, 1, slice_index=None, owner_uid="someone-else")
    before = world.get("LeaderWorkerSet", foreign)
    done = world.reconcile()
    assert world.get("LeaderWorkerSet", foreign) == before
    assert all(foreign not in line for line in done.lines)
    assert {name(rev, r, k) for r in PD for k in (0, 1)} <= set(world.lws())


# -------------------------------------------------------------------------- ours


def test_foreign_child_at_the_name_is_refused_with_upstreams_error() -> None:
    """A LeaderWorkerSet another owner controls at a child's name is never adopted or
    changed: the pass fails with upstream's error, after the other roles and the status."""
    world, rev = world_of(role("prefill", 1), role("decode", 1))
    world.child(name(rev, "prefill"), "prefill", rev, 3, owner_uid="someone-else")
    done = world.reconcile()
    assert done.error == (
        f"slice 0: failed to reconcile prefill role: LeaderWorkerSet {name(rev, 'prefill')} "
        f"exists but is not controlled by DisaggregatedSet {DS_NAME}; refusing to adopt it")
    assert world.replicas()[name(rev, "prefill")] == 3
    assert done.writes()[-1] == f"status DisaggregatedSet {DS_NAME}"


def test_foreign_child_the_cache_cannot_see_is_refused_on_create() -> None:
    """A foreign LeaderWorkerSet without the set's label (so not in the controller's cache) at a
    child's name: the create's 409 becomes upstream's refusal."""
    world, rev = world_of(role("prefill", 1), role("decode", 1))
    world.put("LeaderWorkerSet", {"apiVersion": "leaderworkerset.x-k8s.io/v1",
                                  "kind": "LeaderWorkerSet",
                                  "metadata": {"name": name(rev, "decode")},
                                  "spec": {"replicas": 7}})
    done = world.reconcile()
    assert done.error is not None
    assert done.error.endswith(
        f"LeaderWorkerSet {name(rev, 'decode')} exists but is not controlled by "
        f"DisaggregatedSet {DS_NAME}; refusing to adopt it")
    assert world.replicas()[name(rev, "decode")] == 7


def test_partly_created_new_revision_is_completed() -> None:
    """Upstream quirk fixed: a crash between the rollout start's creates left the new
    revision with prefill only; the stability gate creates decode instead of waiting
    forever, and the rollout then proceeds."""
    world, rev = world_of(role("prefill", 1), role("decode", 1))
    old_revision(world, OLD_A, (1, 1), T0, annotate=True)
    world.child(name(rev, "prefill"), "prefill", rev, 0)
    done = world.reconcile()
    assert done.writes()[0] == f"create LeaderWorkerSet {name(rev, 'decode')} replicas=0"
    assert done.requeue == 1.0
    trace = _trace(world, rev, 4)
    assert trace[-1] == {"C": (1, 1)}


def test_foreign_service_with_the_label_is_never_deleted() -> None:
    """Upstream quirk fixed: Services carrying the set's name label that the set does not
    control (one hand-made, one left by a deleted namesake of the set) survive the
    drained-service cleanup."""
    world, rev = world_of(role("prefill", 1), role("decode", 1))
    labels = {NAME_LABEL: DS_NAME, REVISION_LABEL: OLD_A, SLICE_LABEL: "0"}
    world.put("Service", {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "hand-made", "labels": labels}, "spec": {"clusterIP": "None"}})
    world.put("Service", {"apiVersion": "v1", "kind": "Service", "metadata": {
        "name": "predecessor", "labels": labels, "ownerReferences": [{
            "apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
            "name": DS_NAME, "uid": "predecessor-uid", "controller": True}]},
        "spec": {"clusterIP": "None"}})
    world.reconcile()
    world.ready()
    world.reconcile()
    assert set(world.objects("Service")) == {
        "hand-made", "predecessor", service_name(name(rev, "prefill")),
        service_name(name(rev, "decode"))}


def test_services_follow_the_ready_target_and_rest() -> None:
    """Services appear once the target is ready on every role, headless and portless, labelled
    with their selector; the old revision's go once it is drained."""
    world, rev = world_of(role("prefill", 1), role("decode", 1))
    world.reconcile()
    assert world.objects("Service") == {}
    world.ready()
    world.reconcile()
    service = world.objects("Service")[service_name(name(rev, "prefill"))]
    assert service["spec"] == {"clusterIP": "None", "selector": service["metadata"]["labels"]}
    at_rest(world)


def test_rollout_to_a_new_template_end_to_end() -> None:
    """An image change rolls both roles (default budgets), ending with the old revision and its
    Services gone, the new revision's Services there, and a pass at rest writing nothing."""
    world, rev = world_of(role("prefill", 2), role("decode", 2))
    world.reconcile()
    world.ready()
    world.reconcile()

    def new_image(ds: dict[str, Any]) -> None:
        for r in ds["spec"]["roles"]:
            r["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
                "image"] = "app:2"

    world.edit(new_image)
    rev2 = compute_revision(world.ds)
    for _ in range(20):
        world.reconcile()
        world.ready()
        for counts in world.by_revision(PD).values():
            assert not (0 in counts and any(counts))
    assert world.by_revision(PD) == {rev2: (2, 2)}
    assert set(world.objects("Service")) == {service_name(name(rev2, r)) for r in PD}
    at_rest(world)
    del rev


def test_scaler_deleted_when_role_turns_static() -> None:
    """Static again: the owned scaler is deleted with upstream's Event; the role's replicas
    come from the spec."""
    world, rev = world_of(role("prefill", 1, external=True), role("decode", 1))
    world.reconcile()
    world.edit(lambda ds: ds["spec"]["roles"][0].pop("scaling"))
    done = world.reconcile()
    scaler = f"{DS_NAME}-prefill"
    assert done.lines[:2] == [
        f"delete {SCALER_KIND} {scaler}",
        f"event ScalerDeleted: Deleted scaler {scaler} (role prefill is no longer External)"]
    del rev


def test_scaler_drives_the_role_and_reports_status() -> None:
    """kubectl scale on the scaler: the role's child follows; the scaler's status counts the
    role's groups and names the leaders selector."""
    world, rev = world_of(role("prefill", 1, external=True), role("decode", 1))
    world.reconcile()
    scaler_name = f"{DS_NAME}-prefill"
    scaler = world.get(SCALER_KIND, scaler_name)
    assert scaler is not None
    world.put(SCALER_KIND, {**scaler, "spec": {"replicas": 3},
                            "metadata": {**scaler["metadata"], "generation": 2}})
    world.reconcile()
    assert world.replicas()[name(rev, "prefill")] == 3
    world.ready()
    world.reconcile()
    status = world.get(SCALER_KIND, scaler_name)["status"]  # type: ignore[index]
    assert status["replicas"] == 3
    assert status["selector"] == (f"{NAME_LABEL}={DS_NAME},{ROLE_LABEL}=prefill,"
                                  "leaderworkerset.sigs.k8s.io/worker-index=0")
    assert status["observedGeneration"] == 2
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("Ready", "True", "Bound")]
    at_rest(world)


@pytest.mark.parametrize("legacy", [False, True], ids=["slice-aware", "legacy"])
def test_set_made_by_the_upstream_controller_is_taken_over_without_a_rollout(
        legacy: bool) -> None:
    """A set the Go controller made: its children carry upstream's revision hash, which ours
    does not reproduce, but hold the spec's templates role for role. That revision is adopted
    as the target (names kept, nothing created or scaled, no rollout started); only the
    status and, once ready, the Services are written, and then the set rests."""
    ds = disaggregated_set(role("prefill", 2), role("decode", 1))
    world = new_world(ds)
    upstream = "58f79fdb"
    for spec_role in ds["spec"]["roles"]:
        child = children.build_lws(ds, spec_role, 0, upstream, spec_role["spec"]["replicas"])
        if legacy:
            child["metadata"]["name"] = legacy_lws_name(DS_NAME, upstream, spec_role["name"])
            del child["metadata"]["labels"][SLICE_LABEL]
        world.put("LeaderWorkerSet", child)
    world.ready()
    names_before = set(world.lws())
    first = world.reconcile()
    assert first.error is None
    assert [line for line in first.lines if not line.startswith(("status ", "create Service"))] \
        == [], first.lines
    assert set(world.lws()) == names_before
    assert world.by_revision(PD) == {upstream: (2, 1)}
    assert _conditions(world) == {"Available": "True"}
    at_rest(world)


def _roll(world: DsWorld, roles: tuple[str, ...],
          passes: int = 40) -> list[dict[str, tuple[int, ...]]]:
    """Passes until nothing changes, every child ready in between; after each, no revision
    has a role at 0 while another of its roles serves (the guarantee a coordinated rollout
    keeps). The states seen, in order."""
    states: list[dict[str, tuple[int, ...]]] = []
    for _ in range(passes):
        done = world.reconcile()
        assert done.error is None, done.error
        world.ready()
        state = world.by_revision(roles)
        for rev, counts in state.items():
            present = [c for r, c in zip(roles, counts, strict=True)
                       if name(rev, r) in world.lws()]
            assert not (0 in present and any(present)), (rev, state)
        if states and states[-1] == state and not done.lines:
            return states
        states.append(state)
    raise AssertionError(f"no rest after {passes} passes: {states[-3:]}")


def test_removing_a_role_drains_it_with_its_revision() -> None:
    """Remove encode from 4/6/2 (upstream's e2e "Remove role with progressive rolling
    update"): the removed role drains with the other roles of its revision, intermediate
    states are seen, and only the remaining roles run at the end."""
    roles = ("prefill", "decode", "encode")
    world, rev = world_of(role("prefill", 4), role("decode", 6), role("encode", 2))
    world.reconcile()
    world.ready()
    world.edit(lambda ds: ds["spec"]["roles"].pop())
    rev2 = compute_revision(world.ds)
    states = _roll(world, roles)
    assert states[-1] == {rev2: (4, 6, 0)}
    assert any(s.get(rev, (0, 0, 0))[2] > 0 and rev2 in s for s in states)
    assert len(states) > 3  # progressive, not one brutal step
    assert [s["name"] for s in world.ds["status"]["roleStatuses"]] == ["prefill", "decode"]


def test_adding_a_role_rolls_every_role_progressively() -> None:
    """Add encode 2 to prefill 4 / decode 6 (upstream's e2e "Add role with progressive rolling
    update"): the new revision grows all three roles while the old one drains."""
    roles = ("prefill", "decode", "encode")
    world, rev = world_of(role("prefill", 4), role("decode", 6))
    world.reconcile()
    world.ready()
    world.edit(lambda ds: ds["spec"]["roles"].append(role("encode", 2)))
    rev2 = compute_revision(world.ds)
    states = _roll(world, roles)
    assert states[-1] == {rev2: (4, 6, 2)}
    assert any(rev in s and sum(s[rev]) not in (0, 10) for s in states)  # old drained gradually
    del rev


def test_renaming_every_role_rolls_and_drains_the_old_revision() -> None:
    """Rename both roles (prefill/decode -> p/d): no old replica belongs to a spec role, yet the
    old revision is drained through the coordinated rollout (upstream's simple path would leave
    it serving forever), never with one of its roles at 0 beside a serving sibling, and only
    the renamed roles run at the end."""
    roles = ("prefill", "decode", "p", "d")
    world, rev = world_of(role("prefill", 2), role("decode", 2))
    world.reconcile()
    world.ready()

    def rename(ds: dict[str, Any]) -> None:
        ds["spec"]["roles"][0]["name"] = "p"
        ds["spec"]["roles"][1]["name"] = "d"

    world.edit(rename)
    rev2 = compute_revision(world.ds)
    states = _roll(world, roles)
    assert states[0] == {rev: (2, 2, 0, 0), rev2: (0, 0, 0, 0)}  # the rollout starts
    assert states[-1] == {rev2: (0, 0, 2, 2)}
    assert set(world.lws()) == {name(rev2, "p"), name(rev2, "d")}
    assert set(world.objects("Service")) == {service_name(name(rev2, r)) for r in ("p", "d")}
    assert any(rev in s and rev2 in s and sum(s[rev2]) > 0 for s in states)  # both serve


def test_an_old_revision_left_serving_beside_renamed_roles_is_drained() -> None:
    """A set upstream's simple path left with its renamed roles at target beside the old
    revision still serving (no baseline annotation, nothing at 0): the rollout path drains the
    old revision's roles together and deletes them, the new roles untouched."""
    world, rev = world_of(role("p", 2), role("d", 2))
    old_revision(world, OLD_A, (2, 2), T0)
    new_children(world, rev, (2, 2), roles=("p", "d"))
    first = world.reconcile()
    assert set(first.writes()[:2]) == {f"scale {name(OLD_A, 'prefill')} to 0",
                                       f"scale {name(OLD_A, 'decode')} to 0"}, first.lines
    world.ready()
    world.reconcile()
    assert set(world.lws()) == {name(rev, "p"), name(rev, "d")}
    assert world.by_revision(("p", "d")) == {rev: (2, 2)}
    at_rest(world)


def test_slices_roll_independently_to_the_same_target() -> None:
    """Two slices each run their own rollout; both end at the new revision with their own
    Services."""
    world, rev = world_of(role("prefill", 2), role("decode", 1), slices=2)
    world.reconcile()
    world.ready()

    def new_image(ds: dict[str, Any]) -> None:
        ds["spec"]["roles"][0]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
            "containers"][0]["image"] = "app:2"

    world.edit(new_image)
    rev2 = compute_revision(world.ds)
    _roll(world, PD)
    assert set(world.lws()) == {name(rev2, r, k) for r in PD for k in (0, 1)}
    assert set(world.objects("Service")) == {service_name(name(rev2, r, k))
                                             for r in PD for k in (0, 1)}
    del rev


def test_group_replacement_policy_reaches_running_children_without_a_rollout() -> None:
    """LWS docs "Group Replacement": groupReplacementPolicy is a live setting that "takes effect
    on the next reconcile without rolling any group"; a role's switch is patched onto its running
    child (upstream never updates a child but its replicas), the revision stays."""
    world, rev = world_of(role("prefill", 1), role("decode", 1))
    world.reconcile()
    world.ready()
    world.reconcile()

    world.edit(lambda ds: ds["spec"]["roles"][1]["spec"].update(
        groupReplacementPolicy="Immediate"))
    assert compute_revision(world.ds) == rev
    done = world.reconcile()
    assert done.writes()[0] == f"patch LeaderWorkerSet {name(rev, 'decode')}"
    assert world.lws()[name(rev, "decode")]["spec"]["groupReplacementPolicy"] == "Immediate"
    assert set(world.lws()) == {name(rev, r) for r in PD}
    at_rest(world)


def test_a_namesake_created_since_the_cache_saw_a_child_is_not_scaled() -> None:
    """The scale of a child names its UID: when another object took its name after the cache
    saw it (another owner's, not yet in the cache), the API server refuses the patch and the
    pass fails with upstream's "refusing to scale it" error; the namesake keeps its replicas."""
    world, rev = world_of(role("prefill", 3), role("decode", 1))
    new_children(world, rev, (1, 1))
    replaced = world.lws()[name(rev, "prefill")]
    foreign = {**replaced, "metadata": {**replaced["metadata"], "uid": "someone-elses",
                                        "ownerReferences": []}}
    world.server[("LeaderWorkerSet", name(rev, "prefill"))] = foreign  # the cache lags
    done = world.reconcile()
    assert done.error == (
        f"slice 0: LeaderWorkerSet {name(rev, 'prefill')} exists but is not controlled by "
        f"DisaggregatedSet {DS_NAME}; refusing to scale it")
    assert world.replicas()[name(rev, "prefill")] == 1
    # The slice's write failed, so its Services wait (upstream's slice returns before them),
    # though the cache still shows its revision ready on every role.
    assert done.writes() == [f"status DisaggregatedSet {DS_NAME}"]


def test_a_step_that_drains_and_scales_up_drains_first() -> None:
    """The planner's force drain changes both sides in one step (TestMidRolloutABC's pass 6:
    A 1,2 -> 1,1 while C 2,3 -> 2,4). Upstream scales up first, so for an instant decode
    stands at 2 + 4 = 6 > target 4 + surge 1; here the drain is written first and no instant
    exceeds the bound."""
    world, rev = world_of(role("prefill", 2), role("decode", 4))
    old_revision(world, OLD_A, (1, 2), T0)
    old_revision(world, OLD_B, (1, 2), T1)
    _trace(world, rev, 6)
    assert world.by_revision(PD) == {OLD_A: (1, 2), rev: (2, 3)}
    step = world.reconcile()
    assert step.error is None, step.error
    scales = [line for line in step.writes() if line.startswith("scale ")]
    assert scales == [f"scale {name(OLD_A, 'decode')} to 1", f"scale {name(rev, 'decode')} to 4"]
