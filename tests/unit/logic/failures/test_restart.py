"""Group restart policies (upstream's handleRestartPolicy, pod_controller.go): which failures
recreate which group."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.logic.failures.restart import (
    apply_unschedulable,
    pending_state,
    plan_recreations,
    restarted,
    scan_failures,
)

P = "leaderworkerset.sigs.k8s.io/"


def lws(policy: str | None = None, size: int = 3, after_start: bool = False) -> dict[str, Any]:
    template: dict[str, Any] = {"size": size}
    if policy:
        template["restartPolicy"] = policy
    annotations = {P + "experimental-recreate-group-after-start": ""} if after_start else {}
    return {"metadata": {"name": "s", "annotations": annotations},
            "spec": {"leaderWorkerTemplate": template}}


def pod(name: str, *, worker: int = 0, group: str = "0", key: str = "k1", uid: str = "",
        phase: str = "Running", restarts: int = 0, deleting: bool = False,
        owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name, "uid": uid or f"uid-{name}",
        "labels": {P + "worker-index": str(worker), P + "group-index": group,
                   P + "template-revision-hash": key},
        "ownerReferences": [owner] if owner else [],
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-11-29T10:00:00Z"
    return {"metadata": meta, "status": {"phase": phase, "containerStatuses": [
        {"name": "c", "restartCount": restarts}]}}


def sts_owned_by(leader: dict[str, Any], name: str = "s-0", uid: str = "sts-0") -> dict[str, Any]:
    return {"metadata": {"name": name, "uid": uid, "ownerReferences": [{
        "kind": "Pod", "name": leader["metadata"]["name"], "uid": leader["metadata"]["uid"],
        "controller": True}]}}


STS_OWNER = {"kind": "StatefulSet", "name": "s-0", "uid": "sts-0", "controller": True}


def group(**worker: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    leader = pod("s-0")
    workers = [pod(f"s-0-{i}", worker=i, owner=STS_OWNER, **(worker if i == 1 else {}))
               for i in (1, 2)]
    return [leader, *workers], [sts_owned_by(leader)]


@pytest.mark.parametrize(
    ("phase", "restarts", "expected"),
    [("Running", 1, True), ("Pending", 2, True), ("Running", 0, False), ("Failed", 3, False),
     ("Succeeded", 1, False)],
)
def test_restarted(phase: str, restarts: int, expected: bool) -> None:
    assert restarted(pod("p", phase=phase, restarts=restarts)) is expected


def test_a_worker_restart_recreates_the_group() -> None:
    pods, sts = group(restarts=1)
    [recreation] = plan_recreations(lws(), pods, sts)
    assert (recreation.leader, recreation.leader_uid, recreation.trigger, recreation.group) == (
        "s-0", "uid-s-0", "s-0-1", "0")
    assert recreation.note == "Worker pod s-0-1 failed, deleted leader pod s-0 to recreate group 0"


def test_a_deleted_worker_recreates_the_group() -> None:
    pods, sts = group()
    gone = pods.pop(1)
    assert [r.leader for r in plan_recreations(lws(), pods, sts, deleted=[gone])] == ["s-0"]


def test_a_leader_restart_recreates_its_own_group() -> None:
    pods, sts = group()
    pods[0] = pod("s-0", restarts=1)
    assert [r.trigger for r in plan_recreations(lws(), pods, sts)] == ["s-0"]


@pytest.mark.parametrize("policy", ["None", "Default"])
def test_policy_none_never_recreates(policy: str) -> None:
    pods, sts = group(restarts=1)
    assert plan_recreations(lws(policy), pods, sts) == []


@pytest.mark.parametrize(("policy", "after_start"), [("RecreateGroupAfterStart", False),
                                                     ("RecreateGroupOnPodRestart", True)])
def test_after_start_waits_while_the_group_is_starting(policy: str, after_start: bool) -> None:
    pods, sts = group(restarts=1)
    pods[2] = pod("s-0-2", worker=2, owner=STS_OWNER, phase="Pending")
    assert plan_recreations(lws(policy, after_start=after_start), pods, sts) == []
    missing = [p for p in group(restarts=1)[0] if p["metadata"]["name"] != "s-0-2"]
    assert plan_recreations(lws(policy, after_start=after_start), missing, sts) == []
    started, _ = group(restarts=1)
    assert len(plan_recreations(lws(policy, after_start=after_start), started, sts)) == 1


def test_an_old_groups_workers_never_recreate_the_replacement() -> None:
    pods, sts = group(restarts=1)
    # Another revision: the worker belongs to a group being rolled.
    pods[0] = pod("s-0", key="k2")
    assert plan_recreations(lws(), pods, sts) == []
    # Same revision, new incarnation of the leader: the worker's StatefulSet is the old one's.
    pods[0] = pod("s-0", uid="uid-new")
    assert plan_recreations(lws(), pods, sts) == []
    # The worker's StatefulSet is gone: its group is being torn down.
    assert plan_recreations(lws(), group(restarts=1)[0], []) == []


def test_a_deleting_or_missing_leader_is_left_alone() -> None:
    pods, sts = group(restarts=1)
    pods[0] = pod("s-0", deleting=True)
    assert plan_recreations(lws(), pods, sts) == []
    assert plan_recreations(lws(), pods[1:], sts) == []


def test_one_recreation_per_group() -> None:
    pods, sts = group(restarts=1)
    pods[2] = pod("s-0-2", worker=2, owner=STS_OWNER, restarts=4)
    assert len(plan_recreations(lws(), pods, sts)) == 1


def scheduled(status: str | None, reason: str = "") -> dict[str, Any]:
    p = pod("s-0-2", worker=2, owner=STS_OWNER, phase="Pending")
    if status is not None:
        p["status"]["conditions"] = [{"type": "PodScheduled", "status": status, "reason": reason}]
    return p


@pytest.mark.parametrize(("pod_", "state"), [
    (scheduled(None), "starting"),  # no result from the scheduler yet
    (scheduled("True"), "starting"),  # placed, pulling images or starting
    (scheduled("False", "SchedulingGated"), "gated"),
    (scheduled("False", "Unschedulable"), "unschedulable"),
    (scheduled("False", "SomethingElse"), "unschedulable"),
    (pod("s-0"), None),  # Running
])
def test_pending_state(pod_: dict[str, Any], state: str | None) -> None:
    assert pending_state(pod_) == state


@pytest.mark.parametrize(("blocker", "reported"), [
    (scheduled("False", "Unschedulable"), True),
    (scheduled("False", "SchedulingGated"), False),
    (scheduled("True"), False),
])
def test_after_start_skips_every_pending_state_and_reports_unschedulable(
        blocker: dict[str, Any], reported: bool) -> None:
    pods, sts = group()
    pods[0] = pod("s-0", restarts=1)
    pods[2] = blocker
    scan = scan_failures(lws("RecreateGroupAfterStart"), pods, sts)
    assert scan.recreations == []
    assert [(s.group, s.trigger, s.pod) for s in scan.unschedulable] == (
        [("0", "s-0", "s-0-2")] if reported else [])
    if reported:
        assert scan.unschedulable[0].note == (
            "Pod s-0 failed, but group 0 is not recreated while pod s-0-2 cannot be scheduled")


def test_recreations_carry_the_leaders_revision_and_age() -> None:
    pods, sts = group(restarts=1)
    pods[0]["metadata"]["creationTimestamp"] = "2026-11-29T10:00:00Z"
    [r] = plan_recreations(lws(), pods, sts)
    assert (r.revision, r.created) == ("k1", "2026-11-29T10:00:00Z")


def progressing(reason: str = "GroupsProgressing", status: str = "True") -> dict[str, Any]:
    return {"conditions": [{"type": "Progressing", "status": status, "reason": reason,
                            "message": "Replicas are progressing", "lastTransitionTime": "T"}]}


@pytest.mark.parametrize(("policy", "stuck", "before", "reason", "message"), [
    ("RecreateGroupAfterStart", True, progressing(), "GroupUnschedulable",
     "1 of 2 replicas cannot be scheduled"),
    ("RecreateGroupAfterStart", False, progressing("GroupUnschedulable"), "GroupsProgressing",
     "Replicas are progressing"),
    ("RecreateGroupAfterStart", False, progressing(), "GroupsProgressing",
     "Replicas are progressing"),
    # Other policies keep upstream's condition.
    ("RecreateGroupOnPodRestart", True, progressing(), "GroupsProgressing",
     "Replicas are progressing"),
])
def test_progressing_counts_unschedulable_replicas(policy: str, stuck: bool,
                                                   before: dict[str, Any], reason: str,
                                                   message: str) -> None:
    pods, _ = group()
    if stuck:
        pods[2] = scheduled("False", "Unschedulable")
    spec = lws(policy)
    spec["spec"]["replicas"] = 2
    [cond] = apply_unschedulable(before, spec, pods)["conditions"]
    assert (cond["reason"], cond["message"], cond["lastTransitionTime"]) == (reason, message, "T")


def test_a_false_progressing_is_left_alone() -> None:
    pods, _ = group()
    pods[2] = scheduled("False", "Unschedulable")
    before = progressing("RolloutStalled", status="False")
    assert apply_unschedulable(before, lws("RecreateGroupAfterStart"), pods) == before
