"""Pod termination policy (LWS docs "Pod Termination Policy"): which worker StatefulSets to stop."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.logic.failures.termination import worker_sets_to_stop

P = "leaderworkerset.sigs.k8s.io/"


def lws(policy: str | None) -> dict[str, Any]:
    spec = {"podTerminationPolicy": policy} if policy else {}
    return {"metadata": {"name": "s"}, "spec": spec}


def leader(name: str, uid: str = "", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": uid or f"uid-{name}",
                            "labels": {P + "worker-index": "0"}}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    return {"metadata": meta}


def workers(name: str, owner_uid: str = "", deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "uid": f"sts-{name}", "ownerReferences": [
        {"kind": "Pod", "name": name, "uid": owner_uid or f"uid-{name}", "controller": True}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    return {"metadata": meta}


LEADER_STS = {"metadata": {"name": "s", "uid": "lsts", "ownerReferences": [
    {"kind": "LeaderWorkerSet", "name": "s", "uid": "lws", "controller": True}]}}


@pytest.mark.parametrize(
    ("policy", "pods", "sets", "lws_deleting", "stopped"),
    [
        # Sequential (and unset): never; the garbage collector does it after the leader.
        ("Sequential", [leader("s-0", deleting=True)], [workers("s-0")], False, []),
        (None, [leader("s-0", deleting=True)], [workers("s-0")], True, []),
        # Parallel: the worker set of a terminating leader.
        ("Parallel", [leader("s-0", deleting=True), leader("s-1")],
         [workers("s-0"), workers("s-1")], False, ["s-0"]),
        # ... once (already deleting: nothing to do).
        ("Parallel", [leader("s-0", deleting=True)], [workers("s-0", deleting=True)], False, []),
        # A stale set: its leader is gone, or is a new incarnation (safe rebuild).
        ("Parallel", [], [workers("s-0")], False, ["s-0"]),
        ("Parallel", [leader("s-0", uid="new")], [workers("s-0")], False, ["s-0"]),
        # A live leader's own set stays.
        ("Parallel", [leader("s-0")], [workers("s-0")], False, []),
        # LeaderWorkerSet deletion: every worker set, never the leader StatefulSet.
        ("Parallel", [leader("s-0"), leader("s-1")], [LEADER_STS, workers("s-0"),
                                                      workers("s-1")], True, ["s-0", "s-1"]),
    ],
)
def test_worker_sets_to_stop(policy: str | None, pods: list[dict[str, Any]],
                             sets: list[dict[str, Any]], lws_deleting: bool,
                             stopped: list[str]) -> None:
    got = worker_sets_to_stop(lws(policy), pods, sets, lws_deleting=lws_deleting)
    assert [s["metadata"]["name"] for s in got] == stopped


def test_a_departed_lws_unknown_policy_stops_nothing() -> None:
    assert worker_sets_to_stop(None, [], [workers("s-0")], lws_deleting=True) == []
