"""Which pod news may wait a second for its pass (``logic.workloads.wakeups``)."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.constants import NAME_LABEL, WORKER_INDEX_LABEL
from lws_operator.logic.failures.restart_budget import CLEANUP_FINALIZER
from lws_operator.logic.workloads.wakeups import (
    can_wait,
    completes_workers,
    controller_name,
    statefulset_can_wait,
    torn_down,
)


def pod(index: str | None = "1", *, meta: dict[str, Any] | None = None,
        spec: dict[str, Any] | None = None, status: dict[str, Any] | None = None,
        ) -> dict[str, Any]:
    labels = {NAME_LABEL: "x"} if index is None else {NAME_LABEL: "x", WORKER_INDEX_LABEL: index}
    return {"metadata": {"name": "x-0-1", "labels": labels, **(meta or {})},
            "spec": {"nodeName": "node-1", **(spec or {})},
            "status": {"phase": "Running", **(status or {})}}


READY = {"conditions": [{"type": "Ready", "status": "True"}],
         "containerStatuses": [{"restartCount": 0}]}


@pytest.mark.parametrize(("obj", "expected"), [
    (pod(), True),
    (pod(status=READY), True),
    (pod(spec={"nodeName": ""}, status={"phase": "Pending"}), True),
    (pod(status={"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}), True),
    (pod(index=None), True),  # never mutated: judged over a minute (logic.mutation.unmutated)
    (pod("0"), False),
    (pod("0", status=READY), False),
    (pod(meta={"deletionTimestamp": "2026-12-02T00:00:00Z"}), False),
    (pod(status={"phase": "Failed"}), False),
    (pod(status={"phase": "Succeeded"}), False),
    (pod(status={"containerStatuses": [{"restartCount": 2}]}), False),
    (pod(status={"phase": "Pending", "initContainerStatuses": [{"restartCount": 1}]}), False),
    (pod(spec={"schedulingGates": [{"name": "scheduling.x-k8s.io/pod-group"}]}), False),
    (pod(spec={"schedulingGates": []}), True),
], ids=["running worker", "ready worker", "created worker", "unschedulable worker",
        "unlabelled pod", "leader", "ready leader", "deleting worker", "failed worker",
        "succeeded worker", "restarted worker", "restarted init container", "gated worker",
        "gates lifted"])
def test_only_a_live_workers_routine_news_waits(obj: dict[str, Any], expected: bool) -> None:
    assert can_wait(obj) is expected


def statefulset(name: str = "x-0", replicas: int = 7, available: int = 3,
                revisions: tuple[str, str] = ("r1", "r1"), **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, **meta}, "spec": {"replicas": replicas},
            "status": {"replicas": replicas, "readyReplicas": available,
                       "availableReplicas": available, "currentRevision": revisions[0],
                       "updateRevision": revisions[1]}}


@pytest.mark.parametrize(("obj", "expected"), [
    (statefulset(), True),
    (statefulset(available=0), True),
    (statefulset(available=7, revisions=("r1", "r2")), True),
    (statefulset(available=7), False),
    (statefulset(replicas=0, available=0), False),
    (statefulset(deletionTimestamp="2026-12-02T00:00:00Z"), False),
    (statefulset("x"), False),
    (statefulset("x", available=5, replicas=5), False),
], ids=["worker counting up", "worker just created", "worker all up, update pending",
        "worker ready", "worker of no replicas", "worker deleting", "leader StatefulSet",
        "leader StatefulSet ready"])
def test_only_a_worker_statefulset_on_its_way_to_ready_waits(
        obj: dict[str, Any], expected: bool) -> None:
    assert statefulset_can_wait(obj, "x") is expected


GONE = "2026-12-03T00:00:00Z"
OWNED = {"ownerReferences": [{"kind": "StatefulSet", "name": "x-0", "uid": "sts-1",
                              "controller": True}]}


def worker(*, deleting: bool = True, **meta: Any) -> dict[str, Any]:
    extra: dict[str, Any] = {**OWNED, **meta}
    if deleting:
        extra["deletionTimestamp"] = GONE
    return pod(meta=extra)


LIVE_STS = statefulset(uid="sts-1")


@pytest.mark.parametrize(("obj", "event", "sts", "expected"), [
    (worker(), "MODIFIED", None, True),
    (worker(), "DELETED", None, True),
    (worker(deleting=False), "DELETED", None, True),  # removed at once, no grace period
    (worker(), "MODIFIED", statefulset(uid="sts-1", deletionTimestamp=GONE), True),
    (worker(), "DELETED", statefulset(uid="sts-2"), True),  # the group's next incarnation
    (worker(), "MODIFIED", LIVE_STS, False),  # one pod deleted from a live group
    (worker(), "DELETED", LIVE_STS, False),
    (worker(deleting=False), "MODIFIED", None, False),  # alive: can_wait judges it
    (worker(finalizers=[CLEANUP_FINALIZER]), "MODIFIED", None, False),  # retained
    (pod("0", meta={**OWNED, "deletionTimestamp": GONE}), "DELETED", None, False),  # leader
    (pod(meta={"deletionTimestamp": GONE}), "DELETED", None, False),  # no owner to judge by
], ids=["deleting, StatefulSet gone", "deleted, StatefulSet gone", "deleted without grace",
        "StatefulSet deleting", "StatefulSet of another incarnation", "live StatefulSet",
        "deleted from a live StatefulSet", "not deleting", "retained", "leader",
        "no controlling owner"])
def test_only_the_workers_of_a_group_torn_down_wait(
        obj: dict[str, Any], event: str, sts: dict[str, Any] | None, expected: bool) -> None:
    assert torn_down(obj, event, sts) is expected


def test_a_worker_names_its_statefulset_by_its_controlling_owner() -> None:
    assert controller_name(worker()) == "x-0"
    assert controller_name(pod()) is None
    assert controller_name(pod(meta={"ownerReferences": [{"name": "y", "kind": "Node"}]})) \
        is None
    assert controller_name(pod(meta={"ownerReferences": [
        {"name": "y", "kind": "ReplicaSet", "controller": True}]})) is None


def ready_worker(ordinal: int, uid: str = "sts-1", ready: str = "True") -> dict[str, Any]:
    return pod(meta={"name": f"x-0-{ordinal}", "labels": {
        NAME_LABEL: "x", WORKER_INDEX_LABEL: str(ordinal), "controller-revision-hash": "r1"},
        "ownerReferences": [{"kind": "StatefulSet", "name": "x-0", "uid": uid,
                             "controller": True}]},
        status={"phase": "Running", "conditions": [{"type": "Ready", "status": ready}]})


COUNTING = {**statefulset(replicas=2, available=1, uid="sts-1"), "spec": {
    "replicas": 2, "ordinals": {"start": 1}}}


@pytest.mark.parametrize(("obj", "sts", "others", "expected"), [
    (ready_worker(2), COUNTING, [ready_worker(1)], True),
    (ready_worker(2), COUNTING, [], False),  # a sibling not seen yet
    (ready_worker(2), COUNTING, [ready_worker(1, ready="False")], False),
    (ready_worker(2, ready="False"), COUNTING, [ready_worker(1)], False),
    (ready_worker(2), None, [ready_worker(1)], False),
    # Its StatefulSet says so already: that event woke the pass.
    (ready_worker(2), {**COUNTING, "status": {**COUNTING["status"], "availableReplicas": 2}},
     [ready_worker(1)], False),
], ids=["the last worker", "a sibling missing", "a sibling not ready", "not ready itself",
        "no StatefulSet", "StatefulSet ready"])
def test_the_worker_that_completes_its_statefulset_is_prompt(
        obj: dict[str, Any], sts: dict[str, Any] | None, others: list[dict[str, Any]],
        expected: bool) -> None:
    by_name = {p["metadata"]["name"]: p for p in [obj, *others]}
    assert completes_workers(sts, by_name.get) is expected
    assert can_wait(obj)  # a routine worker event otherwise: only this makes it prompt
