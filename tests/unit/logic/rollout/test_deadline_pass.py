"""The progress deadline in whole passes (``logic.rollout.deadline_step``), over the reconciler's
simulated world: the requeue at the deadline, the held partition, the condition and its one
Warning, the rollback write and the pass it asks for, each against the same pass without the
opt-in."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.api.constants import (
    FULLY_READY_ANNOTATION,
    GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION,
    PROGRESS_DEADLINE_ANNOTATION,
    ROLLBACK_ON_DEADLINE_ANNOTATION,
    ROLLED_BACK_FROM_ANNOTATION,
    TEMPLATE_REVISION_HASH_LABEL,
)
from lws_operator.logic.failures.restart_budget import CLEANUP_FINALIZER
from lws_operator.logic.reconcile.plan import Apply, Delete, Patch
from lws_operator.logic.rollout.deadline_step import RESUME_NOW
from tests.harness import lws_world as rw
from tests.harness.lws_world import World, at_rest, built_world, manifest, plan_pass

DEADLINE = {PROGRESS_DEADLINE_ANNOTATION: "60"}
ROLLBACK = {**DEADLINE, ROLLBACK_ON_DEADLINE_ANNOTATION: "true"}


def updating(annotations: dict[str, str]) -> World:
    """Two Ready groups on ``app:1``, then the template changed to ``app:2`` and one pass at
    ``rw.NOW``: the new revision exists and the leader StatefulSet carries it at partition 2."""
    world = at_rest(built_world(manifest(replicas=2, annotations=annotations)))
    lws = copy.deepcopy(world.lws)
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "image"] = "app:2"
    lws["metadata"].update(resourceVersion="500", generation=2)
    world.cache["LeaderWorkerSet"].upsert(lws)
    return world


def later(monkeypatch: pytest.MonkeyPatch, seconds: int, world: World) -> None:
    """Move the clock and the time the conditions stamp by ``seconds``."""
    monkeypatch.setattr(rw, "CLOCK", rw.CLOCK + seconds)
    world.clock += seconds
    monkeypatch.setattr(rw, "NOW", f"2026-01-01T00:{10 + seconds // 60:02d}:{seconds % 60:02d}Z")


def partitions(planned: rw.Pass) -> list[int]:
    return [a.body["spec"]["updateStrategy"]["rollingUpdate"]["partition"]
            for a in planned.actions if isinstance(a, Apply) and a.target.kind == "StatefulSet"
            and a.body["metadata"]["name"] == "sample"]


def progressing(world: World) -> dict[str, Any]:
    return next(c for c in world.lws["status"]["conditions"] if c["type"] == "Progressing")


def test_the_pass_is_requeued_at_the_deadline() -> None:
    first = plan_pass(updating(DEADLINE))
    assert partitions(first) == [2]
    assert first.requeue == 60.0
    assert plan_pass(updating({})).requeue is None


@pytest.mark.parametrize(("annotations", "seconds", "moved", "exceeded"), [
    ({}, 60, [1], False),  # no opt-in: upstream's arithmetic takes group 1 down
    (DEADLINE, 59, [1], False),  # within the deadline: the same
    (DEADLINE, 60, [], True),  # at the deadline: partition held at 2, no group taken down
])
def test_at_the_deadline_the_partition_is_held(
        monkeypatch: pytest.MonkeyPatch, annotations: dict[str, str], seconds: int,
        moved: list[int], exceeded: bool) -> None:
    world = updating(annotations)
    plan_pass(world)
    later(monkeypatch, seconds, world)
    planned = plan_pass(world)
    assert partitions(planned) == moved
    warnings = [e for e in planned.events() if "ProgressDeadlineExceeded" in e]
    assert len(warnings) == int(exceeded)
    assert (progressing(world)["reason"] == "ProgressDeadlineExceeded") == exceeded
    if exceeded:
        # The next pass, even much later, holds again and warns no more.
        later(monkeypatch, 600, world)
        again = plan_pass(world)
        assert partitions(again) == []
        assert not [e for e in again.events() if "ProgressDeadlineExceeded" in e]
        assert progressing(world)["lastTransitionTime"] == "2026-01-01T00:11:00Z"


def test_a_new_template_resumes(monkeypatch: pytest.MonkeyPatch) -> None:
    world = updating(DEADLINE)
    plan_pass(world)
    later(monkeypatch, 60, world)
    plan_pass(world)
    lws = copy.deepcopy(world.lws)
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "image"] = "app:3"
    lws["metadata"].update(generation=3)
    world.cache["LeaderWorkerSet"].upsert(lws)
    resumed = plan_pass(world)
    assert progressing(world)["reason"] != "ProgressDeadlineExceeded"
    assert resumed.requeue == 60.0


def test_the_rollback_restores_the_last_ready_revision_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    world = updating(ROLLBACK)
    good = bad_key(world)  # the leader StatefulSet's revision before the update's first pass
    plan_pass(world)
    later(monkeypatch, 60, world)
    planned = plan_pass(world)
    (patch,) = [a for a in planned.actions if isinstance(a, Patch) and a.subresource is None
                and a.target.kind == "LeaderWorkerSet"]
    assert partitions(planned) == []
    assert [line.split(":")[0] for line in planned.lines] == [
        "patch LeaderWorkerSet sample", "event ProgressDeadlineExceeded", "event RolledBack"]
    assert patch.body["metadata"]["resourceVersion"] == "501"  # as read: the guard
    restored = world.lws
    assert restored["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "image"] == "app:1"
    bad = restored["metadata"]["annotations"][ROLLED_BACK_FROM_ANNOTATION]
    assert bad
    assert bad in planned.lines[-1]
    assert planned.requeue == RESUME_NOW
    # The pass it asks for is on the old revision again: the leader StatefulSet carries it, at
    # upstream's reset partition, and there is no second rollback.
    after = plan_pass(world)
    assert "patch LeaderWorkerSet sample" not in after.writes()
    (leader,) = [a for a in after.actions if isinstance(a, Apply)
                 and a.target.kind == "StatefulSet" and a.body["metadata"]["name"] == "sample"]
    assert leader.body["metadata"]["labels"][TEMPLATE_REVISION_HASH_LABEL] == good
    assert partitions(after) == [2]


@pytest.mark.parametrize(("annotations", "rolled_back_from_bad", "seconds", "rolled_back",
                          "requeue"), [
    (ROLLBACK, False, 60, True, RESUME_NOW),  # the pass after the rollback is asked for
    (ROLLBACK, False, 59, False, 1.0),  # before the deadline: requeued at it
    (DEADLINE, False, 60, False, None),  # no rollback opt-in: held, nothing to wait for
    (ROLLBACK, True, 60, False, None),  # already rolled back from this revision: held
])
def test_a_rollback_ends_the_pass_and_asks_for_the_next(
        monkeypatch: pytest.MonkeyPatch, annotations: dict[str, str],
        rolled_back_from_bad: bool, seconds: int, rolled_back: bool,
        requeue: float | None) -> None:
    """The rollback's own watch event wakes no pass (its answer is cached first), and the pods
    of a revision that never becomes Ready send none: the pass that wrote it must ask for the
    next one, or the set stays on the bad revision for good."""
    world = updating(annotations)
    plan_pass(world)
    if rolled_back_from_bad:
        lws = copy.deepcopy(world.lws)
        lws["metadata"]["annotations"][ROLLED_BACK_FROM_ANNOTATION] = bad_key(world)
        world.cache["LeaderWorkerSet"].upsert(lws)
    later(monkeypatch, seconds, world)
    planned = plan_pass(world)
    assert ("patch LeaderWorkerSet sample" in planned.writes()) == rolled_back
    assert planned.requeue == requeue


def test_no_rollback_to_a_revision_that_never_was_fully_ready(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A set whose first revision never became fully Ready (it was never Available, and the
    revision, from before the history, records nothing), updated to a template that stalls
    too: with the rollback opt-in the rollout is held as without it, and the condition and the
    Warning say why there is no rollback."""
    world = updating(ROLLBACK)
    for revision in world.cache["ControllerRevision"].objects():
        unmarked = copy.deepcopy(revision)
        unmarked["metadata"].get("annotations", {}).pop(FULLY_READY_ANNOTATION, None)
        world.cache["ControllerRevision"].upsert(unmarked)
    plan_pass(world)
    lws = copy.deepcopy(world.lws)
    lws["status"]["conditions"] = [c for c in lws["status"]["conditions"]
                                   if c["type"] != "Available"]
    world.cache["LeaderWorkerSet"].upsert(lws)
    later(monkeypatch, 60, world)
    planned = plan_pass(world)
    assert "patch LeaderWorkerSet sample" not in planned.writes()
    assert partitions(planned) == []
    (warning,) = [e for e in planned.events() if "ProgressDeadlineExceeded" in e]
    assert "Not rolled back: no earlier revision was ever fully Ready" in warning
    assert progressing(world)["message"].endswith(
        "Not rolled back: no earlier revision was ever fully Ready. Fix or revert the template "
        "(a new revision resumes the rollout)")
    assert planned.requeue is None


