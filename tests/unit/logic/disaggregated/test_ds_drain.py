"""Draining old DisaggregatedSet revisions (upstream's executor_test.go TestSortByNewestTimestamp
and TestScaleDownOld / TestScaleDownOldWithMissingRole, every case in order, and the scaleDownOld
table of the worked traces), plus the planner and the drain together over a simulated slice: the
mid-rollout A -> B -> C trace and the asymmetric coordinated drain, pass by pass."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from lws_operator.logic.disaggregated.drain import (
    OldLws,
    OldRevision,
    ScaleDown,
    newest_first,
    newest_timestamp,
    old_revision,
    parse_timestamp,
    scale_down_old,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ROLES = ("prefill", "decode")


def revision(name: str, minutes: int, *replicas: int,
             roles: Sequence[str] = ROLES) -> OldRevision:
    """Old revision ``name`` created ``minutes`` after T0, one LWS per role with ``replicas``."""
    members = tuple(OldLws(f"ds-0-{name}-{role}", role, r)
                    for role, r in zip(roles, replicas, strict=True))
    return OldRevision(name, T0 + timedelta(minutes=minutes), members)


def applied(revisions: Sequence[OldRevision], downs: list[ScaleDown]) -> dict[str, tuple[int, ...]]:
    """Each revision's replicas per member after the scale-downs."""
    to = {d.name: d.to for d in downs}
    return {r.revision: tuple(to.get(m.name, m.replicas) for m in r.members) for r in revisions}


# 95-100: TestSortByNewestTimestamp.
def test_sort_empty_list() -> None:
    assert newest_first([]) == []


def test_sort_single_workload() -> None:
    only = revision("a", 1, 1, 1)
    assert newest_first([only]) == [only]


def test_sort_three_workloads_unsorted() -> None:
    oldest, middle, newest = revision("o", 1, 1, 1), revision("m", 5, 1, 1), revision("n", 9, 1, 1)
    assert [r.revision for r in newest_first([middle, oldest, newest])] == ["n", "m", "o"]


def test_sort_four_workloads_unsorted() -> None:
    a, b, c, d = (revision(n, m, 1, 1) for n, m in (("a", 1), ("b", 2), ("c", 3), ("d", 4)))
    assert [r.revision for r in newest_first([b, d, a, c])] == ["d", "c", "b", "a"]


def test_sort_does_not_modify_the_original() -> None:
    given = [revision("a", 1, 1, 1), revision("b", 2, 1, 1)]
    before = list(given)
    out = newest_first(given)
    assert given == before
    assert out is not given
    assert [r.revision for r in out] == ["b", "a"]


def test_sort_uses_max_timestamp_across_roles() -> None:
    """A's newest LWS (20 min) is newer than all of B (10 min), though A's oldest is older."""
    def lws(name: str, role: str, minutes: int) -> dict[str, object]:
        return {"metadata": {"name": name, "labels": {"role": role},
                             "creationTimestamp": (T0 + timedelta(minutes=minutes))
                             .strftime("%Y-%m-%dT%H:%M:%SZ")},
                "spec": {"replicas": 2}}
    a = old_revision("a", [lws("a-p", "prefill", 1), lws("a-d", "decode", 20)], "role")
    b = old_revision("b", [lws("b-p", "prefill", 10), lws("b-d", "decode", 10)], "role")
    assert a.newest_created == T0 + timedelta(minutes=20)
    assert [r.revision for r in newest_first([b, a])] == ["a", "b"]


def test_sort_ties_are_deterministic() -> None:
    x, y = revision("x", 3, 1, 1), revision("y", 3, 1, 1)
    assert newest_first([x, y]) == newest_first([y, x])


def test_old_revision_reads_replicas_and_timestamps() -> None:
    rev = old_revision("r", [
        {"metadata": {"name": "ds-r-prefill", "labels": {"role": "prefill"},
                      "creationTimestamp": "2026-01-01T00:05:00Z"}, "spec": {}},
        {"metadata": {"name": "ds-r-decode", "labels": {"role": "decode"}},
         "spec": {"replicas": 0}},
    ], "role")
    assert rev.members == (OldLws("ds-r-prefill", "prefill", 1), OldLws("ds-r-decode", "decode", 0))
    assert rev.newest_created == T0 + timedelta(minutes=5)


@pytest.mark.parametrize(("value", "expected"), [
    ("2026-01-01T00:00:00Z", T0),
    ("2026-01-01T01:00:00+01:00", T0),
    (T0.replace(tzinfo=None), T0),
    ("not a time", datetime.min.replace(tzinfo=UTC)),
    (None, datetime.min.replace(tzinfo=UTC)),
])
def test_parse_timestamp(value: object, expected: datetime) -> None:
    assert parse_timestamp(value) == expected


def test_newest_timestamp_of_nothing_is_the_floor() -> None:
    assert newest_timestamp([]) == datetime.min.replace(tzinfo=UTC)


