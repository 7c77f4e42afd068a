"""The pause's pure decisions (``logic.rollout.pause``): the partition and replicas a paused
set's leader StatefulSet keeps, the ``Progressing`` overlay, and the resume time the progress
deadline counts from."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.constants import PAUSED_ANNOTATION
from lws_operator.api.validation import validate
from lws_operator.api.view import paused as paused_of
from lws_operator.logic.rollout import pause
from lws_operator.logic.rollout.pacing import (
    GroupState,
    LeaderStatefulSetState,
    RolloutSnapshot,
    plan_rollout,
)
from tests.harness.as_operated import stored_lws

OLD = GroupState(ready=True, updated=False)
NEW = GroupState(ready=True, updated=True)


def _snapshot(replicas: int, sts: tuple[int, int, str] | None, groups: tuple[GroupState, ...],
              updated: bool = False, surge: int = 1, lws_partition: int = 0) -> RolloutSnapshot:
    return RolloutSnapshot(
        lws_name="sample", replicas=replicas, lws_partition=lws_partition, max_unavailable=1,
        max_surge=surge, size=1, lws_updated=updated, current_key="new",
        leader_sts=None if sts is None else LeaderStatefulSetState(*sts), groups=groups)


@pytest.mark.parametrize(("snapshot", "unpaused", "held"), [
    # A new revision (the set was paused before its template changed): upstream's reset would
    # surge a group of the new revision at once; paused, the partition covers every ordinal and
    # nothing is surged.
    (_snapshot(4, (4, 0, "4"), (OLD,) * 4, updated=True), (4, 5), (4, 4)),
    # Mid-rollout: the pacing would take group 1 down next; paused, the partition stays.
    (_snapshot(4, (4, 2, "4"), (OLD, OLD, NEW, NEW), surge=0), (1, 4), (2, 4)),
    # Mid-rollout with the surge up: the pacing would remove it; paused, it stays.
    (_snapshot(4, (5, 0, "4"), (NEW,) * 5), (0, 4), (0, 5)),
    # Scaled up mid-rollout: the new ordinals start on the running revision (the partition
    # over them); the surge's ordinal is one of the six now, no new surge is added.
    (_snapshot(6, (5, 3, "4"), (OLD, OLD, OLD, NEW, NEW)), (3, 6), (6, 6)),
    (_snapshot(6, (4, 2, "4"), (OLD, OLD, NEW, NEW)), (2, 6), (6, 6)),
    # Scaled up at rest: every group on the current revision, the partition is left alone.
    (_snapshot(6, (4, 0, "4"), (NEW,) * 4), (0, 6), (0, 6)),
    # Scaled down mid-rollout: the highest ordinals go, the surge count stays.
    (_snapshot(2, (5, 3, "4"), (OLD, OLD, OLD, NEW, NEW)), (3, 3), (3, 3)),
    # The user's partition raised meanwhile: followed (it takes no group down).
    (_snapshot(4, (4, 2, "4"), (OLD, OLD, NEW, NEW), surge=0, lws_partition=3), (3, 4),
     (3, 4)),
    # A set created paused: created as usual.
    (_snapshot(3, None, ()), (0, 3), (0, 3)),
])
def test_hold(snapshot: RolloutSnapshot, unpaused: tuple[int, int],
              held: tuple[int, int]) -> None:
    planned = plan_rollout(snapshot)
    assert (planned.partition, planned.replicas) == unpaused
    got = pause.hold(planned, snapshot)
    assert (got.partition, got.replicas) == held
    if held != unpaused:  # the Events of the moves not made are dropped
        assert got.events == ()
        assert got.events_after_apply == ()


def _status(reason: str | None, status: str = "True", at: str = "2026-01-01T00:00:00Z",
            updating: bool = True) -> dict[str, Any]:
    conditions = [{"type": "UpdateInProgress", "status": "True" if updating else "False",
                   "reason": "GroupsUpdating", "lastTransitionTime": at}]
    if reason is not None:
        conditions.append({"type": "Progressing", "status": status, "reason": reason,
                           "message": "m", "lastTransitionTime": at})
    return {"conditions": conditions}


NOW = "2026-01-01T01:00:00Z"


@pytest.mark.parametrize(("paused", "updating", "before", "status", "reason", "time", "event"), [
    # Paused during an update: Unknown/RolloutPaused, an Event when it starts, the time kept.
    (True, True, "GroupsProgressing", "Unknown", "RolloutPaused", NOW, True),
    (True, True, "RolloutPaused", "Unknown", "RolloutPaused", "2026-01-01T00:00:00Z", False),
    # Resumed: True/RolloutResumed from the first pass after, its time the resume's.
    (False, True, "RolloutPaused", "True", "RolloutResumed", NOW, True),
    (False, True, "RolloutResumed", "True", "RolloutResumed", "2026-01-01T00:00:00Z", False),
    # No update in progress, or never paused: no overlay.
    (True, False, "GroupsProgressing", "True", "GroupsProgressing", "2026-01-01T00:00:00Z",
     False),
    (False, True, "GroupsProgressing", "True", "GroupsProgressing", "2026-01-01T00:00:00Z",
     False),
    # A stall replaced the resumed condition: it is not put back.
    (False, True, "RolloutStalled", "True", "GroupsProgressing", "2026-01-01T00:00:00Z",
     False),
])
def test_apply_pause(paused: bool, updating: bool, before: str, status: str, reason: str,
                     time: str, event: bool) -> None:
    desired = _status("GroupsProgressing", updating=updating)
    got, events = pause.apply_pause(desired, _status(before, updating=updating), paused,
                                    "sample", NOW)
    (progressing,) = [c for c in got["conditions"] if c["type"] == "Progressing"]
    assert (progressing["status"], progressing["reason"], progressing["lastTransitionTime"]) \
        == (status, reason, time)
    assert [e.reason for e in events] == ([reason] if event else [])
    if reason == "RolloutPaused":
        assert "kubectl lws rollout resume sample" in progressing["message"]


@pytest.mark.parametrize(("before", "resumed"), [
    ("RolloutPaused", 5000.0),  # the first pass after the resume: now
    ("RolloutResumed", 1767225600.0),  # after: the condition's time
    ("GroupsProgressing", None),
    (None, None),
])
def test_resumed_at(before: str | None, resumed: float | None) -> None:
    assert pause.resumed_at(_status(before), 5000.0) == resumed


@pytest.mark.parametrize(("value", "paused", "refused"), [
    ("true", True, False),
    ("false", False, False),
    (None, False, False),
    ("yes", False, True),  # a typo is refused by the webhook, not silently not pausing
    ("True", False, True),
])
def test_the_annotation(value: str | None, paused: bool, refused: bool) -> None:
    annotations = {} if value is None else {PAUSED_ANNOTATION: value}
    lws = stored_lws({"metadata": {"annotations": annotations}, "spec": {
        "replicas": 2, "leaderWorkerTemplate": {"size": 1, "workerTemplate": {"spec": {
            "containers": [{"name": "c", "image": "app:1"}]}}}}})
    assert paused_of(lws) == paused
    errors = [str(e) for e in validate(lws, None) if PAUSED_ANNOTATION in e.path]
    assert bool(errors) == refused