def bad_key(world: World) -> str:
    sts = world.cache["StatefulSet"].get(rw.NAMESPACE, "sample")
    assert sts is not None
    return str(sts["metadata"]["labels"][TEMPLATE_REVISION_HASH_LABEL])


@pytest.mark.parametrize("ready", [False, True])
def test_released_leaders_are_left_to_the_statefulset(ready: bool) -> None:
    """A released leader on the old revision, Ready or not, is the StatefulSet controller's to
    replace (with Parallel pod management it deletes old unavailable pods before counting its
    maxUnavailable): within the deadline a pass plans the same as without the opt-in, and
    deletes no pod."""
    planned = {}
    for name, opted in (("upstream", {}), ("deadline", DEADLINE)):
        world = updating(opted)
        plan_pass(world)
        sts = copy.deepcopy(world.cache["StatefulSet"].get(rw.NAMESPACE, "sample"))
        assert sts is not None
        sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] = 1
        world.cache["StatefulSet"].upsert(sts)
        if not ready:
            pod = copy.deepcopy(world.cache["Pod"].get(rw.NAMESPACE, "sample-1"))
            assert pod is not None
            pod["status"]["conditions"] = [{"type": "Ready", "status": "False"}]
            pod["metadata"]["resourceVersion"] = "400"
            world.cache["Pod"].upsert(pod)
        planned[name] = plan_pass(world)
    assert planned["deadline"].writes() == planned["upstream"].writes()
    assert not [a for a in planned["deadline"].actions if isinstance(a, Delete)]


