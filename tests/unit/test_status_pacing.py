"""When the status is written (``logic.status_pacing``): a condition, the observed generation or
the HPA selector at once; the group counters alone once they have been still for ``QUIET``
seconds, never later than ``LONGEST`` seconds after the first deferred change."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.logic.status_pacing import (
    LONGEST,
    QUIET,
    SLACK,
    Deferral,
    Pacing,
    only_counters_differ,
    pace,
)

T = 1_800_000_000.0
AVAILABLE = {"type": "Available", "status": "True", "reason": "AllGroupsReady",
             "message": "All replicas are ready", "lastTransitionTime": "2027-01-15T08:00:00Z",
             "observedGeneration": 1}
PROGRESSING = {**AVAILABLE, "type": "Progressing", "reason": "GroupsProgressing",
               "message": "Replicas are progressing"}


def status(replicas: int = 3, ready: int = 1, updated: int = 3, generation: int = 1,
           conditions: tuple[dict[str, Any], ...] = (PROGRESSING,),
           **more: Any) -> dict[str, Any]:
    return {"replicas": replicas, "readyReplicas": ready, "updatedReplicas": updated,
            "hpaPodSelector": "leaderworkerset.sigs.k8s.io/name=s,"
                              "leaderworkerset.sigs.k8s.io/worker-index=0",
            "observedGeneration": generation, "conditions": list(conditions), **more}


STORED = status()


@pytest.mark.parametrize(("desired", "counters_only"), [
    (STORED, False),  # no difference at all
    (status(ready=2), True),
    (status(replicas=4, ready=0, updated=4), True),
    (status(ready=3, conditions=(AVAILABLE,)), False),  # a condition with the counters
    (status(conditions=({**PROGRESSING, "status": "False"},)), False),
    (status(ready=2, generation=2), False),  # observedGeneration with a counter
    ({k: v for k, v in status(ready=2).items() if k != "hpaPodSelector"}, False),
    (status(ready=2, extra="field"), False),  # anything else, such as a field of someone else
    ({k: v for k, v in STORED.items() if k != "readyReplicas"}, True),  # a counter gone
])
def test_only_counters_differ(desired: dict[str, Any], counters_only: bool) -> None:
    assert only_counters_differ(desired, STORED) is counters_only


PENDING = Deferral(T, T, (3, 2, 3))  # ready 1 -> 2 seen at T, not written


@pytest.mark.parametrize(("desired", "clock", "deferral", "expected"), [
    # Nothing differs: nothing to write, and whatever was pending is dropped (the counters
    # went back to what is stored, say a group that flapped).
    (STORED, T, None, Pacing(False)),
    (STORED, T + 1, PENDING, Pacing(False)),
    # A condition, the generation: at once, with the counters of the moment; a pending
    # deferral is written with it.
    (status(ready=3, conditions=(AVAILABLE,)), T, None, Pacing(True)),
    (status(ready=3, conditions=(AVAILABLE,)), T + 1, PENDING, Pacing(True)),
    (status(generation=2), T, None, Pacing(True)),
    # The counters alone: deferred until they have been still for QUIET seconds.
    (status(ready=2), T, None, Pacing(False, PENDING, QUIET)),
    (status(ready=2), T + 1, PENDING, Pacing(False, PENDING, QUIET - 1)),
    (status(ready=2), T + QUIET, PENDING, Pacing(True)),
    (status(ready=2), T + QUIET - SLACK / 2, PENDING, Pacing(True)),  # the timer a hair early
    # They moved again: QUIET more from then, counted from the last move ...
    (status(ready=3), T + 2, PENDING,
     Pacing(False, Deferral(T, T + 2, (3, 3, 3)), QUIET)),
    # ... but never past LONGEST after the first deferred change.
    (status(ready=3), T + LONGEST - 1, Deferral(T, T + LONGEST - 2, (3, 2, 3)),
     Pacing(False, Deferral(T, T + LONGEST - 1, (3, 3, 3)), 1.0)),
    (status(ready=3), T + LONGEST, Deferral(T, T + LONGEST - 1, (3, 2, 3)), Pacing(True)),
    # readyReplicas falling to zero waits like any counter (leaving zero: see below).
    (status(ready=0), T, None, Pacing(False, Deferral(T, T, (3, 0, 3)), QUIET)),
    # A deferral from the future (the wall clock went back) starts over.
    (status(ready=2), T, Deferral(T + 3600, T + 3600, (3, 2, 3)),
     Pacing(False, PENDING, QUIET)),
])
def test_pace(desired: dict[str, Any], clock: float, deferral: Deferral | None,
              expected: Pacing) -> None:
    assert pace(desired, STORED, clock, deferral) == expected


def test_the_first_ready_group_is_written_at_once() -> None:
    """From no Ready group to one (absent or 0 stored): at once; from one to two: deferred."""
    none_ready = status(ready=0)
    assert pace(status(ready=1), none_ready, T, None) == Pacing(True)
    absent = {k: v for k, v in none_ready.items() if k != "readyReplicas"}
    assert pace(status(ready=1), absent, T, None) == Pacing(True)
    assert pace(status(ready=2), status(ready=1), T, None).write is False


def test_continuous_churn_is_written_every_longest_seconds() -> None:
    """Counters moving every second, never still for QUIET: written LONGEST seconds after the
    first change that followed the last write, with the counters of that moment."""
    deferral: Deferral | None = None
    stored = STORED
    writes = []
    for tick in range(1, 31):
        desired = status(ready=1 + tick)
        decided = pace(desired, stored, T + tick, deferral)
        if decided.write:
            writes.append(tick)
            stored = desired
        deferral = decided.deferral
    assert writes == list(range(1 + int(LONGEST), 31, int(LONGEST) + 1))
