"""Which watch events wake a pass, and how soon (``kube.watch`` and the runtime's
``_changed``): an event that changes nothing the cache keeps of an object but its
resourceVersion wakes none; a set's own events and deletions wake one at once; the other
events of its children join one pass a short window later, or a second later for a worker pod's
routine news (``logic.workloads.wakeups``). Nothing here reaches an API server;
the queue runs on a manual clock."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from kubernetes.aio import client
from prometheus_client import CollectorRegistry

from lws_operator.api.constants import (
    CONTROLLER_REVISION_HASH_LABEL,
    NAME_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.controllers.disaggregated_runtime import (
    CHILD_KINDS,
    KINDS,
    DisaggregatedSetRuntime,
)
from lws_operator.controllers.runtime import ControllerOptions, ControllerRuntime
from lws_operator.kube.client import KubeClient
from lws_operator.kube.list_watch import ListWatch
from lws_operator.kube.watch import RELIST_BATCH, news
from lws_operator.kube.workqueue import WorkQueue
from tests.harness.clock import ManualClock, settle

WINDOW = 0.05
WORKER_WINDOW = 1.0


def pod(version: str = "5", leader: bool = True, **changes: Any) -> dict[str, Any]:
    """A pod of set ``x``: its leader, or a worker (no worker index 0)."""
    body: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "x-0" if leader else "x-0-1", "namespace": "ns", "uid": "p1",
                     "resourceVersion": version,
                     "labels": {NAME_LABEL: "x", WORKER_INDEX_LABEL: "0" if leader else "1"},
                     "managedFields": [{"manager": "kubelet"}]},
        "spec": {"nodeName": "", "containers": [{"name": "c", "image": "engine:v1"}]},
        "status": {"phase": "Pending"},
    }
    for path, value in changes.items():
        where = body
        *parents, last = path.split("__")
        for part in parents:
            where = where[part]
        where[last] = value
    return body


def runtime() -> tuple[ControllerRuntime, ManualClock, CollectorRegistry]:
    kube = KubeClient(client.ApiClient(configuration=client.Configuration()))
    registry = CollectorRegistry()
    run = ControllerRuntime(kube, ControllerOptions(
        child_event_window=WINDOW, worker_event_window=WORKER_WINDOW), registry)
    clock = ManualClock()
    run.queue = WorkQueue("leaderworkerset", clock=clock, sleep=clock.sleep)
    return run, clock, registry


@pytest.mark.parametrize(("before", "after", "expected"), [
    (None, {"metadata": {"name": "a"}}, True),
    ({"metadata": {"name": "a"}}, None, True),
    ({"metadata": {"name": "a", "resourceVersion": "1"}},
     {"metadata": {"name": "a", "resourceVersion": "2"}}, False),
    ({"metadata": {"name": "a", "resourceVersion": "1"}, "status": {"phase": "Pending"}},
     {"metadata": {"name": "a", "resourceVersion": "2"}, "status": {"phase": "Running"}}, True),
    ({"metadata": {"name": "a", "resourceVersion": "1"}},
     {"metadata": {"name": "a", "resourceVersion": "2", "deletionTimestamp": "t"}}, True),
    ({"metadata": {"name": "a", "labels": {"k": "1"}}},
     {"metadata": {"name": "a", "labels": {"k": "2"}}}, True),
    ({"metadata": {"name": "a"}, "status": {}}, {"metadata": {"name": "a"}}, True),
    ({"metadata": {"name": "a"}}, {"metadata": {"name": "a"}, "status": {}}, True),
    ({"metadata": {"name": "a", "generation": 1}},
     {"metadata": {"name": "a", "generation": 2}}, True),
], ids=["stored anew", "forgotten", "only the resourceVersion", "status", "deleting",
        "labels", "a field dropped", "a field added", "generation"])
def test_news_is_any_difference_but_the_resource_version(
        before: dict[str, Any] | None, after: dict[str, Any] | None, expected: bool) -> None:
    assert news(before, after) is expected


def test_an_event_that_was_not_stored_is_no_news() -> None:
    stored = {"metadata": {"name": "a", "resourceVersion": "9"}}
    assert not news(stored, stored)
    assert not news(None, None)


def lws(version: str = "3", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "x", "namespace": "ns", "uid": "l1",
                         "resourceVersion": version, "managedFields": [{"manager": "kubectl"}]},
            "spec": {"replicas": 1, **spec}, "status": {"readyReplicas": 0}}


async def test_the_echo_of_a_stored_status_write_wakes_no_pass() -> None:
    run, clock, registry = runtime()
    run.cache["LeaderWorkerSet"].upsert(lws())  # the executor stored the answer of our write
    run.watches._observe("LeaderWorkerSet", "MODIFIED", lws())  # its watch event
    run.watches._observe("LeaderWorkerSet", "MODIFIED", {**lws("4"), "metadata": {
        **lws("4")["metadata"], "managedFields": []}})  # nothing kept changed
    run.watches._observe("LeaderWorkerSet", None, lws("4"))  # a relisting's update
    clock.advance(1)
    await settle()
    assert len(run.queue) == 0
    stored = run.cache["LeaderWorkerSet"].get("ns", "x")
    assert stored is not None
    assert stored["metadata"]["resourceVersion"] == "4"
    assert registry.get_sample_value("lws_operator_watch_events_unchanged_total",
                                     {"kind": "LeaderWorkerSet"}) == 3
    run.watches._observe("LeaderWorkerSet", "MODIFIED", lws("5", replicas=2))
    assert len(run.queue) == 1  # a change wakes a pass at once


async def test_an_older_event_than_the_stored_set_wakes_no_pass() -> None:
    run, clock, _ = runtime()
    run.cache["LeaderWorkerSet"].upsert(lws("9", replicas=3))
    run.watches._observe("LeaderWorkerSet", "MODIFIED", lws("8", replicas=2))
    clock.advance(1)
    await settle()
    assert len(run.queue) == 0


async def test_the_echo_of_a_childs_write_still_wakes_a_pass() -> None:
    """A pass may decide differently right after its own writes (a rollout's first pass, which
    created the revision, leaves the partition to the next one): the echo of a child's write
    brings that pass, as upstream's watch does."""
    run, clock, _ = runtime()
    run.cache["Pod"].upsert(pod())
    run.watches._observe("Pod", "MODIFIED", pod())
    clock.advance(WINDOW)
    await settle()
    assert len(run.queue) == 1