def _retained_and_exhausted(world: World, pod_name: str) -> None:
    """``pod_name``'s group stopped by its restart budget and kept (our cleanup finalizer), its
    leader terminating: a group the rollout releases (``logic.failures.release_step``)."""
    pod = copy.deepcopy(world.cache["Pod"].get(rw.NAMESPACE, pod_name))
    assert pod is not None
    pod["metadata"]["finalizers"] = [CLEANUP_FINALIZER]
    pod["metadata"].setdefault("annotations", {})[
        GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION] = "true"
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:09:00Z"
    world.cache["Pod"].upsert(pod)


@pytest.mark.parametrize(("annotations", "requeue"), [
    (DEADLINE, 60.0),  # the deadline's recheck survives the pass's early end
    ({}, None),  # no deadline: nothing to look at again, as before
])
def test_a_pass_that_ends_early_keeps_the_deadline_recheck(
        annotations: dict[str, str], requeue: float | None) -> None:
    """A pass that ends before its status step (here: the release of a retained group of the
    old revision, which the rollout reached) asks for the deadline's recheck all the same: it
    decided the deadline in ``prepare``, and a pass ending on the release returned no requeue
    (the controller returned the last plan's), so nothing but a later event would have looked
    at the deadline again."""
    world = updating(annotations)
    plan_pass(world)
    _retained_and_exhausted(world, "sample-1")
    ended = plan_pass(world)
    assert ended.writes()[-1] == "patch Pod sample-1"  # the release, which ends the pass
    assert "status LeaderWorkerSet sample" not in ended.writes()
    assert ended.requeue == requeue
