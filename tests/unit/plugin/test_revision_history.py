"""``kubectl lws rollout history|undo`` without the API (``plugin.analysis.revision_history``):
the table, the revision an undo goes to, and its patch."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.api.constants import CHANGE_CAUSE_ANNOTATION, FULLY_READY_ANNOTATION
from lws_operator.logic.identity.revision import revision_key
from lws_operator.logic.identity.revision_decision import controller_revision
from lws_operator.plugin.analysis import revision_history as rh

READY_AT = "2026-12-06T20:00:00Z"


def lws(image: str = "app:1", cause: str | None = None) -> dict[str, Any]:
    annotations = {} if cause is None else {CHANGE_CAUSE_ANNOTATION: cause}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "sample", "namespace": "ns", "uid": "u-1",
                     "resourceVersion": "42", "annotations": annotations},
        "spec": {"replicas": 2, "networkConfig": {"subdomainPolicy": "Shared"},
                 "leaderWorkerTemplate": {
                     "size": 2, "maxGroupRestarts": 3,
                     "workerTemplate": {"spec": {"containers": [
                         {"name": "m", "image": image}]}}}},
    }


def rev(image: str, number: int, cause: str | None = None, ready: bool = False,
        owner: str = "u-1") -> dict[str, Any]:
    body = lws(image, cause)
    body["metadata"]["uid"] = owner
    revision = controller_revision(body, revision_key(body), [])
    revision["revision"] = number
    revision["metadata"]["name"] = f"sample-{image}-{number}"
    revision["metadata"]["creationTimestamp"] = f"2026-12-06T1{number}:00:00Z"
    if ready:
        revision["metadata"].setdefault("annotations", {})[FULLY_READY_ANNOTATION] = READY_AT
    return revision


HISTORY = [rev("app:2", 2, "image 2", ready=True), rev("app:1", 1, ready=True),
           rev("app:3", 3, "image 3"), rev("app:9", 9, owner="someone-else")]


def test_the_rows_oldest_first_with_the_current_marked() -> None:
    got = [(r.number, r.cause, r.fully_ready_at, r.current) for r in rh.rows(lws("app:2"),
                                                                              HISTORY)]
    assert got == [(1, None, READY_AT, False), (2, "image 2", READY_AT, True),
                   (3, "image 3", None, False)]


def test_the_table() -> None:
    text = rh.table(rh.rows(lws("app:3"), HISTORY))
    lines = text.splitlines()
    assert lines[0].split() == ["REVISION", "HASH", "CREATED", "EVER-FULLY-READY",
                                "CHANGE-CAUSE"]
    assert lines[1].split()[0] == "1"
    assert lines[1].endswith("<none>")
    assert f"yes, {READY_AT}" in lines[2]
    assert lines[2].endswith("image 2")
    assert lines[3].startswith("3 (current)")
    assert " no " in lines[3]
    assert lines[3].endswith("image 3")
    assert rh.rows(lws("app:3"), HISTORY)[2].as_data()["everFullyReady"] is False


def test_the_current_revision_is_found_by_content_however_written() -> None:
    """Another rendering of the same templates (an upstream revision) is the current one."""
    stored = rev("app:1", 1)
    stored["data"]["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "env"] = []
    assert rh.running(lws("app:1"), [stored]) is stored
    assert rh.running(lws("app:7"), [stored]) is None


@pytest.mark.parametrize(("live", "to", "target", "already"), [
    ("app:3", None, 2, False),  # the previous: the highest-numbered that is not the live one
    ("app:2", None, 3, False),  # after an undo to 2 the controller has not renumbered yet
    ("app:7", None, 3, False),  # a change the controller has not recorded: the highest
    ("app:3", 1, 1, False),
    ("app:3", 3, 3, True),  # the set runs it already: nothing to write
])
def test_the_undo_target(live: str, to: int | None, target: int, already: bool) -> None:
    choice = rh.undo_target(lws(live), HISTORY, to)
    assert (choice.target["revision"], choice.already) == (target, already)


@pytest.mark.parametrize(("history", "to", "message"), [
    (HISTORY, 4, 'revision 4 of LeaderWorkerSet "sample" does not exist (pruned beyond the '
                 "history limit, or never made); revisions kept: 1, 2, 3"),
    (HISTORY, 9, "revisions kept: 1, 2, 3"),  # another set's revision is not this one's
    ([rev("app:3", 3)], None, 'LeaderWorkerSet "sample" has no previous revision to undo to; '
                              "revisions kept: 3"),
    ([], None, "revisions kept: none"),
])
def test_a_revision_that_does_not_exist_is_refused(history: list[dict[str, Any]],
                                                   to: int | None, message: str) -> None:
    with pytest.raises(rh.NoSuchRevision) as refused:
        rh.undo_target(lws("app:3"), history, to)
    assert message in str(refused.value)


def test_the_undo_patch_puts_the_templates_and_the_cause_back() -> None:
    live = lws("app:3", cause="image 3")
    live["spec"]["leaderWorkerTemplate"]["restartBackoff"] = {"baseSeconds": 5}
    target = rev("app:2", 2, "image 2")
    body = rh.undo_patch(live, target)
    assert body["metadata"] == {"resourceVersion": "42",
                                "annotations": {CHANGE_CAUSE_ANNOTATION: "image 2"}}
    after = apply_merge(live, body)
    assert revision_key(after) == revision_key(lws("app:2")), "the revision's templates"
    # The controller-only fields are the live set's, not in any revision.
    assert after["spec"]["leaderWorkerTemplate"]["restartBackoff"] == {"baseSeconds": 5}
    assert after["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] == 3
    assert after["spec"]["replicas"] == 2
    assert after["metadata"]["name"] == "sample"


def test_an_undo_to_a_revision_without_a_cause_removes_the_sets() -> None:
    body = rh.undo_patch(lws("app:3", cause="image 3"), rev("app:1", 1))
    assert body["metadata"]["annotations"] == {CHANGE_CAUSE_ANNOTATION: None}
    assert "annotations" not in rh.undo_patch(lws("app:3"), rev("app:1", 1))["metadata"]


def test_templates_as_the_spec_writes_them() -> None:
    stored = rh.templates(rev("app:2", 2))
    assert stored == {"leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
        "containers": [{"name": "m", "image": "app:2"}]}}},
        "networkConfig": {"subdomainPolicy": "Shared"}}


def apply_merge(obj: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies a merge patch."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(obj) if isinstance(obj, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = apply_merge(out.get(key), value)
    return out