async def test_a_burst_of_pod_changes_makes_one_pass_after_the_window() -> None:
    run, clock, _ = runtime()
    run.watches._observe("Pod", "ADDED", pod())
    clock.advance(WINDOW / 2)
    run.watches._observe("Pod", "MODIFIED", pod("6", spec__nodeName="node-1"))
    run.watches._observe("Pod", "MODIFIED", pod("7", spec__nodeName="node-1",
                                                status={"phase": "Running"}))
    assert len(run.queue) == 0
    assert run.queue.coalescing() == {("ns", "x"): pytest.approx(WINDOW)}
    clock.advance(WINDOW / 2)
    await settle()
    assert len(run.queue) == 1
    assert await run.queue.get() == ("ns", "x")


async def test_a_workers_routine_news_waits_a_second_unless_something_prompt_follows() -> None:
    """A worker created, bound and turning Ready (its StatefulSet's status tells the group's
    readiness) joins a pass a second later; a leader's news meanwhile brings it forward."""
    run, clock, _ = runtime()
    run.watches._observe("Pod", "ADDED", pod(leader=False))
    run.watches._observe("Pod", "MODIFIED", pod("6", leader=False, spec__nodeName="node-1"))
    assert run.queue.coalescing() == {("ns", "x"): pytest.approx(WORKER_WINDOW)}
    clock.advance(WINDOW * 2)
    await settle()
    assert len(run.queue) == 0
    leader = pod("7")
    leader["metadata"].update(name="x-1", uid="p2")
    run.watches._observe("Pod", "ADDED", leader)
    assert run.queue.coalescing() == {("ns", "x"): pytest.approx(WINDOW * 3)}
    clock.advance(WINDOW)
    await settle()
    assert len(run.queue) == 1
    assert await run.queue.get() == ("ns", "x")
    assert run.queue.coalescing() == {}  # that pass read the worker's news too
    run.queue.done(("ns", "x"))

    run.watches._observe("Pod", "MODIFIED", pod("8", leader=False, status={
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}))
    clock.advance(WORKER_WINDOW - WINDOW)
    await settle()
    assert len(run.queue) == 0
    clock.advance(WINDOW)
    await settle()
    assert len(run.queue) == 1  # never later than the second


