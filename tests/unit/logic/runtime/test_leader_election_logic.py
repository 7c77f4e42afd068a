"""Leader election decisions (lws_operator.logic.runtime.leaderelection), table-driven on a manual
clock: when a candidate may take the Lease, what it writes, when a leader must give up."""

from __future__ import annotations

import datetime as dt

import pytest

from lws_operator.logic.runtime.leaderelection import (
    LeaseRecord,
    Observation,
    Timings,
    acquire_or_renew,
    expires_in,
    format_micro_time,
    lease_body,
    may_renew_blind,
    parse_micro_time,
    release,
    renew_deadline_passed,
)
from tests.harness.clock import ManualClock

ME, OTHER = "me_1", "other_2"
T = Timings(15.0, 10.0, 2.0)
WALL = dt.datetime(2026, 11, 29, 22, 0, 0, 123456, tzinfo=dt.UTC)
STAMP = "2026-11-29T22:00:00.123456Z"


def held(holder: str, duration: int = 15, transitions: int = 3) -> LeaseRecord:
    return LeaseRecord(holder, duration, "2026-11-29T21:00:00.000000Z",
                       "2026-11-29T21:59:59.000000Z", transitions)


@pytest.mark.parametrize(("record", "seen_for", "expected"), [
    # No Lease yet: take it, first holder, no transition.
    (None, 0.0, LeaseRecord(ME, 15, STAMP, STAMP, 0)),
    # Released (no holder): take it at once, one more transition.
    (LeaseRecord("", 1, STAMP, STAMP, 3), 0.0, LeaseRecord(ME, 15, STAMP, STAMP, 4)),
    # Another holder, renewed (as far as we saw) less than its duration ago: wait.
    (held(OTHER), 0.0, None),
    (held(OTHER), 14.9, None),
    # ... a whole duration without a visible renewal: take over.
    (held(OTHER), 15.0, LeaseRecord(ME, 15, STAMP, STAMP, 4)),
    # A released-style short duration frees the Lease sooner.
    (held(OTHER, duration=1), 1.0, LeaseRecord(ME, 15, STAMP, STAMP, 4)),
    # Ours: renew, keeping acquireTime and transitions.
    (held(ME), 0.0, LeaseRecord(ME, 15, "2026-11-29T21:00:00.000000Z", STAMP, 3)),
    (held(ME), 100.0, LeaseRecord(ME, 15, "2026-11-29T21:00:00.000000Z", STAMP, 3)),
])
def test_acquire_or_renew(record: LeaseRecord | None, seen_for: float,
                          expected: LeaseRecord | None) -> None:
    clock = ManualClock(1000.0)
    observation = Observation(None, clock()).update(record, clock())
    clock.advance(seen_for)
    assert acquire_or_renew(observation, ME, T, clock(), WALL) == expected


def test_expiry_counts_from_when_the_record_last_changed_not_from_its_renew_time() -> None:
    """The holder's renewals (a new renewTime each) restart the local clock; its wall-clock
    renewTime, however old it looks, does not matter."""
    clock = ManualClock()
    observation = Observation(None, clock()).update(held(OTHER), clock())
    for second in range(1, 60):
        clock.advance(1.0)
        renewed = LeaseRecord(OTHER, 15, "2000-01-01T00:00:00.000000Z",
                              f"2000-01-01T00:00:{second:02d}.000000Z", 3)
        observation = observation.update(renewed, clock())
        assert acquire_or_renew(observation, ME, T, clock(), WALL) is None
    # The same record read again does not restart the clock.
    same = observation.record
    clock.advance(14.0)
    observation = observation.update(same, clock())
    assert acquire_or_renew(observation, ME, T, clock(), WALL) is None
    clock.advance(1.0)
    assert acquire_or_renew(observation, ME, T, clock(), WALL) is not None


