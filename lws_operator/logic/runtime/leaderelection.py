"""Leader election decisions on a coordination.k8s.io/v1 Lease, as client-go's leaderelection
makes them: who may take the lease, what to write, and when a leader must give up.

Expiry is judged on the local clock, from when this replica last *saw the record change*
(client-go's observedTime), never from the ``renewTime`` written by another machine: replicas'
wall clocks may disagree, monotonic time on one machine does not. A candidate therefore waits a
full ``leaseDuration`` after the holder's last visible renewal before taking over.

Pure: the Lease arrives as a dict, times as numbers (monotonic seconds) and datetimes (for the
MicroTime fields written into the Lease).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "JITTER_FACTOR",
    "LeaseRecord",
    "Observation",
    "Timings",
    "acquire_or_renew",
    "expires_in",
    "format_micro_time",
    "lease_body",
    "may_renew_blind",
    "parse_micro_time",
    "release",
    "renew_deadline_passed",
]

# client-go waits retryPeriod * (1 + rand * JITTER_FACTOR) between attempts to acquire.
JITTER_FACTOR = 1.2


@dataclass(frozen=True)
class Timings:
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def validate(self) -> None:
        """client-go's checks: a leader must give up (renew deadline) before others may take
        the lease (lease duration), and must get more than one retry within its deadline."""
        if self.lease_duration <= self.renew_deadline:
            raise ValueError("leaseDuration must be greater than renewDeadline")
        if self.renew_deadline <= JITTER_FACTOR * self.retry_period:
            raise ValueError("renewDeadline must be greater than retryPeriod*1.2")
        if self.retry_period <= 0:
            raise ValueError("retryPeriod must be greater than zero")


@dataclass(frozen=True)
class LeaseRecord:
    """The election-relevant part of a Lease's spec."""

    holder: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def from_lease(cls, lease: Mapping[str, Any] | None) -> LeaseRecord | None:
        if lease is None:
            return None
        spec = lease.get("spec") or {}
        return cls(
            holder=str(spec.get("holderIdentity") or ""),
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )


@dataclass(frozen=True)
class Observation:
    """The record last read and when (local monotonic seconds) it was first seen as it is."""

    record: LeaseRecord | None
    observed_at: float

    def update(self, record: LeaseRecord | None, now: float) -> Observation:
        """The observation after reading ``record`` at ``now``: the clock restarts only when
        the record changed (a renewal changes ``renew_time``)."""
        if record == self.record:
            return self
        return Observation(record, now)


def format_micro_time(when: dt.datetime) -> str:
    """A Kubernetes MicroTime: UTC, microseconds, ``Z``."""
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_micro_time(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))


def _expired(observation: Observation, now: float) -> bool:
    record = observation.record
    if record is None or not record.holder:
        return True
    # The holder's own duration: a released lease (duration 1) frees up within a second.
    duration = record.lease_duration_seconds if record.lease_duration_seconds > 0 else 0
    return observation.observed_at + duration <= now


def expires_in(observation: Observation, now: float) -> float | None:
    """Seconds until another holder's lease expires as seen from here (0 if it has), or None
    when nobody else holds it. A candidate may look again right then instead of waiting for
    its next retry, which shortens a takeover by up to a retry period."""
    record = observation.record
    if record is None or not record.holder:
        return None
    return max(0.0, observation.observed_at + max(0, record.lease_duration_seconds) - now)


def acquire_or_renew(observation: Observation, identity: str, timings: Timings,
                     now: float, wall: dt.datetime) -> LeaseRecord | None:
    """The record to write to take or keep the lease, or None while another holder's lease is
    valid. Writing it must be conditional on the resourceVersion read with the observation."""
    record = observation.record
    if record is not None and record.holder and record.holder != identity \
            and not _expired(observation, now):
        return None
    stamp = format_micro_time(wall)
    duration = max(1, math.ceil(timings.lease_duration))
    if record is not None and record.holder == identity:
        return LeaseRecord(identity, duration, record.acquire_time or stamp, stamp,
                           record.transitions)
    # As client-go counts: every change of holder, a take-over after a release included.
    transitions = 0 if record is None else record.transitions + 1
    return LeaseRecord(identity, duration, stamp, stamp, transitions)


def may_renew_blind(observation: Observation, identity: str, timings: Timings,
                    now: float) -> bool:
    """Whether a leader may renew without reading the Lease first (client-go's optimistic
    update): the record last seen is its own, written or read less than a lease duration ago by
    the local clock. The write still carries the resourceVersion of that record, so it succeeds
    only if nobody wrote the Lease since; any other answer sends the leader back to reading it
    and deciding as a candidate would (``acquire_or_renew``), so a Lease someone else holds is
    never written over. A renewal then costs one request, not a GET and a PUT."""
    record = observation.record
    return record is not None and record.holder == identity \
        and now < observation.observed_at + timings.lease_duration


def renew_deadline_passed(last_renewed: float, timings: Timings, now: float) -> bool:
    """A leader that has not renewed for ``renew_deadline`` must stop acting as leader: others
    may take the lease ``lease_duration`` after its last renewal, and the margin between the
    two is what keeps two leaders from overlapping."""
    return now - last_renewed >= timings.renew_deadline


def release(record: LeaseRecord, wall: dt.datetime) -> LeaseRecord:
    """The record a leader writes when it steps down (client-go's ReleaseOnCancel): no holder,
    a one-second duration, transitions kept."""
    stamp = format_micro_time(wall)
    return LeaseRecord("", 1, stamp, stamp, record.transitions)


def lease_body(name: str, namespace: str, record: LeaseRecord,
               resource_version: str | None = None) -> dict[str, Any]:
    """A whole Lease object carrying ``record`` (an update replaces the spec, and the
    ``resourceVersion`` makes it conditional)."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if resource_version:
        metadata["resourceVersion"] = resource_version
    spec: dict[str, Any] = {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": record.lease_duration_seconds,
        "leaseTransitions": record.transitions,
    }
    if record.acquire_time:
        spec["acquireTime"] = record.acquire_time
    if record.renew_time:
        spec["renewTime"] = record.renew_time
    return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
            "spec": spec}