@pytest.mark.parametrize("changes", [
    {"metadata__deletionTimestamp": "2026-12-02T00:00:00Z"},
    {"status": {"phase": "Failed"}},
    {"status": {"phase": "Running", "containerStatuses": [{"restartCount": 1}]}},
    {"spec__schedulingGates": [{"name": "gate"}]},
], ids=["deleting", "failed", "restarted", "gated"])
async def test_a_worker_that_may_call_for_action_wakes_a_pass_soon(
        changes: dict[str, Any]) -> None:
    run, _, _ = runtime()
    run.watches._observe("Pod", "MODIFIED", pod("6", leader=False, **changes))
    assert run.queue.coalescing() == {("ns", "x"): pytest.approx(WINDOW)}


def owned_worker(version: str, **changes: Any) -> dict[str, Any]:
    """A worker of the worker StatefulSet ``x-0`` (UID s1) being deleted."""
    body = pod(version, leader=False, metadata__deletionTimestamp="2026-12-03T00:00:00Z",
               **changes)
    body["metadata"]["ownerReferences"] = [
        {"kind": "StatefulSet", "name": "x-0", "uid": "s1", "controller": True}]
    return body


def worker_statefulset(**meta: Any) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "x-0", "namespace": "ns", "uid": "s1", "resourceVersion": "2",
                         "labels": {NAME_LABEL: "x"}, **meta},
            "spec": {"replicas": 3}, "status": {"replicas": 3}}


async def test_the_workers_of_a_group_torn_down_wait_a_second() -> None:
    """Once a worker StatefulSet is gone or going, its pods' deletions (a rollout's bulk of pod
    news) join a pass a second later, the final removal included; while it lives, a worker's
    deletion is prompt (its group may be recreated) and its removal immediate."""
    run, clock, _ = runtime()
    run.watches._observe("StatefulSet", "ADDED", worker_statefulset())
    clock.advance(WORKER_WINDOW)
    await settle()
    assert await run.queue.get() == ("ns", "x")
    run.queue.done(("ns", "x"))
    run.watches._observe("Pod", "MODIFIED", owned_worker("6"))
    assert run.queue.coalescing() == {("ns", "x"): pytest.approx(clock() + WINDOW)}
    run.watches._observe("Pod", "DELETED", owned_worker("7"))
    assert len(run.queue) == 1
    assert await run.queue.get() == ("ns", "x")
    run.queue.done(("ns", "x"))

    run.watches._observe("StatefulSet", "MODIFIED", worker_statefulset(
        resourceVersion="3", deletionTimestamp="2026-12-03T00:00:00Z"))
    assert len(run.queue) == 0
    assert run.queue.coalescing() == {("ns", "x"): pytest.approx(clock() + WINDOW)}  # prompt itself
    clock.advance(WINDOW)
    await settle()
    assert await run.queue.get() == ("ns", "x")
    run.queue.done(("ns", "x"))
    body = owned_worker("8")
    body["metadata"].update(name="x-0-2", uid="p3")
    run.watches._observe("Pod", "MODIFIED", body)
    assert run.queue.coalescing() == {("ns", "x"): pytest.approx(clock() + WORKER_WINDOW)}

    run.watches._observe("StatefulSet", "DELETED", worker_statefulset(resourceVersion="4"))
    assert len(run.queue) == 1  # the StatefulSet's removal stays immediate
    assert await run.queue.get() == ("ns", "x")
    run.queue.done(("ns", "x"))
    body = owned_worker("9")
    body["metadata"].update(name="x-0-2", uid="p3")
    run.watches._observe("Pod", "DELETED", body)
    assert len(run.queue) == 0
    assert run.queue.coalescing() == {("ns", "x"): pytest.approx(clock() + WORKER_WINDOW)}


