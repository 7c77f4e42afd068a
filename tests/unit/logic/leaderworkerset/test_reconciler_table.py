"""The reconciler as a table: observed state in, the pass's plan out, no API server.

Each row is a state the end-to-end suites drive a set into (``e2e/controllers``), built as
production builds it (``tests/harness/lws_world.py``), and the writes and Events one pass
plans for it, in order; a set at rest plans nothing at all (docs/architecture.md: steady state
costs zero requests).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from lws_operator.logic.reconcile.plan import Apply, Delete, Patch, Then
from lws_operator.logic.reconcile.snapshot import Options
from lws_operator.logic.status.pacing import LONGEST, QUIET, SETTLED_LONGEST
from tests.harness.lws_world import (
    GATE,
    P,
    Pass,
    World,
    at_rest,
    built_world,
    manifest,
    new_world,
    plan_pass,
)


def change_pod(world: World, name: str, how: Callable[[dict[str, Any]], None]) -> None:
    pod = copy.deepcopy(world.cache["Pod"].get("ns", name))
    assert pod is not None
    how(pod)
    pod["metadata"]["resourceVersion"] = "400"
    world.cache["Pod"].upsert(pod)


def change_lws(world: World, how: Callable[[dict[str, Any]], None], spec: bool = True) -> None:
    """``how`` applied to the stored set; a change of its spec moves its generation."""
    lws = world.lws
    how(lws)
    lws["metadata"]["resourceVersion"] = "500"
    if spec:
        lws["metadata"]["generation"] = 2
    world.cache["LeaderWorkerSet"].upsert(lws)


def ready(pod: dict[str, Any]) -> None:
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "True"


def restarted(pod: dict[str, Any]) -> None:
    pod["status"]["containerStatuses"][0]["restartCount"] = 1


def not_ready(pod: dict[str, Any]) -> None:
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "False"


def unplaced(pod: dict[str, Any]) -> None:
    pod["spec"].pop("nodeName", None)


def scale_to(replicas: int) -> Callable[[dict[str, Any]], None]:
    def how(lws: dict[str, Any]) -> None:
        lws["spec"]["replicas"] = replicas
    return how


def new_image(lws: dict[str, Any]) -> None:
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0][
        "image"] = "app:2"


def worker_deleted(world: World) -> World:
    pod = world.cache["Pod"].get("ns", "sample-1-1")
    assert pod is not None
    world.cache["Pod"].delete(pod, gone=True)
    world.cache.bury(world.key, pod)
    return world


def counted(count: int) -> Callable[[World], World]:
    """Group 1 has been recreated ``count`` times at its revision."""
    def how(world: World) -> World:
        leader = world.cache["Pod"].get("ns", "sample-1")
        assert leader is not None
        key = leader["metadata"]["labels"][P + "template-revision-hash"]
        change_lws(world, lambda lws: lws["metadata"]["annotations"].update(
            {P + "group-restart-counts": json.dumps({f"{key}/1": count})}), spec=False)
        change_pod(world, "sample-1-2", restarted)
        return world
    return how


def with_options(world: World, **options: Any) -> World:
    world.options = Options(600.0, **options)
    return world


def on_nodes(world: World) -> World:
    world.nodes = {"tpu-node-000": {"rack": "r7"}}
    return world


def later(seconds: float) -> Callable[[World], None]:
    def how(world: World) -> None:
        world.clock += seconds
    return how


def leader_replicas(replicas: int) -> Callable[[World], None]:
    """The leader StatefulSet's ``status.replicas`` (which the set's status copies) moved."""
    def how(world: World) -> None:
        sts = copy.deepcopy(world.cache["StatefulSet"].get("ns", "sample"))
        assert sts is not None
        sts["status"]["replicas"] = replicas
        sts["metadata"]["resourceVersion"] = str(int(sts["metadata"]["resourceVersion"]) + 1)
        world.cache["StatefulSet"].upsert(sts)
    return how


def churned(world: World) -> World:
    """The counters of an Available set moving every QUIET - 1 seconds (never still long
    enough) until SETTLED_LONGEST seconds after the first move; every pass until then writes
    nothing."""
    start, replicas = world.clock, 3
    while world.clock - start < SETTLED_LONGEST:
        leader_replicas(replicas)(world)
        assert plan_pass(world).writes() == []
        later(min(QUIET - 1, SETTLED_LONGEST - (world.clock - start)))(world)
        replicas += 1
    return world


def one_ready_of_two() -> World:
    """Group 1's leader not Ready: the set at rest, Progressing with one group ready."""
    return at_rest(built_world(manifest(), states={"1/0": not_ready}))


