"""A paused DisaggregatedSet (``lws-operator.dev/paused: "true"``, ``logic.disaggregated.steps``):
the coordinated rollout holds every role at its current step, a set paused before its templates
change creates no child of the new revision, the status says ``RolloutPaused``, and the resume
continues the rollout to its end. Whole passes of the real reconciler over the simulated world."""

from __future__ import annotations

from typing import Any

from lws_operator.api.constants import PAUSED_ANNOTATION
from lws_operator.logic.disaggregated.revision import compute_revision
from tests.harness.ds_world import DsWorld, disaggregated_set, new_world, role
from tests.unit.logic.disaggregated.test_ds_reconciler_table import (
    PD,
    T0,
    name,
    new_children,
    old_revision,
)

OLD_A = "aaaaaaaa"


def _pause(world: DsWorld, paused: bool) -> None:
    def how(ds: dict[str, Any]) -> None:
        annotations = ds["metadata"].setdefault("annotations", {})
        if paused:
            annotations[PAUSED_ANNOTATION] = "true"
        else:
            annotations.pop(PAUSED_ANNOTATION, None)
    world.edit(how)


def _progressing(world: DsWorld) -> dict[str, Any]:
    return next(c for c in world.ds["status"]["conditions"] if c["type"] == "Progressing")


def _world(paused: bool) -> tuple[DsWorld, str]:
    ds = disaggregated_set(role("prefill", 2), role("decode", 2))
    world = new_world(ds)
    if paused:
        _pause(world, True)
    return world, compute_revision(ds)


def test_paused_before_the_templates_change_starts_nothing() -> None:
    world, rev = _world(paused=True)
    old_revision(world, OLD_A, (2, 2), T0)
    held = world.reconcile()
    assert [line for line in held.writes() if not line.startswith("status")] == []
    assert held.events() == []
    assert set(world.lws()) == {name(OLD_A, "prefill"), name(OLD_A, "decode")}
    assert _progressing(world)["reason"] == "RolloutPaused"
    assert "kubectl lws rollout resume" in _progressing(world)["message"]
    _pause(world, False)
    started = world.reconcile()
    assert f"create LeaderWorkerSet {name(rev, 'prefill')} replicas=0" in started.writes()


def _mid_rollout() -> tuple[DsWorld, str]:
    world, rev = _world(paused=False)
    old_revision(world, OLD_A, (2, 2), T0, annotate=True)
    new_children(world, rev, (1, 1))
    return world, rev


def test_paused_mid_rollout_holds_every_role_then_resume_completes() -> None:
    unpaused, _ = _mid_rollout()
    assert any(line.startswith("scale") for line in unpaused.reconcile().writes())
    world, rev = _mid_rollout()
    _pause(world, True)
    before = world.by_revision(PD)
    for _ in range(3):
        held = world.reconcile()
        world.ready()
        assert [line for line in held.writes()
                if not line.startswith(("status", "create Service"))] == []
    assert world.by_revision(PD) == before
    assert _progressing(world)["reason"] == "RolloutPaused"
    _pause(world, False)
    for _ in range(20):
        world.reconcile()
        world.ready()
    assert world.by_revision(PD) == {rev: (2, 2)}
    assert next(c for c in world.ds["status"]["conditions"]
                if c["type"] == "Available")["status"] == "True"


def test_a_paused_set_at_rest_still_scales() -> None:
    """Pause holds a rollout; a set with none (the simple path) follows its replicas."""
    world, rev = _world(paused=True)
    new_children(world, rev, (2, 2))

    def more(ds: dict[str, Any]) -> None:
        ds["spec"]["roles"][0]["spec"]["replicas"] = 3
    world.edit(more)
    world.reconcile()
    assert world.by_revision(PD) == {rev: (3, 2)}