def counting_statefulset(replicas: int) -> dict[str, Any]:
    """The worker StatefulSet ``x-0`` (UID s1, ordinals from 1) settled on revision r, its
    status still counting its pods up."""
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "x-0", "namespace": "ns", "uid": "s1", "resourceVersion": "2",
                         "generation": 1, "labels": {NAME_LABEL: "x"}},
            "spec": {"replicas": replicas, "ordinals": {"start": 1}},
            "status": {"replicas": replicas, "availableReplicas": 0, "observedGeneration": 1,
                       "currentRevision": "r", "updateRevision": "r"}}


def ready_worker(ordinal: int, version: str) -> dict[str, Any]:
    """Worker ``x-0-<ordinal>`` of ``counting_statefulset``, running and Ready on revision r."""
    body = pod(version, leader=False, spec__nodeName="node-1", status={
        "phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]})
    body["metadata"].update(name=f"x-0-{ordinal}", uid=f"w{ordinal}")
    body["metadata"]["labels"].update({WORKER_INDEX_LABEL: str(ordinal),
                                       CONTROLLER_REVISION_HASH_LABEL: "r"})
    body["metadata"]["ownerReferences"] = [
        {"kind": "StatefulSet", "name": "x-0", "uid": "s1", "controller": True}]
    return body


async def test_the_worker_that_completes_its_statefulset_wakes_a_pass_at_once() -> None:
    """The group is Ready once its last worker is (``wakeups.completes_workers``), and a
    rollout step waits on that: its event neither waits the second nor the short window; the
    workers before it wait their second."""
    run, clock, _ = runtime()
    run.watches._observe("StatefulSet", "ADDED", counting_statefulset(2))
    clock.advance(WORKER_WINDOW)
    await settle()
    assert await run.queue.get() == ("ns", "x")
    run.queue.done(("ns", "x"))
    run.watches._observe("Pod", "ADDED", ready_worker(1, "6"))
    assert len(run.queue) == 0
    assert run.queue.coalescing() == {("ns", "x"): pytest.approx(clock() + WORKER_WINDOW)}
    run.watches._observe("Pod", "ADDED", ready_worker(2, "7"))
    assert len(run.queue) == 1
    assert run.queue.coalescing() == {}


async def test_a_worker_statefulset_waits_until_it_is_ready() -> None:
    run, _, _ = runtime()
    sts: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": {"name": "x-0", "namespace": "ns", "uid": "s1", "resourceVersion": "2",
                     "labels": {NAME_LABEL: "x"}},
        "spec": {"replicas": 3},
        "status": {"replicas": 3, "availableReplicas": 1, "currentRevision": "r",
                   "updateRevision": "r"}}
    run.watches._observe("StatefulSet", "MODIFIED", sts)
    assert run.queue.coalescing() == {("ns", "x"): pytest.approx(WORKER_WINDOW)}
    ready = copy.deepcopy(sts)
    ready["metadata"]["resourceVersion"] = "3"
    ready["status"]["availableReplicas"] = 3
    run.watches._observe("StatefulSet", "MODIFIED", ready)
    assert run.queue.coalescing() == {("ns", "x"): pytest.approx(WINDOW)}


