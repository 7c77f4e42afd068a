"""The progress deadline's decisions (``logic.deadline``), as tables: when it is exceeded, what
is held, what survives a restart, and the rollback's target and write."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.api.constants import (
    PROGRESS_DEADLINE_ANNOTATION,
    ROLLBACK_ON_DEADLINE_ANNOTATION,
    ROLLED_BACK_FROM_ANNOTATION,
)
from lws_operator.api.validation import validate
from lws_operator.logic import deadline as dl
from lws_operator.logic.reconcile import decide_revision
from lws_operator.logic.revision import revision_key
from lws_operator.logic.rollout import GroupState
from lws_operator.logic.stall import unstall_view
from lws_operator.logic.status import GroupCounts
from tests.unit.as_operated import stored_lws

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z
READY_NEW = GroupState(ready=True, updated=True)
DOWN_NEW = GroupState(ready=False, updated=True)
READY_OLD = GroupState(ready=True, updated=False)


@pytest.mark.parametrize(("groups", "ready_since", "now", "stuck", "exceeded", "recheck"), [
    # No group of the new revision ever Ready: exceeded at exactly started + 60.
    ((READY_OLD, DOWN_NEW), {}, T0 + 59, False, False, 1.0),
    ((READY_OLD, DOWN_NEW), {}, T0 + 60, False, True, None),
    ((READY_OLD, DOWN_NEW), {}, T0 + 3600, False, True, None),
    # A group became Ready on the new revision at +30: the clock restarts there.
    ((READY_NEW, DOWN_NEW), {0: T0 + 30}, T0 + 60, False, False, 30.0),
    ((READY_NEW, DOWN_NEW), {0: T0 + 30}, T0 + 90, False, True, None),
    # Only groups Ready now count: one that came up and went down again is no progress.
    ((DOWN_NEW, DOWN_NEW), {0: T0 + 30}, T0 + 60, False, True, None),
    # Ready groups of the old revision are no progress (a revert's old groups neither: their
    # Ready times precede the rollout's start).
    ((READY_OLD, DOWN_NEW), {0: T0 + 30}, T0 + 60, False, True, None),
    ((READY_NEW, DOWN_NEW), {0: T0 - 500}, T0 + 30, False, False, 30.0),
    # Exceeded on this revision already (the status says so): stays, whatever comes up.
    ((READY_NEW, DOWN_NEW), {0: T0 + 50}, T0 + 60, True, True, None),
])
def test_decide(groups: tuple[GroupState, ...], ready_since: dict[int, float], now: float,
                stuck: bool, exceeded: bool, recheck: float | None) -> None:
    got = dl.decide(60, T0, groups, ready_since, now, stuck=stuck)
    assert (got.exceeded, got.recheck_after) == (exceeded, recheck)


def test_no_opt_in_or_no_rollout_decides_nothing() -> None:
    assert dl.decide(None, T0, (DOWN_NEW,), {}, T0 + 1e6) == dl.OFF
    assert dl.decide(60, None, (DOWN_NEW,), {}, T0 + 1e6, stuck=True) == dl.Deadline(60)


@pytest.mark.parametrize(("planned", "current", "scaled", "held"), [
    ((2, 5), (3, 5), False, (3, 5)),  # the partition would move down: held
    ((3, 4), (3, 5), False, (3, 5)),  # the surge would be removed: held
    ((4, 5), (3, 5), False, (4, 5)),  # raising the partition takes no group down
    ((2, 6), (3, 5), True, (3, 6)),  # spec.replicas changed: the scale is followed
])
def test_hold(planned: tuple[int, int], current: tuple[int, int], scaled: bool,
              held: tuple[int, int]) -> None:
    assert dl.hold(planned, current, scaled) == held


def _lws(conditions: list[dict[str, Any]], generation: int = 2, observed: int = 2,
         annotations: dict[str, str] | None = None) -> dict[str, Any]:
    lws = stored_lws({"metadata": {"annotations": annotations or {}}, "spec": {
        "replicas": 2, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {
            "containers": [{"name": "c", "image": "app:1"}]}}}}})
    lws["metadata"]["generation"] = generation
    lws["status"] = {"observedGeneration": observed, "conditions": conditions}
    return lws


def _cond(kind: str, status: str, at: str, generation: int = 2, reason: str = "R",
          message: str = "m") -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": at, "observedGeneration": generation}


UPDATING = GroupCounts(ready=1, updated=1, ready_non_burst=1, partitioned_current_non_burst=2,
                       partitioned_updated_non_burst=1, partitioned_updated_and_ready=1)
DONE_NOT_READY = GroupCounts(ready=1, updated=2, ready_non_burst=1,
                             partitioned_current_non_burst=2, partitioned_updated_non_burst=2,
                             partitioned_updated_and_ready=1)
NOW = "2026-01-01T01:00:00Z"


@pytest.mark.parametrize(("conditions", "generation", "counts", "started"), [
    # Restart-safe: a new operator derives the start from the stored condition, not its clock.
    ([_cond("UpdateInProgress", "True", "2026-01-01T00:00:00Z")], 2, UPDATING,
     "2026-01-01T00:00:00Z"),
    # The status was not yet written for this generation: upstream's rules replace the
    # condition now (a new template starts the clock again).
    ([_cond("UpdateInProgress", "True", "2026-01-01T00:00:00Z")], 3, UPDATING, NOW),
    # A rollout just starting.
    ([_cond("Available", "True", "2026-01-01T00:00:00Z")], 3, UPDATING, NOW),
    # Every group updated, not all Ready: the update is still in progress since it started.
    ([_cond("UpdateInProgress", "True", "2026-01-01T00:00:00Z")], 3, DONE_NOT_READY,
     "2026-01-01T00:00:00Z"),
    # No update in progress.
    ([_cond("Available", "True", "2026-01-01T00:00:00Z")], 2, DONE_NOT_READY, None),
])
def test_rollout_started(conditions: list[dict[str, Any]], generation: int,
                         counts: GroupCounts, started: str | None) -> None:
    assert dl.rollout_started(_lws(conditions, generation), counts, NOW) == started


def _pod(name: str, group: str, key: str, ready_at: str | None,
         deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {
        "leaderworkerset.sigs.k8s.io/name": "sample",
        "leaderworkerset.sigs.k8s.io/group-index": group,
        "leaderworkerset.sigs.k8s.io/template-revision-hash": key}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    conditions = [] if ready_at is None else [
        {"type": "Ready", "status": "True", "lastTransitionTime": ready_at}]
    return {"metadata": meta, "status": {"conditions": conditions}}


def test_groups_ready_since_takes_the_last_pod_of_the_revision() -> None:
    pods = [
        _pod("sample-0", "0", "new", "2026-01-01T00:00:10Z"),
        _pod("sample-0-1", "0", "new", "2026-01-01T00:00:20Z"),
        _pod("sample-1", "1", "old", "2026-01-01T00:00:30Z"),  # another revision
        _pod("sample-2", "2", "new", None),  # not Ready
        _pod("sample-3", "3", "new", "2026-01-01T00:00:40Z", deleting=True),
    ]
    assert dl.groups_ready_since("sample", pods, "new") == {0: T0 + 20}


def _status(progressing: dict[str, Any]) -> dict[str, Any]:
    return {"conditions": [progressing,
                           _cond("UpdateInProgress", "True", "2026-01-01T00:00:00Z")]}


EXCEEDED = dl.Deadline(60, T0, exceeded=True)


def test_the_deadline_starts_with_a_warning_and_names_the_revision() -> None:
    desired = _status(_cond("Progressing", "True", "2026-01-01T00:00:00Z",
                            reason="GroupsProgressing"))
    out, events = dl.apply_deadline(desired, desired, EXCEEDED, "bad7", NOW)
    (progressing,) = [c for c in out["conditions"] if c["type"] == "Progressing"]
    assert (progressing["status"], progressing["reason"], progressing["lastTransitionTime"]) == (
        "False", "ProgressDeadlineExceeded", NOW)
    assert [(e.reason, e.type) for e in events] == [("ProgressDeadlineExceeded", "Warning")]
    assert dl.exceeded_on(out) == "bad7"
    # The next pass computes the upstream status from the overlay hidden, and overlays again:
    # same condition, same time, no second Warning.
    again, events = dl.apply_deadline(unstall_view(out), out, EXCEEDED, "bad7",
                                      "2026-01-01T02:00:00Z")
    assert again["conditions"] == out["conditions"]
    assert events == ()


@pytest.mark.parametrize(("deadline", "updating"), [
    (dl.Deadline(60, T0, recheck_after=5.0), True), (EXCEEDED, False)])
def test_no_overlay(deadline: dl.Deadline, updating: bool) -> None:
    desired = _status(_cond("Progressing", "True", "2026-01-01T00:00:00Z"))
    if not updating:
        desired["conditions"][1]["status"] = "False"
    assert dl.apply_deadline(desired, desired, deadline, "bad7", NOW) == (desired, ())


def _revision(lws: dict[str, Any], number: int) -> dict[str, Any]:
    revision = decide_revision(lws, None, []).create
    assert revision is not None
    return {**revision, "revision": number}


def _with_image(lws: dict[str, Any], image: str) -> dict[str, Any]:
    out = copy.deepcopy(lws)
    out["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "image"] = image
    return out


def test_rollback_targets_the_oldest_revision_once_per_bad_revision() -> None:
    good = _lws([])
    bad, worse = _with_image(good, "app:bad"), _with_image(good, "app:worse")
    revisions = [_revision(bad, 2), _revision(good, 1), _revision(worse, 3)]
    good_key, bad_key = revision_key(good), revision_key(bad)
    assert dl.rollback_target(bad, revisions, bad_key) is revisions[1]
    # After the rollback the target is the oldest itself: nothing to roll back to.
    assert dl.rollback_target(good, revisions, good_key) is None
    # A revision already rolled back from is never rolled back from again.
    again = copy.deepcopy(bad)
    again["metadata"]["annotations"][ROLLED_BACK_FROM_ANNOTATION] = bad_key
    assert dl.rollback_target(again, revisions, bad_key) is None
    # A set that never completed an update has no fully Ready revision.
    assert dl.rollback_target(bad, [revisions[0]], bad_key) is None


def _merge(target: Any, patch: Any) -> Any:
    """RFC 7386 applied, as the API server does for a merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = _merge(out.get(key), value)
    return out


