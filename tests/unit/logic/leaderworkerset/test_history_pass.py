"""The revision history in whole passes (``logic.identity.history`` through the revision and
status steps), over the reconciler's simulated world: a set at rest with older revisions keeps
them up to its limit, records its revision fully Ready once, renumbers a revision made current
again and copies the change cause onto it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.api.constants import (
    CHANGE_CAUSE_ANNOTATION,
    FULLY_READY_ANNOTATION,
    REVISION_HISTORY_LIMIT_ANNOTATION,
)
from lws_operator.logic.identity.revision import revision_key
from lws_operator.logic.identity.revision_decision import controller_revision
from lws_operator.logic.reconcile.plan import Delete, Update
from tests.harness import lws_world as rw
from tests.harness.lws_world import World, at_rest, built_world, manifest, plan_pass


def with_image(lws: dict[str, Any], image: str) -> dict[str, Any]:
    out = copy.deepcopy(lws)
    out["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "image"] = image
    return out


def with_history(world: World, older: int, current: int | None = None) -> World:
    """``older`` revisions of other images (numbered 1..older) beside the set's own, which is
    numbered ``current`` (default: older + 1)."""
    lws = world.lws
    for number in range(1, older + 1):
        other = with_image(lws, f"app:old{number}")
        revision = controller_revision(other, revision_key(other), [])
        revision["revision"] = number
        revision["metadata"].update(name=f"sample-old-{number}", uid=f"old-{number}",
                                    namespace=rw.NAMESPACE)
        world.cache["ControllerRevision"].upsert(revision)
    own = next(r for r in world.cache["ControllerRevision"].objects()
               if r["metadata"]["uid"] == "revision-uid")
    own = {**copy.deepcopy(own), "revision": older + 1 if current is None else current}
    world.cache["ControllerRevision"].upsert(own)
    return world


def revision_writes(planned: rw.Pass) -> list[tuple[str, str, Any]]:
    """Each write of a ControllerRevision: deleted, or updated (the merge patch the update
    falls back to: what it changes)."""
    return [("delete", a.name, None) if isinstance(a, Delete) else
            ("patch", a.name, _change(a.fallback.body if a.fallback else {}))
            for a in planned.actions if isinstance(a, (Delete, Update))
            and a.target.kind == "ControllerRevision" and (isinstance(a, Delete) or a.fallback)]


def _change(body: Any) -> Any:
    """The patch without its resourceVersion guard."""
    out = copy.deepcopy(dict(body))
    out["metadata"].pop("resourceVersion", None)
    if not out["metadata"]:
        out.pop("metadata")
    return out


def own_name(world: World) -> str:
    return next(r["metadata"]["name"] for r in world.cache["ControllerRevision"].objects()
                if r["metadata"]["uid"] == "revision-uid")


@pytest.mark.parametrize(("limit", "older", "deleted"), [
    (None, 3, []),  # the default keeps 10
    (None, 11, ["sample-old-1"]),
    ("0", 3, ["sample-old-1", "sample-old-2", "sample-old-3"]),  # upstream's behaviour
    ("2", 4, ["sample-old-1", "sample-old-2"]),  # oldest first
])
def test_a_done_update_keeps_the_history_to_its_limit(limit: str | None, older: int,
                                                      deleted: list[str]) -> None:
    annotations = {} if limit is None else {REVISION_HISTORY_LIMIT_ANNOTATION: limit}
    world = with_history(built_world(manifest(annotations=annotations)), older)
    writes = revision_writes(plan_pass(world))
    assert [name for what, name, _ in writes if what == "delete"] == deleted
    assert ("patch", own_name(world), {"metadata": {"annotations": {
        FULLY_READY_ANNOTATION: rw.NOW}}}) in writes
    assert revision_writes(plan_pass(world)) == [w for w in writes if w[0] == "delete"], \
        "recorded fully Ready once (the deletes are not stored by the harness)"


def test_no_revision_is_pruned_or_recorded_while_an_update_is_in_progress() -> None:
    world = with_history(at_rest(built_world(manifest(
        annotations={REVISION_HISTORY_LIMIT_ANNOTATION: "0"}))), 2)
    lws = with_image(world.lws, "app:2")
    lws["metadata"].update(resourceVersion="500", generation=2)
    world.cache["LeaderWorkerSet"].upsert(lws)
    writes = revision_writes(plan_pass(world))
    assert writes == []


def test_a_revision_made_current_again_is_renumbered_above_the_others() -> None:
    """The templates put back to the set's revision while others are numbered higher (an undo):
    the revision is numbered one above the highest, once."""
    world = with_history(built_world(manifest()), 3, current=1)
    writes = revision_writes(plan_pass(world))
    assert ("patch", own_name(world), {"revision": 4}) in writes
    assert ("patch", own_name(world), {"revision": 4}) not in revision_writes(plan_pass(world))


def test_the_change_cause_follows_onto_the_current_revision() -> None:
    world = at_rest(built_world(manifest()))
    lws = world.lws
    lws["metadata"]["annotations"][CHANGE_CAUSE_ANNOTATION] = "kubectl set image app=app:1"
    lws["metadata"]["resourceVersion"] = "600"
    world.cache["LeaderWorkerSet"].upsert(lws)
    assert revision_writes(plan_pass(world)) == [("patch", own_name(world), {"metadata": {
        "annotations": {CHANGE_CAUSE_ANNOTATION: "kubectl set image app=app:1"}}})]
    assert revision_writes(plan_pass(world)) == []


def test_a_new_revision_carries_the_change_cause() -> None:
    world = at_rest(built_world(manifest()))
    lws = with_image(world.lws, "app:2")
    lws["metadata"]["annotations"][CHANGE_CAUSE_ANNOTATION] = "image app:2"
    lws["metadata"].update(resourceVersion="500", generation=2)
    world.cache["LeaderWorkerSet"].upsert(lws)
    planned = plan_pass(world)
    created = [r for r in world.cache["ControllerRevision"].objects() if r["revision"] == 2]
    assert [r["metadata"]["annotations"][CHANGE_CAUSE_ANNOTATION] for r in created] == [
        "image app:2"]
    assert revision_writes(planned) == []