async def test_a_set_event_and_a_deletion_wake_a_pass_at_once() -> None:
    run, _, _ = runtime()
    lws: dict[str, Any] = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "x", "namespace": "ns", "uid": "l1", "resourceVersion": "3"},
           "spec": {"replicas": 1}}
    run.watches._observe("LeaderWorkerSet", "ADDED", lws)
    assert len(run.queue) == 1
    assert await run.queue.get() == ("ns", "x")
    run.queue.done(("ns", "x"))

    run.watches._observe("Pod", "ADDED", pod())
    assert len(run.queue) == 0  # coalescing
    run.watches._observe("Pod", "DELETED", pod("6"))
    assert len(run.queue) == 1
    assert run.queue.coalescing() == {}  # the deletion's pass covers the coalesced news

    changed = copy.deepcopy(lws)
    changed["metadata"]["resourceVersion"] = "4"
    changed["spec"]["replicas"] = 2
    assert await run.queue.get() == ("ns", "x")
    run.watches._observe("LeaderWorkerSet", "MODIFIED", changed)
    run.queue.done(("ns", "x"))
    assert len(run.queue) == 1  # again at once, after the pass that was running



async def test_a_long_relisting_is_delivered_in_batches_between_which_the_loop_runs() -> None:
    """A relisting of many pods is delivered ``RELIST_BATCH`` at a time, so other work (a Lease
    renewal) runs in between, and no object is left behind."""
    run, _clock, _ = runtime()
    items = []
    for i in range(RELIST_BATCH + 10):
        body = pod()
        body["metadata"].update(name=f"x-{i}", uid=f"p{i}")
        items.append(body)
    counts: list[int] = []

    async def other_work() -> None:
        while True:
            counts.append(len(run.cache["Pod"]))
            await asyncio.sleep(0)
    task = asyncio.create_task(other_work())
    await asyncio.sleep(0)
    await run.watches._replace("Pod", items, "100")
    task.cancel()
    assert len(run.cache["Pod"]) == RELIST_BATCH + 10
    assert RELIST_BATCH in counts  # the loop ran between the batches


def test_the_controller_decides_only_while_the_watches_of_pods_and_statefulsets_are_open(
) -> None:
    """``Watches.current``: a pass waits while the watch of pods or StatefulSets is not open
    (a gap, a relisting), so a pod's deletion never shows against a stale StatefulSet; other
    kinds' watches do not hold it."""
    run, _clock, _registry = runtime()
    watches = run.watches
    for kind in ("Pod", "StatefulSet", "Service"):
        watches.own[kind] = ListWatch(run.kube, kind, f"/{kind}", None,
                                      watches._observe, watches._replace)
    assert not run.reconciler.caches_current()  # nothing open yet
    watches.own["Pod"].watching.set()
    assert not run.reconciler.caches_current()
    watches.own["StatefulSet"].watching.set()
    assert run.reconciler.caches_current()  # the Service watch does not matter
    watches.own["Pod"].watching.clear()  # the stream ended: resuming, or listing again
    assert not run.reconciler.caches_current()


def test_the_disaggregatedset_controller_decides_only_while_its_childrens_watches_are_open(
) -> None:
    """The DisaggregatedSet controller's pass waits while the watch of its LeaderWorkerSets,
    Services or role scalers is not open; its own kind's watch does not hold it."""
    kube = KubeClient(client.ApiClient(configuration=client.Configuration()))
    run = DisaggregatedSetRuntime(kube, CollectorRegistry())
    watches = run.watches
    for kind in KINDS:
        watches.own[kind] = ListWatch(kube, kind, f"/{kind}", None,
                                      watches._observe, watches._replace)
    watches.own[KINDS[0]].watching.set()
    assert not run.reconciler.caches_current()
    for kind in CHILD_KINDS:
        watches.own[kind].watching.set()
    assert run.reconciler.caches_current()
    watches.own[KINDS[0]].watching.clear()
    assert run.reconciler.caches_current()  # the sets' own watch wakes passes, holds none
    watches.own["LeaderWorkerSet"].watching.clear()
    assert not run.reconciler.caches_current()