def none_ready_of_two() -> World:
    """Neither group's leader Ready: the set at rest, Progressing with no group ready."""
    return at_rest(built_world(manifest(), states={"0/0": not_ready, "1/0": not_ready}))


def disaggregated_child(world: World) -> None:
    """The set is a DisaggregatedSet's role (its controller ownerReference)."""
    change_lws(world, lambda lws: lws["metadata"].update(ownerReferences=[{
        "apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
        "name": "pd", "uid": "ds-uid", "controller": True}]), spec=False)


def then(world: World, *changes: Callable[[World], object]) -> World:
    for change in changes:
        change(world)
    return world


@dataclass(frozen=True)
class Row:
    world: Callable[[], World]
    writes: list[str]
    events: list[str]  # reasons, in order
    requeue: float | None = None


ORDINAL = "sample"
TABLE: dict[str, Row] = {
    "a new set: its revision, leader StatefulSet, shared Service, status": Row(
        lambda: new_world(manifest()),
        ["create ControllerRevision sample-84557c46b4-1", "apply StatefulSet sample",
         "create Service sample", "status LeaderWorkerSet sample"],
        ["CreatingRevision", "GroupsProgressing", "GroupsProgressing"]),
    "at rest: nothing": Row(lambda: at_rest(built_world(manifest())), [], []),
    "only a counter changed (a group no longer ready): the write waits for Available": Row(
        lambda: then(one_ready_of_two(), lambda w: change_pod(w, "sample-0", not_ready)),
        [], [], LONGEST),
    "... the counters still for QUIET seconds: still waiting (not Available)": Row(
        lambda: then(one_ready_of_two(), lambda w: change_pod(w, "sample-0", not_ready),
                     plan_pass, later(QUIET)),
        [], [], LONGEST - QUIET),
    "... LONGEST after the first deferred change: the deferred write": Row(
        lambda: then(one_ready_of_two(), lambda w: change_pod(w, "sample-0", not_ready),
                     plan_pass, later(QUIET), plan_pass, later(LONGEST - QUIET)),
        ["status LeaderWorkerSet sample"], []),
    "the first Ready group: waits like any counter": Row(
        lambda: then(none_ready_of_two(), lambda w: change_pod(w, "sample-0", ready)),
        [], [], LONGEST),
    "the first Ready group of a DisaggregatedSet's set: written at once": Row(
        lambda: then(none_ready_of_two(), disaggregated_child,
                     lambda w: change_pod(w, "sample-0", ready)),
        ["status LeaderWorkerSet sample"], []),
    "the counters of an Available set still for QUIET seconds: the deferred write": Row(
        lambda: then(at_rest(built_world(manifest())), leader_replicas(3), plan_pass,
                     later(QUIET)),
        ["status LeaderWorkerSet sample"], []),
    "the counters moved again meanwhile: QUIET more seconds from then": Row(
        lambda: then(at_rest(built_world(manifest())), leader_replicas(3), plan_pass,
                     later(QUIET - 1), leader_replicas(4)),
        [], [], QUIET),
    "... but never later than SETTLED_LONGEST after the first deferred change": Row(
        lambda: churned(at_rest(built_world(manifest()))),
        ["status LeaderWorkerSet sample"], []),
    "a condition changes while a counter waits: written at once": Row(
        lambda: then(one_ready_of_two(), lambda w: change_pod(w, "sample-0", not_ready),
                     plan_pass, later(1), lambda w: change_pod(w, "sample-0", ready),
                     lambda w: change_pod(w, "sample-1", ready)),
        ["status LeaderWorkerSet sample", "update ControllerRevision sample-84557c46b4-1"],
        ["AllGroupsReady"]),
    "at rest, Hash identity: nothing": Row(
        lambda: at_rest(built_world(manifest(size=2, groupIdentity="Hash"))), [], []),
    "scaled up: the leader StatefulSet's replicas": Row(
        lambda: then(at_rest(built_world(manifest())),
                     lambda w: change_lws(w, scale_to(3))),
        ["apply StatefulSet sample", "status LeaderWorkerSet sample"], ["GroupsProgressing"]),
    "template updated: a revision, the partition moved": Row(
        lambda: then(at_rest(built_world(manifest())), lambda w: change_lws(w, new_image)),
        ["create ControllerRevision sample-79bb7766dc-2", "apply StatefulSet sample",
         "status LeaderWorkerSet sample"], ["CreatingRevision", "GroupsUpdating"]),
    "leaders without worker StatefulSets: one each": Row(
        lambda: built_world(manifest(), worker_sets=False),
        ["create Service sample", "create StatefulSet sample-0", "create StatefulSet sample-1",
         "status LeaderWorkerSet sample"],
        ["GroupsProgressing", "GroupsProgressing", "GroupsProgressing"]),
    "UniquePerReplica: a Service per leader, none shared": Row(
        lambda: built_world(manifest(networkConfig={"subdomainPolicy": "UniquePerReplica"})),
        ["create Service sample-0", "create Service sample-1", "status LeaderWorkerSet sample",
         "update ControllerRevision sample-7ddc4b47bf-1"],
        ["AllGroupsReady"]),
    "a worker restarted: its group recreated, the pass ends": Row(
        lambda: then(at_rest(built_world(manifest())),
                     lambda w: change_pod(w, "sample-1-2", restarted)),
        ["delete Pod sample-1"], ["RecreateGroup"]),
    "a worker deleted (seen only as a tombstone): its group recreated": Row(
        lambda: worker_deleted(at_rest(built_world(manifest()))),
        ["delete Pod sample-1"], ["RecreateGroup"]),
    "restart policy None: a restart recreates nothing": Row(
        lambda: then(at_rest(built_world(manifest(template={"restartPolicy": "None"}))),
                     lambda w: change_pod(w, "sample-1-2", restarted)), [], []),
    "budget left: counted, then recreated": Row(
        lambda: counted(0)(at_rest(built_world(manifest(template={"maxGroupRestarts": 1})))),
        ["patch LeaderWorkerSet sample", "delete Pod sample-1"], ["RecreateGroup"]),
    "budget spent: the group stopped, its pods kept": Row(
        lambda: counted(1)(at_rest(built_world(manifest(template={"maxGroupRestarts": 1})))),
        ["patch Pod sample-1-1", "patch Pod sample-1-2", "patch Pod sample-1",
         "delete Pod sample-1"], ["ReplicaRestartBudgetExceeded"]),
    "backoff: the recreation deferred, looked at again when due": Row(
        lambda: counted(0)(at_rest(built_world(manifest(template={
            "restartBackoff": {"baseSeconds": 3600, "capSeconds": 3600}})))),
        [], ["GroupRestartBackoff"], 3001.0),
    "exclusive placement: the unplaced leader's workers wait for its node": Row(
        lambda: on_nodes(built_world(manifest(annotations={P + "exclusive-topology": "rack"}),
                                     worker_sets=False, states={"1/0": unplaced})),
        ["create Service sample", "create StatefulSet sample-0",
         "status LeaderWorkerSet sample"], ["GroupsProgressing", "GroupsProgressing"]),
    "Hash identity: a gated leader admitted, group readiness written": Row(
        lambda: built_world(manifest(size=2, groupIdentity="Hash"),
                            states={"1/0": lambda p: p["spec"].update(schedulingGates=[GATE])}),
        ["patch Pod sample-6f7d9c-1x", "create Service sample", "status Pod sample-6f7d9c-0x",
         "status Pod sample-6f7d9c-1x", "status LeaderWorkerSet sample",
         "update ControllerRevision sample-78fb79587c-1"], ["AllGroupsReady"]),
    "gang scheduling: Workload and PodGroup before anything else": Row(
        lambda: built_world(manifest(size=2, scheduling={"schedulingPolicy": {"gang": {}}})),
        ["create Workload sample-97dcdb687", "create PodGroup sample-97dcdb687-lws",
         "create Service sample", "status LeaderWorkerSet sample",
         "update ControllerRevision sample-78fb79587c-1"],
        ["GroupsProgressing", "GroupsProgressing", "AllGroupsReady"]),
    "gang scheduling, API not served: the condition, then wait": Row(
        lambda: with_options(built_world(manifest(
            size=2, scheduling={"schedulingPolicy": {"gang": {}}})), native_scheduling=False),
        ["status LeaderWorkerSet sample"], [], 10.0),
    "volcano: a PodGroup per group": Row(
        lambda: with_options(built_world(manifest(size=2, replicas=1), provider="volcano"),
                             provider="volcano"),
        ["create VolcanoPodGroup sample-0-78fb79587c", "create Service sample",
         "status LeaderWorkerSet sample", "update ControllerRevision sample-78fb79587c-1"],
        ["AllGroupsReady"]),
    "volcano at rest: nothing": Row(
        lambda: at_rest(with_options(built_world(manifest(size=2, replicas=1),
                                                 provider="volcano"), provider="volcano")),
        [], []),
}


