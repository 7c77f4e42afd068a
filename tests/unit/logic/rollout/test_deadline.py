"""The progress deadline's decisions (``logic.rollout.deadline``), as tables: when it is exceeded,
what is held, what survives a restart, and the rollback's target and write."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pytest

from lws_operator.api.constants import (
    FULLY_READY_ANNOTATION,
    PROGRESS_DEADLINE_ANNOTATION,
    ROLLBACK_ON_DEADLINE_ANNOTATION,
    ROLLED_BACK_FROM_ANNOTATION,
)
from lws_operator.api.validation import validate
from lws_operator.logic.identity.revision import merge_patch, revision_key
from lws_operator.logic.identity.revision_decision import decide_revision
from lws_operator.logic.rollout import deadline as dl
from lws_operator.logic.rollout.pacing import GroupState
from lws_operator.logic.rollout.stall import unstall_view
from lws_operator.logic.status.set_status import GroupCounts
from tests.harness.as_operated import stored_lws

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


@pytest.mark.parametrize(("groups", "released_from", "stuck", "exceeded"), [
    # Every group released to the new revision is Ready on it: the revision works and the next
    # step is the controller's (an operator down longer than the deadline finds this): no hold.
    ((READY_OLD, READY_NEW, READY_NEW), 1, False, False),
    # A released group not Ready on it: the revision is at fault, as before.
    ((READY_OLD, READY_NEW, DOWN_NEW), 1, False, True),
    ((READY_OLD, READY_OLD, READY_NEW), 1, False, True),  # released, not yet recreated
    # Nothing released yet (partition at the replicas, no surge): the clock alone.
    ((READY_OLD, READY_OLD), 2, False, True),
    # Already exceeded on this revision: the hold of a crash loop stays.
    ((READY_OLD, READY_NEW, READY_NEW), 1, True, True),
])
def test_a_rollout_waiting_on_the_controller_is_not_past_its_deadline(
        groups: tuple[GroupState, ...], released_from: int, stuck: bool,
        exceeded: bool) -> None:
    got = dl.decide(60, T0, groups, {}, T0 + 3600, stuck=stuck, released_from=released_from)
    assert got.exceeded == exceeded


def _born(key: str, created: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"sample-{key}", "creationTimestamp": created,
                            "labels": {"leaderworkerset.sigs.k8s.io/template-revision-hash": key}}
    if deleting:
        meta["deletionTimestamp"] = created
    return {"metadata": meta, "revision": 1}


def test_a_new_revision_starts_its_own_clock() -> None:
    revisions = [_born("old", "2026-01-01T00:00:00Z"),
                 _born("new", "2026-01-01T00:05:00Z"),
                 _born("gone", "2026-01-01T00:06:00Z", deleting=True)]
    assert dl.revision_born(revisions, "new") == "2026-01-01T00:05:00Z"
    assert dl.revision_born(revisions, "gone") is None
    assert dl.revision_born(revisions, "absent") is None


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


def test_a_new_revision_past_its_deadline_is_named_and_warned_anew() -> None:
    """The condition kept from an earlier revision's deadline would make ``exceeded_on`` read
    back that revision, so the new one's hold would not be known as such."""
    desired = _status(_cond("Progressing", "True", "2026-01-01T00:00:00Z"))
    first, _ = dl.apply_deadline(desired, desired, EXCEEDED, "bad7", NOW)
    later = "2026-01-01T00:30:00Z"
    out, events = dl.apply_deadline(unstall_view(first), first, EXCEEDED, "bad8", later)
    (progressing,) = [c for c in out["conditions"] if c["type"] == "Progressing"]
    assert dl.exceeded_on(out) == "bad8"
    assert progressing["lastTransitionTime"] == later
    assert [(e.reason, e.type) for e in events] == [("ProgressDeadlineExceeded", "Warning")]


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


