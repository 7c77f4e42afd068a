"""The revision history (``logic.identity.history``): the limit, the pruning, the numbering,
the change cause and the fully-Ready record."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.constants import (
    CHANGE_CAUSE_ANNOTATION,
    FULLY_READY_ANNOTATION,
    REVISION_HISTORY_LIMIT_ANNOTATION,
)
from lws_operator.logic.identity import history
from lws_operator.logic.identity.revision import revision_key
from lws_operator.logic.identity.revision_decision import controller_revision

HASH = "leaderworkerset.sigs.k8s.io/template-revision-hash"
NOW = "2026-01-01T00:00:00Z"


def lws(annotations: dict[str, str] | None = None, image: str = "nginx:1") -> dict[str, Any]:
    return {
        "metadata": {"name": "sample", "namespace": "ns", "uid": "u-1",
                     "annotations": dict(annotations or {})},
        "spec": {"replicas": 2, "networkConfig": {"subdomainPolicy": "Shared"},
                 "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {"containers": [
                     {"name": "m", "image": image}]}}}},
    }


def rev(key: str, number: int, deleting: bool = False,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"sample-{key}-{number}", "labels": {HASH: key}}
    if deleting:
        meta["deletionTimestamp"] = NOW
    if annotations:
        meta["annotations"] = annotations
    return {"metadata": meta, "revision": number}


@pytest.mark.parametrize(("value", "limit"), [
    (None, 10), ("0", 0), ("3", 3), ("25", 25), ("-1", 10), ("two", 10), ("", 10),
    ("99999999999", 10),
])
def test_the_history_limit(value: str | None, limit: int) -> None:
    annotations = {} if value is None else {REVISION_HISTORY_LIMIT_ANNOTATION: value}
    assert history.history_limit(lws(annotations)) == limit


@pytest.mark.parametrize(("revisions", "current", "limit", "pruned"), [
    # Under the limit: nothing.
    ([("a", 1), ("b", 2), ("c", 3)], "c", 10, []),
    # Limit 0: every other revision, as upstream.
    ([("a", 1), ("b", 2), ("c", 3)], "c", 0, ["a-1", "b-2"]),
    # Beyond the limit: the oldest first, by number, not by list order.
    ([("c", 3), ("a", 1), ("d", 4), ("b", 2)], "d", 1, ["a-1", "b-2"]),
    # The current revision is never pruned, whatever its number (made current again) and
    # however many carry its key.
    ([("a", 5), ("b", 4), ("c", 3), ("a", 1)], "a", 1, ["c-3"]),
])
def test_pruning(revisions: list[tuple[str, int]], current: str, limit: int,
                 pruned: list[str]) -> None:
    objs = [rev(k, n) for k, n in revisions]
    got = [r["metadata"]["name"].removeprefix("sample-") for r in
           history.to_prune(objs, current, limit)]
    assert got == pruned


def test_a_revision_being_deleted_is_not_pruned_again() -> None:
    objs = [rev("a", 1, deleting=True), rev("b", 2), rev("c", 3), rev("d", 4)]
    assert [r["metadata"]["name"] for r in history.to_prune(objs, "d", 1)] == ["sample-b-2"]


@pytest.mark.parametrize(("revisions", "current", "cause", "patch"), [
    # The current revision is the highest and the set records no cause: nothing.
    ([("a", 1), ("b", 2)], "b", None, None),
    # Made current again (the templates put back): renumbered above every other.
    ([("a", 1), ("b", 2)], "a", None, {"revision": 3}),
    ([("a", 1), ("a", 4), ("b", 2), ("c", 3)], "a", None, None),
    ([("a", 2), ("b", 1), ("c", 5)], "b", None, {"revision": 6}),
    # The set's change cause follows onto its current revision.
    ([("a", 1)], "a", "kubectl set image",
     {"metadata": {"annotations": {CHANGE_CAUSE_ANNOTATION: "kubectl set image"}}}),
    ([("a", 1), ("b", 2)], "a", "undo",
     {"revision": 3, "metadata": {"annotations": {CHANGE_CAUSE_ANNOTATION: "undo"}}}),
    # No revision for the key (not created yet): nothing.
    ([("a", 1)], "z", "x", None),
])
def test_the_current_revision_is_brought_up_to_date(
        revisions: list[tuple[str, int]], current: str, cause: str | None,
        patch: dict[str, Any] | None) -> None:
    annotations = {} if cause is None else {CHANGE_CAUSE_ANNOTATION: cause}
    objs = [rev(k, n) for k, n in revisions]
    assert history.current_revision_patch(lws(annotations), objs, current) == patch


def test_a_recorded_cause_is_not_rewritten_or_removed() -> None:
    recorded = rev("a", 1, annotations={CHANGE_CAUSE_ANNOTATION: "first"})
    assert history.current_revision_patch(lws({CHANGE_CAUSE_ANNOTATION: "first"}), [recorded],
                                          "a") is None
    # A set whose annotation is gone removes nothing from the revision.
    assert history.current_revision_patch(lws(), [recorded], "a") is None


def test_a_created_revision_carries_the_cause() -> None:
    body = lws({CHANGE_CAUSE_ANNOTATION: "kubectl apply --record"})
    created = controller_revision(body, revision_key(body), [rev("x", 4)])
    assert created["revision"] == 5
    assert created["metadata"]["annotations"] == {CHANGE_CAUSE_ANNOTATION:
                                                  "kubectl apply --record"}
    assert history.change_cause(created) == "kubectl apply --record"
    assert "annotations" not in controller_revision(lws(), revision_key(lws()), [])["metadata"]


def test_fully_ready_is_recorded_once() -> None:
    fresh = rev("a", 1)
    assert history.fully_ready_patch(fresh, NOW) == {
        "metadata": {"annotations": {FULLY_READY_ANNOTATION: NOW}}}
    marked = rev("a", 1, annotations={FULLY_READY_ANNOTATION: "2025-01-01T00:00:00Z"})
    assert history.fully_ready_patch(marked, NOW) is None
    assert history.fully_ready_at(marked) == "2025-01-01T00:00:00Z"
    assert history.fully_ready_patch(None, NOW) is None
    assert history.fully_ready_patch(rev("a", 1, deleting=True), NOW) is None


@pytest.mark.parametrize(("done", "replicas", "ready"), [
    (True, 2, True), (False, 2, False), (True, 0, False)])
def test_fully_ready(done: bool, replicas: int, ready: bool) -> None:
    assert history.fully_ready(done, replicas) is ready


def test_ordered_newest_first_without_those_being_deleted() -> None:
    objs = [rev("a", 1), rev("c", 3, deleting=True), rev("b", 2), {"metadata": {"name": "x"}}]
    assert [history.number(r) for r in history.ordered(objs)] == [2, 1, 0]
    assert history.number({"revision": True}) == 0
