"""``logic.disruption.reservations``: which reservations hold a group, whether an eviction fits the
budget with them, and what is written."""

from __future__ import annotations

import json
from typing import Any

import pytest

from lws_operator.api.constants import EVICTION_RESERVATIONS_ANNOTATION as KEY
from lws_operator.logic.disruption.budget import RESERVATION_SECONDS
from lws_operator.logic.disruption.reservations import (
    Reservation,
    format_reservations,
    live_groups,
    parse_reservations,
    plan,
    reservation_patch,
)

T = 1_800_000_000.0  # 2027-01-15T08:00:00Z


def pod(uid: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"uid": uid}
    if deleting:
        meta["deletionTimestamp"] = "2027-01-15T08:00:00Z"
    return {"metadata": meta}


def test_the_annotation_round_trips_to_the_millisecond() -> None:
    held = {"2": Reservation("u2", T + 10.25), "10": Reservation("u10", T)}
    text = format_reservations(held)
    assert json.loads(text) == {"10": {"uid": "u10", "expires": "2027-01-15T08:00:00.000Z"},
                                "2": {"uid": "u2", "expires": "2027-01-15T08:00:10.250Z"}}
    assert parse_reservations({KEY: text}) == held


@pytest.mark.parametrize("value", [
    None, 3, "", "not json", "[]", '{"1": "soon"}', '{"1": {"uid": 7, "expires": "x"}}',
    '{"1": {"uid": "u", "expires": "2027-01-15T08:00:00"}}',  # no zone: not ours
    '{"1": {"uid": "u", "expires": "tomorrow"}}',
])
def test_what_cannot_be_read_holds_nothing(value: Any) -> None:
    annotations = {} if value is None else {KEY: value}
    assert parse_reservations(annotations) == {}


def test_a_readable_entry_survives_a_broken_neighbour() -> None:
    text = json.dumps({"0": {"uid": "u0", "expires": "2027-01-15T08:00:05Z"}, "1": "junk"})
    assert parse_reservations({KEY: text}) == {"0": Reservation("u0", T + 5)}


@pytest.mark.parametrize(("pods", "now", "held"), [
    ({"u0": pod("u0")}, T, {"0"}),  # the eviction not seen yet: held
    ({"u0": pod("u0", deleting=True)}, T, set()),  # seen going: the pod counts it now
    ({}, T, set()),  # gone (and the group recreated): nothing holds it
    ({"u0": pod("u0")}, T + 10, set()),  # expired: an eviction refused after us
])
def test_live_groups(pods: dict[str, Any], now: float, held: set[str]) -> None:
    assert live_groups({"0": Reservation("u0", T + 10)}, pods, now) == held


@pytest.mark.parametrize(("reserved", "observed", "group", "budget", "allowed", "written"), [
    # Nothing disrupted: the first healthy group goes and is reserved.
    ({}, set(), "1", 1, True, {"1"}),
    # A live reservation counts: the next healthy group is refused, nothing written.
    ({"0": Reservation("u0", T + 5)}, set(), "1", 1, False, None),
    # ... and fits a budget of two, written next to the first.
    ({"0": Reservation("u0", T + 5)}, set(), "1", 2, True, {"0", "1"}),
    # A group already disrupted (by the cache or a reservation) goes without a write.
    ({}, {"1"}, "1", 1, True, None),
    ({"1": Reservation("u1", T + 5)}, set(), "1", 1, True, None),
    # Expired reservations neither count nor are written again.
    ({"0": Reservation("u0", T - 1)}, set(), "1", 1, True, {"1"}),
    # A reservation whose pod this replica sees going is not counted twice, but kept for
    # replicas whose caches lag.
    ({"0": Reservation("gone", T + 5)}, {"0"}, "1", 2, True, {"0", "1"}),
    # A pod in no counted group: allowed, nothing reserved.
    ({}, set(), None, 0, True, None),
    # A budget of 0 refuses every healthy group.
    ({}, set(), "1", 0, False, None),
])
def test_plan(reserved: dict[str, Reservation], observed: set[str], group: str | None,
              budget: int, allowed: bool, written: set[str] | None) -> None:
    pods = {"u0": pod("u0"), "u1": pod("u1"), "new": pod("new")}
    got = plan(reservations=reserved, pods=pods, observed=observed, group=group, uid="new",
               budget=budget, now=T, set_name="ns/s")
    assert got.decision.allowed is allowed
    assert (None if got.write is None else set(got.write)) == written
    if got.write is not None and group is not None:
        assert got.write[group] == Reservation("new", T + RESERVATION_SECONDS)


def test_the_patch_carries_the_version_it_was_decided_on() -> None:
    body = reservation_patch({"1": Reservation("u", T)}, "4711")
    assert body["metadata"]["resourceVersion"] == "4711"
    assert parse_reservations(body["metadata"]["annotations"]) == {"1": Reservation("u", T)}