def _history(lws: dict[str, Any], *revisions: tuple[str, int]) -> list[dict[str, Any]]:
    """The set's alive revisions: (image, revision number); ``-`` after the image: being
    deleted; ``*``: recorded fully Ready (``logic.identity.history``)."""
    out = []
    for image, number in revisions:
        revision = _revision(_with_image(lws, image.rstrip("-*")), number)
        if image.endswith("-"):
            revision["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        if image.endswith("*"):
            revision["metadata"]["annotations"] = {FULLY_READY_ANNOTATION: NOW}
        out.append(revision)
    return out


AVAILABLE = [_cond("Available", "True", "2026-01-01T00:00:00Z")]
UNAVAILABLE = [_cond("Available", "False", "2026-01-01T00:00:00Z")]
NEVER = "no earlier revision was ever fully Ready"


@pytest.mark.parametrize(("conditions", "revisions", "current", "target", "withheld"), [
    # Updated from the set's first revision, on which it was fully Ready (Available).
    (AVAILABLE, (("v1", 1), ("bad", 2)), "bad", "v1", ""),
    # ... and Available is kept, False, once a group goes down: it still was.
    (UNAVAILABLE, (("v1", 1), ("bad", 2)), "bad", "v1", ""),
    # Created on a template that never became Ready, then updated to one that stalls too:
    # the first revision never was fully Ready, so there is no rollback.
    ([], (("v1", 1), ("bad", 2)), "bad", None, NEVER),
    # After a completed update the others were deleted: the oldest numbered 2 or more was
    # created while another revision lived, which only its own completion deleted.
    ([], (("v2", 2), ("bad", 3)), "bad", "v2", ""),
    (AVAILABLE, (("v2", 5), ("bad", 6)), "bad", "v2", ""),
    # A bad template over an unfinished update (or one reverted mid-rollout, which creates no
    # revision): back to the oldest, the one fully Ready before both...
    (AVAILABLE, (("v1", 1), ("v2", 2), ("bad", 3)), "bad", "v1", ""),
    (AVAILABLE, (("v2", 2), ("v3", 3), ("bad", 4)), "bad", "v2", ""),
    # ... unless the set was never fully Ready: none of them was.
    ([], (("v1", 1), ("v2", 2), ("bad", 3)), "bad", None, NEVER),
    # Reverted to the fully Ready revision, which stalls now itself: nothing older to go to.
    (AVAILABLE, (("v1", 1), ("v2", 2)), "v1", None, "is the last fully Ready revision itself"),
    # Only the current revision.
    (AVAILABLE, (("bad", 1),), "bad", None, "is the last fully Ready revision itself"),
    ([], (("bad", 1),), "bad", None, NEVER),
    # The oldest being deleted (a completed update's truncation) is not there to go back to.
    ([], (("v1-", 1), ("v2", 2), ("bad", 3)), "bad", "v2", ""),
    # A key stored twice (the rolled-out templates of a taken-over set): the key is the target.
    ([], (("v1", 2), ("v1", 3), ("bad", 4)), "bad", "v1", ""),
    # With the history kept, what is recorded decides: the highest-numbered revision recorded
    # fully Ready, whatever the set's conditions...
    ([], (("v1*", 1), ("v2*", 2), ("v3", 3), ("bad", 4)), "bad", "v2", ""),
    (AVAILABLE, (("v1*", 1), ("v2", 2), ("bad", 3)), "bad", "v1", ""),
    # ... a revision made current again (an undo) is renumbered, so it is the last...
    ([], (("v1*", 3), ("v2*", 2), ("bad", 4)), "bad", "v1", ""),
    # ... older revisions from before the history, recorded nothing, are not guessed at...
    (AVAILABLE, (("v0", 2), ("v1*", 3), ("bad", 4)), "bad", "v1", ""),
    # ... and the current revision recorded fully Ready is not rolled back from.
    ([], (("v1*", 1), ("v2*", 2)), "v2", None, "is the last fully Ready revision itself"),
])
def test_the_rollback_goes_only_to_the_last_fully_ready_revision(
        conditions: list[dict[str, Any]], revisions: tuple[tuple[str, int], ...], current: str,
        target: str | None, withheld: str) -> None:
    good = _lws(conditions)
    live = _with_image(good, current)
    history = _history(good, *revisions)
    choice = dl.rollback_choice(live, history, revision_key(live))
    got = None if choice.target is None else choice.target["metadata"]["labels"][
        "leaderworkerset.sigs.k8s.io/template-revision-hash"]
    assert got == (None if target is None else revision_key(_with_image(good, target)))
    assert withheld in choice.withheld
    assert bool(choice.withheld) == (target is None)
    assert dl.rollback_target(live, history, revision_key(live)) is choice.target


def test_a_revision_is_rolled_back_from_once() -> None:
    """A template put back after the rollback (a GitOps tool syncing the bad manifest again)
    is held, not rolled back again and again."""
    good = _lws(AVAILABLE)
    bad = _with_image(good, "bad")
    history = _history(good, ("v1", 1), ("bad", 2))
    assert dl.rollback_target(bad, history, revision_key(bad)) is history[0]
    bad["metadata"]["annotations"][ROLLED_BACK_FROM_ANNOTATION] = revision_key(bad)
    choice = dl.rollback_choice(bad, history, revision_key(bad))
    assert choice.target is None
    assert choice.withheld == (f"Not rolled back: rolled back from revision {revision_key(bad)} "
                               f"once already ({ROLLED_BACK_FROM_ANNOTATION})")


def test_a_scale_creates_no_revision() -> None:
    """Only a template change makes a revision (``logic.identity.revision``): a scale leaves the
    history, and so the rollback's target, as it was."""
    lws = _lws(AVAILABLE)
    history = _history(lws, ("app:1", 1))
    sts = {"metadata": {"labels": {
        "leaderworkerset.sigs.k8s.io/template-revision-hash": revision_key(lws)}}}
    scaled = copy.deepcopy(lws)
    scaled["spec"]["replicas"] = 7
    assert decide_revision(scaled, sts, list[Mapping[str, Any]](history)).create is None


def test_the_condition_says_why_there_is_no_rollback() -> None:
    held = dl.Deadline(60, T0, exceeded=True, withheld="Not rolled back: no earlier revision "
                                                      "was ever fully Ready")
    text = dl.message(held, "abc")
    assert text == ("Rollout made no progress for 60s: no group became ready on revision abc; "
                    "the partition and surge are held. Not rolled back: no earlier revision "
                    "was ever fully Ready. Fix or revert the template (a new revision resumes "
                    "the rollout)")
    # The revision is still read back from it (the exceeded state survives restarts).
    status = _status(_cond("Progressing", "False", "2026-01-01T00:00:00Z",
                           reason="ProgressDeadlineExceeded", message=text))
    assert dl.exceeded_on(status) == "abc"


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
    assert merge_patch(old, new) == patch
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
