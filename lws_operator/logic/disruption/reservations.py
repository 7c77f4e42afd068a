"""The group disruption budget's reservations, shared by every operator replica (ours).

An allowed eviction of a pod of a healthy group must count that group as disrupted at once, for
every replica that answers the next eviction, although no watch cache shows the pod going yet.
A PodDisruptionBudget does this by recording the disruption in the PDB's status under optimistic
concurrency; here a reservation is recorded in an annotation of the LeaderWorkerSet
(:data:`~lws_operator.api.constants.EVICTION_RESERVATIONS_ANNOTATION`), written with a merge
patch that carries the resourceVersion the decision read. Two replicas deciding at the same
moment from the same version cannot both write: the second gets a conflict, reads the set again
and decides again, now seeing the first's reservation (``admission.eviction``).

The annotation's value is JSON, one entry per reserved group::

    {"1": {"uid": "<the evicted pod's uid>", "expires": "2026-12-06T09:30:00.123Z"}}

A reservation counts the group as disrupted while it has not expired and the evicted pod is
still in the deciding replica's cache and not being deleted: once that replica sees the pod
going, the pod itself counts the group (``logic.disruption.budget.disrupted_groups``), and once the
pod is gone and the group is whole and Ready again, nothing holds it any more. A write keeps
every entry that has not expired, so that a replica whose cache lags behind the writer's still
finds the reservation: only expiry removes entries, and a set holds at most one per group.
Expiry is wall-clock time, compared across replicas: a replica's clock ahead of the others'
shortens a reservation by its skew, and a reservation only has to last until the watch caches
show the eviction (``RESERVATION_SECONDS``).

Everything here is plain data in, plain data out.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.api.constants import EVICTION_RESERVATIONS_ANNOTATION
from lws_operator.logic.disruption.budget import RESERVATION_SECONDS, Decision, decide

__all__ = [
    "Plan",
    "Reservation",
    "format_reservations",
    "live_groups",
    "parse_reservations",
    "plan",
    "reservation_patch",
]


@dataclass(frozen=True)
class Reservation:
    """One allowed eviction of a healthy group's pod, until the caches show it."""

    uid: str
    expires: float  # seconds since the epoch


@dataclass(frozen=True)
class Plan:
    """The answer, and the reservations to write before giving it (None: write nothing)."""

    decision: Decision
    write: dict[str, Reservation] | None


def _timestamp(seconds: float) -> str:
    moment = dt.datetime.fromtimestamp(seconds, dt.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _seconds(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None
    return moment.timestamp()


def parse_reservations(annotations: Mapping[str, Any]) -> dict[str, Reservation]:
    """The reservations recorded on a set. An entry that cannot be read is left out: only the
    operator writes the annotation, and a set edited by hand is guarded by its pods alone."""
    raw = annotations.get(EVICTION_RESERVATIONS_ANNOTATION)
    if not isinstance(raw, str):
        return {}
    try:
        entries = json.loads(raw)
    except ValueError:
        return {}
    if not isinstance(entries, dict):
        return {}
    out: dict[str, Reservation] = {}
    for group, entry in entries.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("uid"), str):
            continue
        expires = _seconds(entry.get("expires"))
        if expires is not None:
            out[str(group)] = Reservation(entry["uid"], expires)
    return out


def format_reservations(reservations: Mapping[str, Reservation]) -> str:
    """The annotation's value: compact JSON, groups in a stable order."""
    return json.dumps({g: {"uid": r.uid, "expires": _timestamp(r.expires)}
                       for g, r in sorted(reservations.items())}, separators=(",", ":"))


def live_groups(reservations: Mapping[str, Reservation], pods: Mapping[str, Mapping[str, Any]],
                now: float) -> set[str]:
    """The groups a reservation holds now: not expired, and the evicted pod (by uid, in
    ``pods``) still cached and not being deleted."""
    out = set()
    for group, reservation in reservations.items():
        pod = pods.get(reservation.uid)
        if reservation.expires > now and pod is not None \
                and not (pod.get("metadata") or {}).get("deletionTimestamp"):
            out.add(group)
    return out


def plan(*, reservations: Mapping[str, Reservation], pods: Mapping[str, Mapping[str, Any]],
         observed: set[str], group: str | None, uid: str, budget: int, now: float,
         set_name: str) -> Plan:
    """The budget's answer for an eviction of pod ``uid`` of ``group``, counting as disrupted
    what the cache shows (``observed``) and what the reservations hold; and, when it allows a
    healthy group to go, the reservations to write first: those not expired, and the new one."""
    held = live_groups(reservations, pods, now)
    decision = decide(group=group, budget=budget, disrupted=observed | held, set_name=set_name)
    if not decision.reserve or group is None:
        return Plan(decision, None)
    kept = {g: r for g, r in reservations.items() if r.expires > now}
    kept[group] = Reservation(uid, now + RESERVATION_SECONDS)
    return Plan(decision, kept)


def reservation_patch(reservations: Mapping[str, Reservation],
                      resource_version: str) -> dict[str, Any]:
    """A merge patch writing ``reservations``, refused with 409 Conflict unless the set is
    still at ``resource_version`` (the version the decision read)."""
    return {"metadata": {"resourceVersion": resource_version, "annotations": {
        EVICTION_RESERVATIONS_ANNOTATION: format_reservations(reservations)}}}
