"""Rollout stall detection (beyond upstream): when it fires, when it stays silent."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.constants import REASON_ROLLOUT_STALLED
from lws_operator.logic.rollout.stall import (
    Stall,
    apply_stall,
    find_stall,
    unstall_view,
)

HASH = "leaderworkerset.sigs.k8s.io/template-revision-hash"
T0 = "2026-11-29T10:00:00Z"
T0_SECONDS = 1795946400.0  # T0 as a timestamp


def pod(name: str, key: str = "new", reason: str | None = "Unschedulable",
        since: str = T0, deleting: bool = False) -> dict[str, Any]:
    conditions = []
    if reason:
        conditions.append({"type": "PodScheduled", "status": "False", "reason": reason,
                           "message": "0/20 nodes are available: 16 Insufficient nvidia.com/gpu",
                           "lastTransitionTime": since})
    meta: dict[str, Any] = {"name": name, "labels": {HASH: key}}
    if deleting:
        meta["deletionTimestamp"] = T0
    return {"metadata": meta, "status": {"conditions": conditions}}


@pytest.mark.parametrize(
    ("pods", "now", "stalled", "recheck"),
    [
        ([pod("a-4")], T0_SECONDS + 61, ("a-4",), None),
        ([pod("a-4")], T0_SECONDS + 10, (), 50.0),
        ([pod("a-4", key="old")], T0_SECONDS + 100, (), None),  # old revision: not our rollout
        ([pod("a-4", reason="SchedulingGated")], T0_SECONDS + 100, (), None),
        ([pod("a-4", reason=None)], T0_SECONDS + 100, (), None),  # scheduled, slow to start
        ([pod("a-4", deleting=True)], T0_SECONDS + 100, (), None),
        ([pod("a-5"), pod("a-4", since="2026-11-29T10:00:30Z")], T0_SECONDS + 70, ("a-5",), 20.0),
    ],
)
def test_find_stall(pods: list[dict[str, Any]], now: float, stalled: tuple[str, ...],
                    recheck: float | None) -> None:
    found = find_stall(pods, "new", now, grace=60)
    assert tuple(name for name, _ in found.stalled) == stalled
    assert found.recheck_after == recheck


def status(progressing: dict[str, Any], updating: bool = True) -> dict[str, Any]:
    conditions = [{"type": "UpdateInProgress", "status": "True" if updating else "False",
                   "reason": "GroupsUpdating", "message": "Rolling Upgrade is in progress",
                   "lastTransitionTime": T0, "observedGeneration": 2},
                  {"type": "Progressing", "lastTransitionTime": T0, "observedGeneration": 2,
                   **progressing}]
    return {"replicas": 4, "conditions": conditions}


PROGRESSING = {"status": "True", "reason": "GroupsProgressing",
               "message": "Replicas are progressing"}
STALL = Stall((("a-4", "Insufficient nvidia.com/gpu"),), None)


def progressing(s: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in s["conditions"] if c["type"] == "Progressing")


def test_a_stall_starts_with_a_warning() -> None:
    desired, events = apply_stall(status(PROGRESSING), status(PROGRESSING), STALL, "now")
    cond = progressing(desired)
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == (
        "False", REASON_ROLLOUT_STALLED, "now")
    assert "a-4: Insufficient nvidia.com/gpu" in cond["message"]
    assert "Update in two steps" in cond["message"]
    assert "maxUnavailable" in cond["message"]
    assert [(e.reason, e.type) for e in events] == [(REASON_ROLLOUT_STALLED, "Warning")]


def test_a_persisting_stall_changes_nothing() -> None:
    first, _ = apply_stall(status(PROGRESSING), status(PROGRESSING), STALL, "t1")
    view = unstall_view(first)
    assert progressing(view)["status"] == "True"
    assert progressing(view)["reason"] == "GroupsProgressing"
    again, events = apply_stall(status(PROGRESSING), first, Stall(
        (("a-4", "other text"), ("a-5", "")), None), "t2")
    assert again == first
    assert events == ()


@pytest.mark.parametrize(
    ("desired", "stall"),
    [
        (status(PROGRESSING, updating=False), STALL),  # not in a rollout (initial creation)
        (status(PROGRESSING), Stall((), 5.0)),  # nothing stalled yet
    ],
)
def test_no_alarm(desired: dict[str, Any], stall: Stall) -> None:
    out, events = apply_stall(desired, desired, stall, "now")
    assert out == desired
    assert events == ()