@pytest.mark.parametrize(("since_renewal", "passed"), [
    (0.0, False), (9.99, False), (10.0, True), (30.0, True),
])
def test_renew_deadline(since_renewal: float, passed: bool) -> None:
    clock = ManualClock(50.0)
    last = clock()
    clock.advance(since_renewal)
    assert renew_deadline_passed(last, T, clock()) is passed


def test_the_deadline_comes_before_anyone_else_may_take_over() -> None:
    """A leader that stops renewing gives up (renewDeadline) before a standby that saw its last
    renewal may take the lease (leaseDuration): no overlap."""
    clock = ManualClock()
    last_renewal = clock()
    standby = Observation(None, 0.0).update(held(OTHER), clock())
    while acquire_or_renew(standby, ME, T, clock(), WALL) is None:
        clock.advance(0.5)
    assert renew_deadline_passed(last_renewal, T, clock())


@pytest.mark.parametrize(("timings", "message"), [
    (Timings(10.0, 10.0, 2.0), "leaseDuration must be greater than renewDeadline"),
    (Timings(15.0, 2.4, 2.0), "renewDeadline must be greater than retryPeriod*1.2"),
    (Timings(15.0, 10.0, 0.0), "retryPeriod must be greater than zero"),
])
def test_invalid_timings(timings: Timings, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("*", r"\*")):
        timings.validate()


def test_release_keeps_transitions_and_frees_the_lease() -> None:
    released = release(held(ME, transitions=7), WALL)
    assert released == LeaseRecord("", 1, STAMP, STAMP, 7)
    observation = Observation(None, 0.0).update(released, 0.0)
    assert acquire_or_renew(observation, OTHER, T, 0.0, WALL) == LeaseRecord(
        OTHER, 15, STAMP, STAMP, 8)  # a new holder: one more transition, as client-go counts


def test_lease_body_and_micro_time() -> None:
    body = lease_body("b8b2488c.x-k8s.io", "lws-system", LeaseRecord(ME, 15, STAMP, STAMP, 2),
                      "42")
    assert body == {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "b8b2488c.x-k8s.io", "namespace": "lws-system",
                     "resourceVersion": "42"},
        "spec": {"holderIdentity": ME, "leaseDurationSeconds": 15, "leaseTransitions": 2,
                 "acquireTime": STAMP, "renewTime": STAMP},
    }
    assert format_micro_time(WALL) == STAMP
    assert parse_micro_time(STAMP) == WALL
    assert LeaseRecord.from_lease(body) == LeaseRecord(ME, 15, STAMP, STAMP, 2)
    assert LeaseRecord.from_lease(None) is None


@pytest.mark.parametrize(("record", "seen_for", "expected"), [
    (None, 0.0, None),
    (LeaseRecord("", 1, STAMP, STAMP, 3), 0.0, None),
    (held(OTHER), 0.0, 15.0),
    (held(OTHER), 14.0, 1.0),
    (held(OTHER), 20.0, 0.0),
    (held(OTHER, duration=1), 0.5, 0.5),
])
def test_expires_in(record: LeaseRecord | None, seen_for: float,
                    expected: float | None) -> None:
    clock = ManualClock(7.0)
    observation = Observation(None, clock()).update(record, clock())
    clock.advance(seen_for)
    assert expires_in(observation, clock()) == expected


@pytest.mark.parametrize(("record", "seen_for", "blind"), [
    (None, 0.0, False),  # no Lease seen: read it first
    (LeaseRecord("", 1, STAMP, STAMP, 3), 0.0, False),  # released: a candidate reads
    (held(OTHER), 0.0, False),  # someone else's: never written without reading
    (held(ME), 0.0, True),  # our own, just written: renew with its resourceVersion
    (held(ME), 14.9, True),
    (held(ME), 15.0, False),  # a whole duration since: others may hold it by now
])
def test_may_renew_blind(record: LeaseRecord | None, seen_for: float, blind: bool) -> None:
    clock = ManualClock(1000.0)
    observation = Observation(None, clock()).update(record, clock())
    clock.advance(seen_for)
    assert may_renew_blind(observation, ME, T, clock()) is blind
