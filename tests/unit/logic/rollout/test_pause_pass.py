"""Pause and resume in whole passes (``logic.rollout.pause``), over the reconciler's simulated
world, each against the same pass unpaused: a set paused before its template changes starts the
new revision nowhere, a paused rollout holds its partition and surge, a scale is followed with
the new groups on the running revision, the progress deadline does not run, and the resume
starts the rollout with a fresh deadline. Hash groups: the leader Deployment is paused."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from lws_operator.api.constants import PAUSED_ANNOTATION, PROGRESS_DEADLINE_ANNOTATION
from lws_operator.logic.reconcile.plan import Apply
from tests.harness import lws_world as rw
from tests.harness.lws_world import World, at_rest, built_world, manifest, plan_pass
from tests.unit.logic.rollout.test_deadline_pass import later, progressing

PAUSED = {PAUSED_ANNOTATION: "true"}
DEADLINE = {PROGRESS_DEADLINE_ANNOTATION: "60"}
SURGE: dict[str, Any] = {"rolloutStrategy": {
    "type": "RollingUpdate",
    "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 1}}}


def _edit(world: World, how: Any) -> None:
    lws = copy.deepcopy(world.lws)
    how(lws)
    world.cache["LeaderWorkerSet"].upsert(lws)


def _new_image(lws: dict[str, Any]) -> None:
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "image"] = "app:2"
    lws["metadata"].update(resourceVersion="500", generation=2)


def annotate(world: World, annotations: Mapping[str, str | None]) -> None:
    def how(lws: dict[str, Any]) -> None:
        mine = lws["metadata"].setdefault("annotations", {})
        for key, value in annotations.items():
            if value is None:
                mine.pop(key, None)
            else:
                mine[key] = value
    _edit(world, how)


def scale(world: World, replicas: int) -> None:
    _edit(world, lambda lws: lws["spec"].update(replicas=replicas))


def updating(annotations: dict[str, str]) -> World:
    """Four Ready groups on ``app:1`` (maxUnavailable 1, maxSurge 1), then the template
    changed to ``app:2``: nothing has run on it yet."""
    world = at_rest(built_world(manifest(replicas=4, annotations=annotations, **SURGE)))
    _edit(world, _new_image)
    return world


def leader_sts(planned: rw.Pass) -> list[tuple[int, int]]:
    """The (partition, replicas) of each apply of the leader StatefulSet."""
    return [(a.body["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
             a.body["spec"]["replicas"])
            for a in planned.actions if isinstance(a, Apply) and a.target.kind == "StatefulSet"
            and a.body["metadata"]["name"] == "sample"]


def live(world: World) -> tuple[int, int]:
    """The leader StatefulSet's (partition, replicas) as the passes left it."""
    sts = world.cache["StatefulSet"].get(rw.NAMESPACE, "sample")
    assert sts is not None
    return (sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"], sts["spec"]["replicas"])


def test_paused_before_the_template_changes_starts_the_new_revision_nowhere() -> None:
    unpaused, paused = updating({}), updating(PAUSED)
    # Unpaused: upstream's reset surges a group of the new revision at once (ordinal 4).
    assert leader_sts(plan_pass(unpaused)) == [(4, 5)]
    # Paused: the leader StatefulSet carries the new revision, but at a partition over every
    # ordinal and without the surge: no pod of the new revision is created.
    first = plan_pass(paused)
    assert leader_sts(first) == [(4, 4)]
    assert "event RolloutPaused" in " ".join(first.events())
    assert progressing(paused)["status"] == "Unknown"
    assert progressing(paused)["reason"] == "RolloutPaused"
    # Later passes hold it there (unpaused, the pacing moves on).
    assert leader_sts(plan_pass(unpaused)) == [(3, 5)]
    again = plan_pass(paused)
    assert leader_sts(again) == []
    assert again.events() == []


def test_resume_starts_the_rollout() -> None:
    world = updating(PAUSED)
    plan_pass(world)
    plan_pass(world)
    annotate(world, {PAUSED_ANNOTATION: None})
    resumed = plan_pass(world)
    assert leader_sts(resumed) == [(3, 5)]  # the pacing of an unpaused set's next pass
    assert progressing(world)["reason"] == "RolloutResumed"
    assert progressing(world)["status"] == "True"
    assert "event RolloutResumed: Rollout resumed" in resumed.events()


def test_pause_mid_rollout_holds_the_partition_and_surge() -> None:
    world = updating({})
    plan_pass(world)  # (4, 5): the surge is up
    annotate(world, PAUSED)
    plan_pass(world)  # applies the annotation the leader StatefulSet copies
    assert live(world) == (4, 5)  # unpaused: (3, 5)
    assert progressing(world)["reason"] == "RolloutPaused"


@pytest.mark.parametrize(("replicas", "expected"), [
    (6, [(6, 6)]),  # up: the new groups on the running revision (partition over them)
    (2, [(4, 3)]),  # down: the highest ordinals go, the surge already up stays
])
def test_a_scale_is_followed_while_paused(replicas: int, expected: list[tuple[int, int]]) -> None:
    world = updating({})
    plan_pass(world)  # (4, 5)
    annotate(world, PAUSED)
    plan_pass(world)
    scale(world, replicas)
    assert leader_sts(plan_pass(world)) == expected


def test_no_deadline_while_paused_and_a_fresh_one_on_resume(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = updating({**PAUSED, **DEADLINE})
    first = plan_pass(world)
    assert first.requeue is None  # unpaused: 60.0, the deadline
    later(monkeypatch, 600, world)
    held = plan_pass(world)
    assert held.requeue is None
    assert progressing(world)["reason"] == "RolloutPaused"
    annotate(world, {PAUSED_ANNOTATION: None})
    resumed = plan_pass(world)
    # Ten minutes after the rollout began, yet the deadline counts from the resume.
    assert resumed.requeue == 60.0
    assert progressing(world)["reason"] == "RolloutResumed"
    later(monkeypatch, 30, world)
    assert plan_pass(world).requeue == 30.0  # read back from RolloutResumed's time


@pytest.mark.parametrize("annotations", [{}, PAUSED])
def test_hash_groups_pause_their_leader_deployment(annotations: dict[str, str]) -> None:
    world = built_world(manifest(size=2, groupIdentity="Hash", annotations=annotations))
    planned = plan_pass(world)
    live = world.cache["Deployment"].get(rw.NAMESPACE, "sample")
    assert live is not None
    assert live["spec"]["paused"] == bool(annotations)
    annotate(world, {PAUSED_ANNOTATION: None} if annotations else PAUSED)
    flipped = plan_pass(world)
    (apply,) = [a for a in flipped.actions if isinstance(a, Apply)
                and a.target.kind == "Deployment"]
    assert apply.body["spec"]["paused"] == (not annotations)
    del planned


def test_a_paused_hash_set_says_so_on_a_template_change() -> None:
    world = at_rest(built_world(manifest(size=2, groupIdentity="Hash", annotations=PAUSED)))
    _edit(world, _new_image)
    planned = plan_pass(world)
    (apply,) = [a for a in planned.actions if isinstance(a, Apply)
                and a.target.kind == "Deployment"]
    assert apply.body["spec"]["paused"] is True  # its controller creates no ReplicaSet
    assert (progressing(world)["status"], progressing(world)["reason"]) == (
        "Unknown", "RolloutPaused")