@pytest.mark.parametrize("row", TABLE.values(), ids=TABLE.keys())
def test_one_pass(row: Row) -> None:
    planned = plan_pass(row.world())
    assert planned.writes() == row.writes
    assert [line.split(":")[0].removeprefix("event ") for line in planned.events()] == row.events
    assert planned.requeue == row.requeue


def _pass(world: World) -> Pass:
    return plan_pass(world)


def test_a_second_pass_after_the_first_plans_nothing() -> None:
    """What a pass writes is what the next one reads: the cache holds its answers."""
    world = new_world(manifest())
    assert _pass(world).writes()
    assert _pass(world).writes() == []


def test_the_leader_statefulset_carries_the_rollout() -> None:
    """An update starts with the partition at the top (upstream's rollingUpdateParameters): no
    leader replaced yet."""
    world = then(at_rest(built_world(manifest(replicas=4))), lambda w: change_lws(w, new_image))
    applied = [a for a in _pass(world).actions if isinstance(a, Apply)]
    assert [a.body["spec"]["updateStrategy"]["rollingUpdate"]["partition"] for a in applied] == [
        4]


def test_exclusive_placement_reads_the_leaders_node() -> None:
    """The node's topology label goes into the worker StatefulSet's affinity."""
    world = on_nodes(built_world(manifest(annotations={P + "exclusive-topology": "rack"}),
                                 worker_sets=False))
    created = [a.body for a in _pass(world).actions
               if getattr(a, "target", None) and a.target.kind == "StatefulSet"
               and not isinstance(a, Apply)]
    assert [b["spec"]["template"]["spec"]["nodeSelector"] for b in created] == [
        {"rack": "r7"}, {"rack": "r7"}]