# 118-124: TestScaleDownOld (revisions oldest -> newest; budgets prefill, decode).
def test_scale_down_single_revision() -> None:
    revs = [revision("a", 1, 4, 4)]
    downs = scale_down_old(revs, ROLES, (2, 2))
    assert downs == [ScaleDown("prefill", "ds-0-a-prefill", 4, 2),
                     ScaleDown("decode", "ds-0-a-decode", 4, 2)]
    assert downs[0].message == "Scaling down prefill LWS ds-0-a-prefill from 4 to 2 replicas"


def test_scale_down_newest_first() -> None:
    revs = [revision("oldest", 1, 2, 2), revision("newer", 2, 2, 2)]
    assert applied(revs, scale_down_old(revs, ROLES, (2, 2))) == {"oldest": (2, 2),
                                                                  "newer": (0, 0)}


def test_scale_down_coordinated_drain_when_one_role_reaches_zero() -> None:
    revs = [revision("a", 1, 3, 2)]
    assert applied(revs, scale_down_old(revs, ROLES, (1, 2))) == {"a": (0, 0)}


def test_scale_down_partial() -> None:
    revs = [revision("a", 1, 6, 6)]
    assert applied(revs, scale_down_old(revs, ROLES, (2, 2))) == {"a": (4, 4)}


def test_scale_down_three_revisions() -> None:
    revs = [revision("oldest", 1, 2, 2), revision("middle", 2, 2, 2), revision("newest", 3, 2, 2)]
    downs = scale_down_old(revs, ROLES, (4, 4))
    assert applied(revs, downs) == {"oldest": (2, 2), "middle": (0, 0), "newest": (0, 0)}
    assert [d.name for d in downs] == ["ds-0-newest-prefill", "ds-0-newest-decode",
                                       "ds-0-middle-prefill", "ds-0-middle-decode"]


def test_scale_down_asymmetric_sizes_newest_pays() -> None:
    revs = [revision("A", 1, 1, 2), revision("B", 2, 3, 3)]
    assert applied(revs, scale_down_old(revs, ROLES, (1, 1))) == {"A": (1, 2), "B": (2, 2)}


def test_scale_down_newer_bigger_than_oldest() -> None:
    revs = [revision("oldest", 1, 1, 1), revision("newer", 2, 3, 3)]
    assert applied(revs, scale_down_old(revs, ROLES, (2, 2))) == {"oldest": (1, 1),
                                                                  "newer": (1, 1)}


# 125-127: TestScaleDownOldWithMissingRole (universe prefill, decode, encode; encode absent).
UNIVERSE = ("prefill", "decode", "encode")


@pytest.mark.parametrize(("budget", "expected"), [
    ((0, 1, 0), (4, 3)),
    ((1, 1, 0), (3, 3)),
    ((4, 0, 0), (0, 0)),
], ids=["absent_role_never_triggers", "drains_present_roles", "present_role_triggers"])
def test_scale_down_old_with_missing_role(budget: tuple[int, int, int],
                                          expected: tuple[int, int]) -> None:
    revs = [revision("a", 1, 4, 4)]
    assert applied(revs, scale_down_old(revs, UNIVERSE, budget)) == {"a": expected}


def test_budget_by_role_name() -> None:
    revs = [revision("a", 1, 4, 4)]
    assert scale_down_old(revs, UNIVERSE, {"decode": 1}) == [
        ScaleDown("decode", "ds-0-a-decode", 4, 3)]


def test_budget_must_align_with_roles() -> None:
    with pytest.raises(ValueError, match="one budget per role"):
        scale_down_old([], ROLES, (1,))


def test_coordination_keeps_the_forced_roles_budget_for_the_older_revision() -> None:
    """3.9(e), pass 4 of the asymmetric trace: B decode 1 -> 0 triggers, B prefill is forced to 0
    by coordination and keeps its budget, which then drains A's prefill (triggering A too)."""
    revs = [revision("A", 1, 1, 2), revision("B", 2, 2, 1)]
    downs = scale_down_old(revs, ROLES, (1, 1))
    assert applied(revs, downs) == {"A": (0, 0), "B": (0, 0)}


def test_no_positive_budget_does_nothing() -> None:
    revs = [revision("a", 1, 0, 3)]
    assert scale_down_old(revs, ROLES, (0, -1)) == []


def test_a_half_drained_revision_finishes_with_any_budget() -> None:
    """A revision with one role already at 0 (budget 0 there) goes to 0 entirely once any budget
    is positive: the 0 role triggers."""
    revs = [revision("a", 1, 0, 3)]
    assert applied(revs, scale_down_old(revs, ROLES, (0, 1))) == {"a": (0, 0)}


def test_negative_budget_never_scales_up_nor_triggers() -> None:
    revs = [revision("a", 1, 0, 3)]
    assert applied(revs, scale_down_old(revs, ROLES, (-1, 1))) == {"a": (0, 2)}