def test_the_rollback_write_restores_the_revision_and_keeps_the_controller_fields() -> None:
    good = _lws([])
    good["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {"labels": {"a": "1"}}
    bad = _with_image(good, "app:bad")
    del bad["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]
    bad["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] = 7
    body = dl.rollback_body(bad, _revision(good, 1), revision_key(bad))
    assert body["metadata"] == {"resourceVersion": "100", "annotations": {
        ROLLED_BACK_FROM_ANNOTATION: revision_key(bad)}}
    restored = _merge(bad, body)
    assert revision_key(restored) == revision_key(good)
    assert restored["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] == 7
    assert restored["spec"]["replicas"] == bad["spec"]["replicas"]


@pytest.mark.parametrize(("old", "new", "patch"), [
    ({"a": 1, "b": 2}, {"a": 1}, {"b": None}),
    ({"a": {"x": 1, "y": 2}}, {"a": {"x": 3}}, {"a": {"x": 3, "y": None}}),
    ({"a": [1, 2]}, {"a": [1]}, {"a": [1]}),
    ({"a": 1}, {"a": 1, "c": {"d": 1}}, {"c": {"d": 1}}),
])
def test_merge_patch(old: dict[str, Any], new: dict[str, Any], patch: dict[str, Any]) -> None:
    assert dl.merge_patch(old, new) == patch
    assert _merge(old, patch) == new


@pytest.mark.parametrize(("annotations", "hashed", "errors"), [
    ({PROGRESS_DEADLINE_ANNOTATION: "600"}, False, []),
    ({PROGRESS_DEADLINE_ANNOTATION: "600", ROLLBACK_ON_DEADLINE_ANNOTATION: "true"}, False, []),
    ({PROGRESS_DEADLINE_ANNOTATION: "0"}, False, ["whole number"]),
    ({PROGRESS_DEADLINE_ANNOTATION: "10m"}, False, ["whole number"]),
    ({PROGRESS_DEADLINE_ANNOTATION: "600", ROLLBACK_ON_DEADLINE_ANNOTATION: "yes"}, False,
     ['"true" or "false"']),
    ({ROLLBACK_ON_DEADLINE_ANNOTATION: "true"}, False, ["requires"]),
    ({PROGRESS_DEADLINE_ANNOTATION: "600"}, True, ["groupIdentity Hash"]),
])
def test_validation(annotations: dict[str, str], hashed: bool, errors: list[str]) -> None:
    lws = _lws([], annotations=annotations)
    if hashed:
        lws["spec"]["groupIdentity"] = "Hash"
    got = [str(e) for e in validate(lws, None) if "lws-operator.dev" in e.path]
    assert len(got) == len(errors)
    for text, expected in zip(got, errors, strict=True):
        assert expected in text


def test_deadline_seconds_reads_only_a_positive_whole_number() -> None:
    assert dl.deadline_seconds(_lws([], annotations={PROGRESS_DEADLINE_ANNOTATION: "10"})) == 10
    assert dl.deadline_seconds(_lws([], annotations={PROGRESS_DEADLINE_ANNOTATION: "x"})) is None
    assert dl.deadline_seconds(_lws([])) is None