def test_recreation_is_guarded_by_the_leaders_uid() -> None:
    world = then(at_rest(built_world(manifest())),
                 lambda w: change_pod(w, "sample-1-2", restarted))
    (delete,) = [a for a in _pass(world).actions if isinstance(a, Delete)]
    assert (delete.uid, delete.propagation) == ("leader-1", "Foreground")
    assert delete.common.policy.not_found is Then.SKIP
    assert delete.common.policy.conflict is Then.SKIP


def test_a_deferred_recreation_survives_in_the_tombstones() -> None:
    """No memory of the deferral: the tombstone stays in the cache while it still triggers
    a recreation, so every pass (or a new leader's first) recomputes it."""
    world = worker_deleted(at_rest(built_world(manifest(template={
        "restartBackoff": {"baseSeconds": 3600, "capSeconds": 3600}}))))
    first = _pass(world)
    assert first.events()
    assert first.requeue == 3001.0
    assert len(world.cache.tombstones(world.key)) == 1
    world.memory = type(world.memory)()  # a new leader remembers nothing
    again = _pass(world)
    assert again.requeue == 3001.0
    assert again.events() == first.events()


def test_tombstones_that_trigger_nothing_are_dropped() -> None:
    world = worker_deleted(at_rest(built_world(manifest(template={"restartPolicy": "None"}))))
    assert _pass(world).writes() == []
    assert world.cache.tombstones(world.key) == []


def test_status_writes_are_guarded_by_resource_version() -> None:
    world = new_world(manifest())
    (status,) = [a for a in _pass(world).actions
                 if isinstance(a, Patch) and a.subresource == "status"]
    assert status.body["metadata"]["resourceVersion"] == "100"


def test_a_deferred_write_survives_a_new_leader() -> None:
    """The deferral is memory a new leader lacks: its first pass defers anew, then writes."""
    world = then(one_ready_of_two(), lambda w: change_pod(w, "sample-0", not_ready))
    assert _pass(world).requeue == LONGEST
    world.memory = type(world.memory)()
    later(LONGEST - 1)(world)
    again = _pass(world)
    assert (again.writes(), again.requeue) == ([], LONGEST)
    later(LONGEST)(world)
    assert _pass(world).writes() == ["status LeaderWorkerSet sample"]
    assert world.memory == type(world.memory)()  # nothing left pending
    assert world.lws["status"]["readyReplicas"] == 0
