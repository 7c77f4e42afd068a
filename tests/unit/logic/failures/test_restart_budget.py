"""Restart budget and backoff (LWS docs "Limit Automatic Group Recreation",
"Group Restart Backoff")."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from lws_operator.logic.failures.restart import Recreation
from lws_operator.logic.failures.restart_budget import (
    CLEANUP_FINALIZER,
    RestartLimits,
    apply_degraded,
    degraded_condition,
    limits_of,
    plan_release,
    plan_restarts,
    read_counted,
    read_counts,
    render_counts,
    settled_counts,
    still_pending,
    unfinished_exhaustions,
    without_finalizer,
)

P = "leaderworkerset.sigs.k8s.io/"
NOW = dt.datetime(2026, 11, 29, 10, 0, 0, tzinfo=dt.UTC).timestamp()


def ago(seconds: float) -> str:
    return dt.datetime.fromtimestamp(NOW - seconds, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def lws(counts: str | None = None, **template: Any) -> dict[str, Any]:
    annotations = {P + "group-restart-counts": counts} if counts is not None else {}
    return {"metadata": {"name": "s", "annotations": annotations},
            "spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 2, **template}}}


def recreation(group: str = "1", age: float = 1000, uid: str = "") -> Recreation:
    return Recreation(f"s-{group}", uid or f"uid-s-{group}", f"s-{group}-1", group, "rev",
                      ago(age))


@pytest.mark.parametrize(("raw", "expected"), [
    (None, {}),
    ('{"abc123/0":3}', {"abc123/0": 3}),
    ('{"a/0":1,"b/2":0}', {"a/0": 1, "b/2": 0}),
    ("not json", {}),
    ("[1, 2]", {}),
    ('{"a/0":-1,"a/1":"2","a/2":true,"a/3":4}', {"a/3": 4}),  # hand-edited junk is ignored
])
def test_read_counts(raw: str | None, expected: dict[str, int]) -> None:
    assert read_counts(lws(raw)) == expected


def test_render_counts_is_compact_and_sorted() -> None:
    assert render_counts({"b/1": 2, "abc123/0": 3}) == '{"abc123/0":3,"b/1":2}'


@pytest.mark.parametrize(("counts", "replicas", "expected"), [
    ({}, 3, None),
    ({"new/0": 1, "new/2": 2}, 3, None),  # nothing to drop: no write
    ({"old/0": 1, "new/1": 2}, 3, {"new/1": 2}),  # the rollout left revision "old"
    ({"new/0": 1, "new/3": 2, "new/10": 1}, 3, {"new/0": 1}),  # groups 3 and 10 scaled away
    ({"new/0": 1, "junk": 4, "new/x": 1}, 3, {"new/0": 1}),  # keys no group can own
    ({"old/0": 1}, 0, {}),  # scaled to zero: the annotation goes
])
def test_settled_counts_keep_what_a_group_can_still_spend(
        counts: dict[str, int], replicas: int, expected: dict[str, int] | None) -> None:
    assert settled_counts(counts, "new", replicas) == expected


@pytest.mark.parametrize(("template", "limits"), [
    ({}, RestartLimits(None, None, None)),
    ({"maxGroupRestarts": 0}, RestartLimits(0, None, None)),
    ({"restartBackoff": {}}, RestartLimits(None, 10.0, 300.0)),
    ({"restartBackoff": {"baseSeconds": 2, "capSeconds": 5}, "maxGroupRestarts": 4},
     RestartLimits(4, 2.0, 5.0)),
])
def test_limits_of(template: dict[str, Any], limits: RestartLimits) -> None:
    assert limits_of(lws(**template)) == limits


@pytest.mark.parametrize(("count", "delay"), [(0, 10), (1, 20), (2, 40), (4, 160), (5, 300),
                                              (100, 300)])
def test_backoff_delay_doubles_up_to_the_cap(count: int, delay: float) -> None:
    assert RestartLimits(None, 10, 300).delay(count) == delay


NO_LIMITS: dict[str, Any] = {}
BUDGET_2 = {"maxGroupRestarts": 2}
BUDGET_0 = {"maxGroupRestarts": 0}
BACKOFF = {"restartBackoff": {"baseSeconds": 10, "capSeconds": 300}}


@pytest.mark.parametrize(
    ("template", "counts", "age", "outcome", "new_counts", "requeue"),
    [
        # Unlimited, no backoff: recreate, count nothing, write nothing (upstream).
        (NO_LIMITS, None, 1, "recreate", None, None),
        # Budget: recreate and count while below it, then exhaust.
        (BUDGET_2, None, 1, "recreate", {"rev/1": 1}, None),
        (BUDGET_2, '{"rev/1":1}', 1, "recreate", {"rev/1": 2}, None),
        (BUDGET_2, '{"rev/1":2}', 1, "exhaust", None, None),
        (BUDGET_0, None, 1, "exhaust", None, None),
        # The count is per revision: another revision's count does not apply.
        (BUDGET_2, '{"old/1":2}', 1, "recreate", {"old/1": 2, "rev/1": 1}, None),
        # Backoff: the group must be base * 2^count old (from its leader's creation).
        (BACKOFF, None, 4, "defer", None, 6.0),
        (BACKOFF, None, 10, "recreate", {"rev/1": 1}, None),
        (BACKOFF, '{"rev/1":2}', 30, "defer", None, 10.0),
        (BACKOFF, '{"rev/1":9}', 299, "defer", None, 1.0),  # capped at 300
        (BACKOFF, '{"rev/1":9}', 300, "recreate", {"rev/1": 10}, None),
        # Out of budget is not deferred.
        ({**BACKOFF, **BUDGET_2}, '{"rev/1":2}', 1, "exhaust", None, None),
        ({**BACKOFF, **BUDGET_2}, '{"rev/1":1}', 1, "defer", None, 19.0),
    ],
)
def test_plan_restarts(template: dict[str, Any], counts: str | None, age: float, outcome: str,
                       new_counts: dict[str, int] | None, requeue: float | None) -> None:
    r = recreation(age=age)
    plan = plan_restarts(lws(counts, **template), [r], NOW)
    got = {"recreate": plan.recreate, "exhaust": plan.exhaust,
           "defer": [d.recreation for d in plan.deferred]}
    assert got == {k: ([r] if k == outcome else []) for k in got}
    assert plan.counts == new_counts
    assert plan.requeue_after == requeue


def test_a_deferral_says_how_long_and_how_many() -> None:
    plan = plan_restarts(lws('{"rev/1":1}', **BACKOFF), [recreation(age=5)], NOW)
    [deferral] = plan.deferred
    assert (deferral.remaining, deferral.count) == (15, 1)
    assert deferral.note == ("Recreation of group 1 (pod s-1-1 failed) deferred by restart "
                             "backoff: 15s remaining, restart count 1")


def test_two_groups_are_counted_apart() -> None:
    plan = plan_restarts(lws('{"rev/0":1}', **BUDGET_2), [recreation("0"), recreation("2")], NOW)
    assert [r.group for r in plan.recreate] == ["0", "2"]
    assert plan.counts == {"rev/0": 2, "rev/2": 1}


def pod(name: str, *, worker: int = 0, group: str = "1", rev: str = "rev", uid: str = "",
        deleting: bool = False, exhausted: bool = False, recover: bool = False,
        finalizers: tuple[str, ...] = ()) -> dict[str, Any]:
    annotations = {}
    if exhausted:
        annotations[P + "group-restart-budget-exhausted"] = "true"
    if recover:
        annotations[P + "recover"] = "true"
    meta: dict[str, Any] = {
        "name": name, "uid": uid or f"uid-{name}", "annotations": annotations,
        "finalizers": list(finalizers), "creationTimestamp": ago(100),
        "labels": {P + "worker-index": str(worker), P + "group-index": group,
                   P + "template-revision-hash": rev}}
    if deleting:
        meta["deletionTimestamp"] = ago(0)
    return {"metadata": meta, "status": {"phase": "Running"}}


def test_deferred_recreations_are_kept_while_their_leader_lives() -> None:
    deferred = [recreation("1"), recreation("2")]
    pods = [pod("s-1"), pod("s-2", group="2", uid="uid-new")]  # group 2: a new incarnation
    fresh = [recreation("0")]
    assert [r.group for r in still_pending(deferred, [*pods, pod("s-0", group="0")], fresh)] == [
        "0", "1"]
    assert still_pending(deferred, [pod("s-1", deleting=True)], []) == []


def test_a_half_done_exhaustion_is_finished() -> None:
    pods = [pod("s-1", exhausted=True), pod("s-2", group="2", exhausted=True, deleting=True),
            pod("s-0", group="0"), pod("s-1-1", worker=1, exhausted=True)]
    assert [r.leader for r in unfinished_exhaustions(pods)] == ["s-1"]


KEPT = (CLEANUP_FINALIZER,)


def retained_group(group: str = "1", rev: str = "rev", **leader: Any) -> list[dict[str, Any]]:
    return [pod(f"s-{group}", group=group, rev=rev, exhausted=True, deleting=True,
                finalizers=KEPT, **leader),
            pod(f"s-{group}-1", worker=1, group=group, rev=rev, deleting=True, finalizers=KEPT)]


@pytest.mark.parametrize(
    ("pods", "kwargs", "released", "cleared"),
    [
        # Nothing retained: nothing to do.
        ([pod("s-1")], {}, [], []),
        # Retained and left alone: same revision, within replicas, no recover annotation.
        (retained_group(), {}, [], []),
        # Recover: the group is released and its count cleared.
        (retained_group(recover=True), {}, ["s-1", "s-1-1"], ["rev/1"]),
        # Scale-down below the group: released, count kept.
        (retained_group(), {"replicas": 1}, ["s-1", "s-1-1"], []),
        # Rollout: another revision at or above the partition is released; below it, kept.
        (retained_group(rev="old"), {}, ["s-1", "s-1-1"], []),
        (retained_group(rev="old"), {"partition": 2}, [], []),
        # LeaderWorkerSet deletion: everything retained.
        ([*retained_group(), *retained_group("2")], {"deleting": True},
         ["s-1", "s-1-1", "s-2", "s-2-1"], []),
        # Retained workers whose leader is gone already go too.
        (retained_group()[1:], {}, ["s-1-1"], []),
    ],
)
def test_plan_release(pods: list[dict[str, Any]], kwargs: dict[str, Any], released: list[str],
                      cleared: list[str]) -> None:
    args: dict[str, Any] = {"replicas": 3, "current_key": "rev", "partition": 0, **kwargs}
    release = plan_release(pods, **args)
    assert [p["metadata"]["name"] for p in release.pods] == released
    assert release.clear_counts == cleared


def test_without_finalizer_keeps_the_others() -> None:
    kept = pod("s-1", finalizers=("foregroundDeletion", CLEANUP_FINALIZER))
    assert without_finalizer(kept) == ["foregroundDeletion"]


def test_degraded_while_a_group_is_exhausted_then_false() -> None:
    exhausted = retained_group()
    cond = degraded_condition(exhausted, [], 3, "T1")
    assert cond is not None
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"],
            cond["observedGeneration"]) == ("True", "ReplicaRestartBudgetExceeded", "T1", 3)
    assert "group 1)" in cond["message"]
    # Unchanged while it lasts (no write per pass).
    assert degraded_condition(exhausted, [cond], 3, "T2") == cond
    recovered = degraded_condition([pod("s-1")], [cond], 3, "T3")
    assert recovered is not None
    assert (recovered["status"], recovered["reason"], recovered["lastTransitionTime"]) == (
        "False", "RestartBudgetAvailable", "T3")
    # Never exhausted: no condition at all.
    assert degraded_condition([pod("s-1")], [], 3, "T4") is None


def test_apply_degraded_keeps_the_order_and_leaves_others_alone() -> None:
    status = {"conditions": [{"type": "Degraded", "status": "True"}, {"type": "Available"}]}
    out = apply_degraded(status, [pod("s-1")], 1, "T")
    assert [c["type"] for c in out["conditions"]] == ["Degraded", "Available"]
    assert out["conditions"][0]["status"] == "False"
    untouched = {"conditions": [{"type": "Available"}]}
    assert apply_degraded(untouched, [pod("s-1")], 1, "T") is untouched


def counted_lws(counts: str, counted: str, **template: Any) -> dict[str, Any]:
    out = lws(counts, **template)
    out["metadata"]["annotations"][P + "group-restart-counted-leaders"] = counted
    return out


def test_a_recreation_is_counted_with_its_leader() -> None:
    plan = plan_restarts(lws('{"rev/0":1}', **BUDGET_2), [recreation("0", uid="u1")], NOW)
    assert plan.counts == {"rev/0": 2}
    assert plan.counted == {"rev/0": "u1"}


def test_a_recreation_counted_by_a_pass_that_died_is_not_counted_again() -> None:
    """The count was written, the leader not deleted (the operator died in between): the same
    leader's failure is recreated, not counted again and not taken for an exhausted budget."""
    r = recreation("1", uid="u1")
    plan = plan_restarts(counted_lws('{"rev/1":2}', '{"rev/1":"u1"}', **BUDGET_2), [r], NOW)
    assert (plan.recreate, plan.exhaust, plan.counts, plan.counted) == ([r], [], None, None)


def test_a_later_incarnation_counts_again() -> None:
    r = recreation("1", uid="u2")
    plan = plan_restarts(counted_lws('{"rev/1":1}', '{"rev/1":"u1","gone/1":"u0"}', **BUDGET_2),
                         [r], NOW)
    assert plan.recreate == [r]
    assert plan.counts == {"rev/1": 2}
    assert plan.counted == {"rev/1": "u2"}  # the record of a count no longer kept goes too
    exhausted = plan_restarts(counted_lws('{"rev/1":2}', '{"rev/1":"u1"}', **BUDGET_2), [r], NOW)
    assert exhausted.exhaust == [r]


@pytest.mark.parametrize("raw", [None, "", "not json", "[1]", '{"rev/1":3}'])
def test_unreadable_counted_leaders_count_as_none(raw: str | None) -> None:
    obj = lws('{"rev/1":1}', **BUDGET_2)
    if raw is not None:
        obj["metadata"]["annotations"][P + "group-restart-counted-leaders"] = raw
    assert read_counted(obj) == {}
    assert plan_restarts(obj, [recreation("1")], NOW).counts == {"rev/1": 2}
