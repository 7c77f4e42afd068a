"""The DisaggregatedSet pass function (``logic.disaggregated.pipeline.reconcile``): which steps it
runs, with what, and that the steps it skips would have planned nothing.

The steps run against the real controller's snapshots of a simulated world
(``tests/harness/ds_world.py``) through a ``run`` that records each step and its arguments and
carries nothing out; ``test_ds_reconciler_table.py`` runs whole passes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lws_operator.controllers.disaggregatedset import DisaggregatedSetReconciler
from lws_operator.controllers.passes import plan_through
from lws_operator.logic.disaggregated import pipeline, steps
from lws_operator.logic.disaggregated.names import legacy_lws_name, lws_name
from lws_operator.logic.disaggregated.revision import compute_revision
from lws_operator.logic.disaggregated.snapshot import DsObserved
from lws_operator.logic.reconcile.plan import EMPTY, Plan, Planned
from tests.harness.ds_world import (
    DS_NAME,
    NAMESPACE,
    NOW,
    DsWorld,
    SimulatedExecutor,
    disaggregated_set,
    new_world,
    role,
)

Step = Callable[..., Plan | Planned[Any]]


def _snapshot(world: DsWorld) -> DsObserved:
    reconciler = DisaggregatedSetReconciler(SimulatedExecutor(world), world.cache,
                                            now=lambda: NOW)
    obs = reconciler.observe((NAMESPACE, DS_NAME))
    assert obs is not None
    return obs


def _steps_run(world: DsWorld) -> tuple[list[tuple[str, tuple[Any, ...]]], tuple[str, ...]]:
    """The steps one pass runs (name, arguments after the snapshot) and what it returns."""
    ran: list[tuple[str, tuple[Any, ...]]] = []

    async def run(step: Step, /, *args: Any, **kwargs: Any) -> Any:
        ran.append((step.__name__, args))
        planned = step(_snapshot(world), *args, **kwargs)
        return planned.value if isinstance(planned, Planned) else None

    obs = _snapshot(world)
    errors = plan_through(pipeline.reconcile(run, obs.ds.slices))
    assert errors is not None
    return ran, errors


def _foreign(world: DsWorld, name: str, role_name: str, rev: str, slice_index: int) -> None:
    world.child(name, role_name, rev, 1, slice_index=slice_index, owner_uid="someone-else")


def test_a_slice_whose_workloads_decided_an_error_runs_no_services_step() -> None:
    """Upstream's per-slice reconcile returns before the Services when the workloads fail: the
    pass hands the error back and runs slice 1's Services, not slice 0's."""
    ds = disaggregated_set(role("prefill"), role("decode"), slices=2)
    world = new_world(ds)
    rev = compute_revision(ds)
    _foreign(world, lws_name(DS_NAME, 0, rev, "decode"), "decode", rev, 0)
    ran, errors = _steps_run(world)
    assert ran == [
        ("revision", ()), ("history_step", (rev,)), ("removed_slices", ()), ("scalers", ()),
        ("legacy", (rev,)), ("workloads", (0, rev)), ("workloads", (1, rev)),
        ("services", (1, rev)), ("scaler_status", ()), ("status", (rev,))]
    assert len(errors) == 1
    assert errors[0].startswith("slice 0: failed to reconcile decode role: ")


def test_the_services_step_skipped_after_a_decided_error_would_plan_nothing() -> None:
    """A workloads error leaves a spec role of the target revision without a child this set
    controls, so that revision is not ready in the slice and its Services step, run anyway,
    keeps every Service: skipping it changes no plan."""
    ds = disaggregated_set(role("prefill"), role("decode"))
    world = new_world(ds)
    rev = compute_revision(ds)
    world.child(lws_name(DS_NAME, 0, rev, "prefill"), "prefill", rev, 1)
    _foreign(world, lws_name(DS_NAME, 0, rev, "decode"), "decode", rev, 0)
    obs = _snapshot(world)
    assert steps.workloads(obs, 0, rev).value is not None
    assert steps.services(obs, 0, rev) == EMPTY


def test_a_single_slice_runs_no_legacy_migration() -> None:
    """A legacy (pre-slices) slice 0 is migrated only beside sibling slices; with one slice it
    is adopted in place, and the migration step, run anyway, plans nothing."""
    ds = disaggregated_set(role("prefill"), role("decode"))
    world = new_world(ds)
    rev = compute_revision(ds)
    for role_name in ("prefill", "decode"):
        world.child(legacy_lws_name(DS_NAME, rev, role_name), role_name, rev, 1,
                    slice_index=None)
    ran, errors = _steps_run(world)
    assert [name for name, _ in ran] == [
        "revision", "history_step", "removed_slices", "scalers", "workloads", "services",
        "scaler_status", "status"]
    assert errors == ()
    assert steps.legacy(_snapshot(world), rev) == EMPTY
