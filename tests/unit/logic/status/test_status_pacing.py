"""When the status is written (``logic.status.pacing``): a condition, the observed generation, the
HPA selector or a pass's Event at once; the group counters alone ``LONGEST`` seconds after the
first deferred change while a create or a rollout is under way (the Available write carries
them), so at most once per ``LONGEST`` seconds, or once they have been still for ``QUIET``
seconds (``SETTLED_LONGEST`` at the latest) for any other set."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest

from lws_operator.logic.reconcile.snapshot import Deferral
from lws_operator.logic.status.pacing import (
    BUDGET_RATE,
    BUSIEST_LONGEST,
    LONGEST,
    QUIET,
    SETTLED_LONGEST,
    SLACK,
    Pacing,
    longest,
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
# An Available set (all its groups Ready): its counters move only once in a while (a surge group
# reclaimed, a scale-down), so a quiet spell is worth a write.
SETTLED = status(ready=3, conditions=(AVAILABLE,))
SETTLED_PENDING = Deferral(T, T, (2, 3, 3))  # replicas 3 -> 2 seen at T, not written


def settled(replicas: int = 2, **more: Any) -> dict[str, Any]:
    return status(replicas=replicas, ready=3, conditions=(AVAILABLE,), **more)


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
    # The counters alone of a set not Available yet: the Available write to come carries them;
    # until then they wait LONGEST seconds after the first deferred change, still or not.
    (status(ready=2), T, None, Pacing(False, PENDING, LONGEST)),
    (status(ready=2), T + QUIET, PENDING, Pacing(False, PENDING, LONGEST - QUIET)),
    (status(ready=3), T + 2, PENDING,
     Pacing(False, Deferral(T, T + 2, (3, 3, 3)), LONGEST - 2)),
    (status(ready=2), T + LONGEST, PENDING, Pacing(True)),
    (status(ready=2), T + LONGEST - SLACK / 2, PENDING, Pacing(True)),  # the timer a hair early
    (status(ready=3), T + LONGEST, Deferral(T, T + LONGEST - 1, (3, 2, 3)), Pacing(True)),
    # readyReplicas falling to zero waits like any counter (leaving zero: see below).
    (status(ready=0), T, None, Pacing(False, Deferral(T, T, (3, 0, 3)), LONGEST)),
    # A deferral from the future (the wall clock went back) starts over.
    (status(ready=2), T, Deferral(T + 3600, T + 3600, (3, 2, 3)),
     Pacing(False, PENDING, LONGEST)),
])
def test_pace(desired: dict[str, Any], clock: float, deferral: Deferral | None,
              expected: Pacing) -> None:
    assert pace(desired, STORED, clock, deferral) == expected


@pytest.mark.parametrize(("desired", "clock", "deferral", "expected"), [
    (SETTLED, T, SETTLED_PENDING, Pacing(False)),
    # The counters alone of an Available set: deferred until they have been still for QUIET
    # seconds.
    (settled(), T, None, Pacing(False, SETTLED_PENDING, QUIET)),
    (settled(), T + 1, SETTLED_PENDING, Pacing(False, SETTLED_PENDING, QUIET - 1)),
    (settled(), T + QUIET, SETTLED_PENDING, Pacing(True)),
    (settled(), T + QUIET - SLACK / 2, SETTLED_PENDING, Pacing(True)),  # a hair early
    # They moved again: QUIET more from then, counted from the last move ...
    (settled(replicas=4), T + 2, SETTLED_PENDING,
     Pacing(False, Deferral(T, T + 2, (4, 3, 3)), QUIET)),
    # ... but never past SETTLED_LONGEST after the first deferred change.
    (settled(replicas=4), T + SETTLED_LONGEST - 1,
     Deferral(T, T + SETTLED_LONGEST - 2, (2, 3, 3)),
     Pacing(False, Deferral(T, T + SETTLED_LONGEST - 1, (4, 3, 3)), 1.0)),
    (settled(replicas=4), T + SETTLED_LONGEST, Deferral(T, T + SETTLED_LONGEST - 1, (2, 3, 3)),
     Pacing(True)),
])
def test_pace_available(desired: dict[str, Any], clock: float, deferral: Deferral | None,
                        expected: Pacing) -> None:
    assert pace(desired, SETTLED, clock, deferral) == expected


UPDATING = {**PROGRESSING, "type": "UpdateInProgress", "reason": "GroupsUpdating",
            "message": "Rolling Upgrade is in progress"}
STALLED = {**PROGRESSING, "status": "False", "reason": "RolloutStalled"}
PAUSED = {**PROGRESSING, "status": "Unknown", "reason": "RolloutPaused"}
NOT_AVAILABLE = {**AVAILABLE, "status": "False"}


@pytest.mark.parametrize(("conditions", "wait"), [
    # A create (Progressing) or a rollout (UpdateInProgress and Progressing): the Available
    # write is to come and carries the counters; until then they wait LONGEST.
    ((PROGRESSING,), LONGEST),
    ((UPDATING, PROGRESSING, NOT_AVAILABLE), LONGEST),
    # No condition write is due: an Available set, a set that says it is not progressing
    # (stalled, past its deadline, its pods not mutated: False; paused: Unknown), or one with
    # no Progressing condition at all. A change is news: QUIET once still.
    ((AVAILABLE,), QUIET),
    ((AVAILABLE, {**PROGRESSING, "status": "False"}), QUIET),
    ((STALLED,), QUIET),
    ((UPDATING, PAUSED, NOT_AVAILABLE), QUIET),
    ((), QUIET),
])
def test_a_create_or_rollout_under_way_waits_longest_any_other_set_until_quiet(
        conditions: tuple[dict[str, Any], ...], wait: float) -> None:
    stored = status(conditions=conditions)
    decided = pace({**stored, "readyReplicas": 2}, stored, T, None)
    assert decided == Pacing(False, Deferral(T, T, (3, 2, 3)), wait)


@pytest.mark.parametrize(("desired", "deferral", "expected"), [
    # An Event tells of the status of now: the write that carries it cannot wait, even when
    # only the counters differ (a condition's change, in practice, which is written at once
    # anyway) ...
    (status(ready=2), None, Pacing(True)),
    (status(ready=2), PENDING, Pacing(True)),
    (status(ready=3, conditions=(AVAILABLE,)), None, Pacing(True)),
    # ... but with nothing to write there is no write to carry it.
    (STORED, None, Pacing(False)),
    (STORED, PENDING, Pacing(False)),
])
def test_a_pass_with_events_writes_at_once(desired: dict[str, Any], deferral: Deferral | None,
                                           expected: Pacing) -> None:
    assert pace(desired, STORED, T + 1, deferral, events=True) == expected


def test_the_first_ready_group_is_written_at_once_when_a_controller_reads_it() -> None:
    """From no Ready group to one (absent or 0 stored): at once for a set whose controller
    acts on it (a DisaggregatedSet's); from one to two: deferred. Any other set's first
    Ready group waits like any counter."""
    none_ready = status(ready=0)
    assert pace(status(ready=1), none_ready, T, None, serving_read=True) == Pacing(True)
    absent = {k: v for k, v in none_ready.items() if k != "readyReplicas"}
    assert pace(status(ready=1), absent, T, None, serving_read=True) == Pacing(True)
    assert pace(status(ready=2), status(ready=1), T, None, serving_read=True).write is False
    assert pace(status(ready=1), none_ready, T, None) == Pacing(
        False, Deferral(T, T, (3, 1, 3)), LONGEST)
    assert pace(status(ready=1), absent, T, None).write is False


@pytest.mark.parametrize(("stored", "step", "expected"), [
    # Progressing, not Available: written LONGEST seconds after the first change that followed
    # the last write, with the counters of that moment: once per LONGEST + 1 ticks.
    (STORED, 1, [31, 62, 93]),
    # Available: SETTLED_LONGEST after it, as the counters are never still for QUIET seconds.
    (SETTLED, 1, [11, 22, 33, 44, 55, 66, 77, 88, 99, 110]),
    # Available, and still for QUIET seconds between moves: each move is written QUIET after.
    (SETTLED, 4, list(range(7, 121, 4))),
    # Progressing, the same moves: LONGEST after the first move that followed a write.
    (STORED, 4, [34, 66, 98]),
])
def test_continuous_churn(stored: dict[str, Any], step: int, expected: list[int]) -> None:
    """Counters moving every ``step`` seconds for two minutes: when they are written."""
    assert (LONGEST, SETTLED_LONGEST, QUIET) == (30, 10, 3)  # the figures the rows spell out
    assert _churn(stored, [step] * (120 // step)) == expected


def _churn(stored: dict[str, Any], gaps: list[int]) -> list[int]:
    """The ticks (seconds) at which a pass every second writes, the counters moving after each
    of ``gaps`` seconds in turn (``replicas`` one more each time)."""
    moves, tick = set(), 0
    for gap in gaps:
        tick += gap
        moves.add(tick)
    deferral: Deferral | None = None
    replicas, writes = stored["replicas"], []
    for tick in range(1, max(moves) + 1):
        replicas += tick in moves
        desired = {**stored, "replicas": replicas}
        decided = pace(desired, stored, T + tick, deferral)
        if decided.write:
            writes.append(tick)
            stored = desired
        deferral = decided.deferral
    return writes


@pytest.mark.parametrize("gaps", [
    [1] * 200,
    [2, 7, 1, 1, 13, 40, 3, 3, 3, 29, 31, 1, 60, 2, 2],
    [5, 25, 5, 25, 5, 25, 5, 25, 5, 25],
    [29, 29, 29, 29, 29, 29, 29],
    [31, 31, 31, 31, 31],
    [1, 1, 1, 100, 1, 1, 1],
])
def test_a_rollout_is_written_at_most_once_per_longest_and_never_further_behind(
        gaps: list[int]) -> None:
    """However the counters of a create or a rollout move: two counters-only writes are at
    least LONGEST seconds apart, and no change stays unwritten for more than LONGEST seconds,
    the last one included."""
    writes = _churn(STORED, [*gaps, int(LONGEST)])  # one more move, LONGEST after the last
    assert all(b - a >= LONGEST for a, b in pairwise(writes))
    tick = 0
    for gap in gaps:
        tick += gap
        assert next(w for w in writes if w >= tick) - tick <= LONGEST


@pytest.mark.parametrize(("under_way", "bound"), [
    # A few dozen sets under way at once: LONGEST, as for one.
    (0, LONGEST), (1, LONGEST), (30, LONGEST),
    # More: they share BUDGET_RATE counters writes a second ...
    (31, 31.0), (60, 60.0), (119, 119.0),
    # ... but no set's counters wait longer than BUSIEST_LONGEST.
    (120, BUSIEST_LONGEST), (125, BUSIEST_LONGEST), (10_000, BUSIEST_LONGEST),
])
def test_the_sets_under_way_share_a_budget_of_counters_writes(under_way: int,
                                                               bound: float) -> None:
    assert (LONGEST, BUDGET_RATE, BUSIEST_LONGEST) == (30, 1, 120)  # the figures the rows spell out
    assert longest(under_way) == bound
    stored = status()
    decided = pace({**stored, "readyReplicas": 2}, stored, T, None, under_way=under_way)
    assert decided == Pacing(False, Deferral(T, T, (3, 2, 3)), bound)
    assert pace({**stored, "readyReplicas": 2}, stored, T + bound, decided.deferral,
                under_way=under_way).write


@pytest.mark.parametrize("under_way", [0, 45, 125, 600])
def test_the_budget_stretches_only_sets_under_way(under_way: int) -> None:
    """An Available set's counters are news (QUIET), whatever the others do; a condition
    is written at once."""
    assert pace(settled(), SETTLED, T, None, under_way=under_way) == Pacing(
        False, SETTLED_PENDING, QUIET)
    assert pace(status(ready=3, conditions=(AVAILABLE,)), STORED, T, None,
                under_way=under_way) == Pacing(True)


@pytest.mark.parametrize("under_way", [60, 125])
def test_with_many_sets_under_way_a_rollout_is_written_once_per_stretched_bound(
        under_way: int) -> None:
    """Counters moving every second for ten minutes, ``under_way`` sets under way: the
    writes are ``longest(under_way)`` (plus the tick that follows a write) apart."""
    bound = int(longest(under_way))
    deferral: Deferral | None = None
    stored, writes = STORED, []
    for tick in range(1, 601):
        desired = {**stored, "replicas": stored["replicas"] + 1}
        decided = pace(desired, stored, T + tick, deferral, under_way=under_way)
        if decided.write:
            writes.append(tick)
            stored = desired
        deferral = decided.deferral
    assert writes == list(range(bound + 1, 601, bound + 1))
