"""End to end with the real kube-scheduler: native gang scheduling, exclusive placement, subgroups.

The fake GPU nodes have 8 GPUs each in racks of four. Pods asking for 8 GPUs take a whole node,
and a node selector on one rack plus "blocker" pods (plain pods on the same rack) leave exactly
the capacity a test wants. What is asserted is what a user sees: which pods got a node, the
Workload and PodGroup objects, the pods' ``spec.schedulingGroup`` and the LeaderWorkerSet
status.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

import pytest
from kubernetes.aio.dynamic.exceptions import DynamicApiError

from e2e.cluster.nodes import RACK_LABEL
from e2e.harness.builder import API, KIND, P
from e2e.harness.converge import converged, pods_of
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH, condition, wait_for

pytestmark = pytest.mark.full

SCHED = "scheduling.k8s.io/v1beta1"
RACK = "rack-3"  # the tests that count GPUs keep to the last rack
GATE = P + "group-replacement"


def gpu_lws(name: str, replicas: int, size: int, scheduling: Any, rack: str | None = RACK,
            gpus: str = "8", annotations: dict[str, str] | None = None,
            **spec: Any) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {"containers": [{"name": "w", "image": "engine:1", "resources": {
        "limits": {"nvidia.com/gpu": gpus}}}]}
    if rack:
        pod_spec["nodeSelector"] = {RACK_LABEL: rack}
    body: dict[str, Any] = {
        "apiVersion": API, "kind": KIND,
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {
            "size": size, "workerTemplate": {"spec": pod_spec}}, **spec}}
    if scheduling is not None:
        body["spec"]["scheduling"] = scheduling
    return body


async def rack_nodes(op: Operator, rack: str) -> list[str]:
    nodes = await op.kube.list("v1", "Node", label_selector=f"{RACK_LABEL}={rack}")
    return sorted(n["metadata"]["name"] for n in nodes)


async def wait_rack_free(op: Operator, rack: str = RACK) -> None:
    """Pods of earlier tests (any namespace) may still hold the rack's GPUs for a moment."""
    names = set(await rack_nodes(op, rack))

    async def free() -> bool:
        pods = await op.kube.list("v1", "Pod")
        return not any(p["spec"].get("nodeName") in names for p in pods)

    await wait_for(free, timeout=60, what=f"{rack} to be free")


async def block(op: Operator, count: int, rack: str = RACK) -> list[str]:
    """``count`` plain pods taking one whole node each of ``rack``; waits until they run."""
    names = [f"blocker-{i}" for i in range(count)]
    for name in names:
        await op.kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                              "spec": {"nodeSelector": {RACK_LABEL: rack}, "containers": [{
                                  "name": "b", "image": "pause:1", "resources": {
                                      "limits": {"nvidia.com/gpu": "8"}}}]}}, op.namespace)

    async def placed() -> bool:
        pods = [await op.kube.get("v1", "Pod", n, op.namespace) for n in names]
        return all(p and p["spec"].get("nodeName") for p in pods)

    await wait_for(placed, timeout=60, what="blockers to be placed")
    return names


async def unblock(op: Operator, names: list[str]) -> None:
    for name in names:
        await op.kube.delete("v1", "Pod", name, op.namespace)


async def delete_lws(op: Operator, name: str) -> None:
    await op.kube.delete(API, KIND, name, op.namespace)

    async def gone() -> bool:
        return not await pods_of(op, name) and not await op.kube.get(API, KIND, name,
                                                                       op.namespace)

    await wait_for(gone, timeout=90, what=f"{name} to be gone")


def unschedulable(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "PodScheduled" and c.get("status") == "False"
               and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])


def by_group(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        out.setdefault(pod["metadata"]["labels"][P + "group-index"], []).append(pod)
    return out


async def pod_groups(op: Operator, name: str) -> list[dict[str, Any]]:
    groups = await op.kube.list(SCHED, "PodGroup", op.namespace,
                                label_selector=f"{P}name={name}")
    return [g for g in groups if not g["metadata"].get("deletionTimestamp")]


async def test_replica_gang_places_whole_groups_only(operator: Operator) -> None:
    """Capacity for one group of two: one group runs whole, the other has no pod placed at
    all while it waits; it places as soon as capacity frees."""
    op, ns = operator, operator.namespace
    await wait_rack_free(op)
    blockers = await block(op, 2)
    await op.kube.create(gpu_lws("gang", 2, 2, {}), ns)

    async def one_placed_one_waiting() -> dict[str, list[dict[str, Any]]] | None:
        groups = by_group(await pods_of(op, "gang"))
        if len(groups) != 2 or any(len(g) != 2 for g in groups.values()):
            return None
        placed = [g for g in groups.values() if all(p["spec"].get("nodeName") for p in g)]
        waiting = [g for g in groups.values() if all(unschedulable(p) for p in g)]
        return groups if len(placed) == 1 and len(waiting) == 1 else None

    groups = await wait_for(one_placed_one_waiting, timeout=90, what="one group placed")
    assert groups is not None
    waiting = next(g for g in groups.values() if unschedulable(g[0]))
    assert not any(p["spec"].get("nodeName") for p in waiting), "a partial group was placed"

    # What a user inspects: the Workload, one PodGroup per replica, each pod's group.
    lws = await op.kube.get(API, KIND, "gang", ns)
    assert lws is not None
    uid_hash = re.escape(lws["metadata"]["name"]) + r"-[bcdfghjklmnpqrstvwxz2456789]{1,10}"
    workloads = await op.kube.list(SCHED, "Workload", ns, label_selector=f"{P}name=gang")
    assert len(workloads) == 1
    workload = workloads[0]
    assert re.fullmatch(uid_hash, workload["metadata"]["name"])
    assert workload["spec"]["controllerRef"] == {
        "apiGroup": "leaderworkerset.x-k8s.io", "kind": "LeaderWorkerSet", "name": "gang"}
    assert [(t["name"], t["schedulingPolicy"]["gang"]["minCount"])
            for t in workload["spec"]["podGroupTemplates"]] == [("replica", 2)]
    groups_now = await pod_groups(op, "gang")
    assert len(groups_now) == 2
    for group in groups_now:
        assert re.fullmatch(uid_hash + r"\.[bcdfghjklmnpqrstvwxz2456789]{5}-[01]-[a-z0-9]+",
                            group["metadata"]["name"]), group["metadata"]["name"]
        assert group["spec"]["schedulingPolicy"] == {"gang": {"minCount": 2}}
        assert group["spec"]["workloadRef"] == {
            "workloadName": workload["metadata"]["name"], "templateName": "replica"}
    for members in groups.values():
        names = {p["spec"]["schedulingGroup"]["podGroupName"] for p in members}
        assert len(names) == 1
        assert names <= {g["metadata"]["name"] for g in groups_now}
        incarnation = members[0]["metadata"]["annotations"][P + "group-incarnation"]
        assert all(p["metadata"]["annotations"][P + "group-incarnation"] == incarnation
                   for p in members)
        assert not any(g.get("name") == GATE for p in members
                       for g in p["spec"].get("schedulingGates") or [])
    assert condition(lws, "WorkloadSchedulingCreated") == "True"

    await unblock(op, blockers)
    await converged(op, "gang", 2, 2, timeout=120)
    await delete_lws(op, "gang")


async def test_whole_lws_gang_is_all_or_nothing(operator: Operator) -> None:
    """Three free nodes for four pods: pod-by-pod scheduling would place three; the whole-LWS
    gang places none, then all four once the fourth node frees."""
    op, ns = operator, operator.namespace
    await wait_rack_free(op)
    blockers = await block(op, 1)
    await op.kube.create(gpu_lws("whole", 2, 2, {"schedulingPolicy": {"gang": {}}}), ns)

    async def all_waiting() -> list[dict[str, Any]] | None:
        pods = await pods_of(op, "whole")
        return pods if len(pods) == 4 and all(unschedulable(p) for p in pods) else None

    pods = await wait_for(all_waiting, timeout=90, what="the whole gang to wait")
    assert pods is not None
    assert not any(p["spec"].get("nodeName") for p in pods)
    groups = await pod_groups(op, "whole")
    assert [(g["metadata"]["name"].rsplit("-", 1)[1], g["spec"]["schedulingPolicy"])
            for g in groups] == [("lws", {"gang": {"minCount": 4}})]
    assert {p["spec"]["schedulingGroup"]["podGroupName"] for p in pods} == {
        groups[0]["metadata"]["name"]}
    assert not any(p["spec"].get("schedulingGates") for p in pods)  # no gate at this level

    await unblock(op, blockers)
    await converged(op, "whole", 2, 2, timeout=120)
    await delete_lws(op, "whole")


async def test_scale_up_adds_independent_pod_groups(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    await op.kube.create(gpu_lws("scaled", 1, 3, {}, rack=None, gpus="1"), ns)
    await converged(op, "scaled", 1, 3)
    first = await pod_groups(op, "scaled")
    assert len(first) == 1
    await op.kube.patch(API, KIND, "scaled", {"spec": {"replicas": 3}}, ns)
    await converged(op, "scaled", 3, 3)
    groups = await pod_groups(op, "scaled")
    assert sorted(g["metadata"]["labels"][P + "group-index"] for g in groups) == ["0", "1", "2"]
    assert first[0]["metadata"]["uid"] in {g["metadata"]["uid"] for g in groups}  # untouched
    assert len({g["metadata"]["name"] for g in groups}) == 3

    await op.kube.patch(API, KIND, "scaled", {"spec": {"replicas": 1}}, ns)
    await converged(op, "scaled", 1, 3)

    async def one_left() -> bool:
        return [g["metadata"]["uid"] for g in await pod_groups(op, "scaled")] == [
            first[0]["metadata"]["uid"]]

    await wait_for(one_left, timeout=60, what="the removed replicas' PodGroups to go")
    await delete_lws(op, "scaled")


async def test_resize_rolls_the_gangs_to_the_new_size(operator: Operator) -> None:
    """A size change is a rollout: every replica gets a PodGroup of its new revision with the
    new minimum, the Workload template follows, and the old revision's PodGroups go."""
    op, ns = operator, operator.namespace
    await op.kube.create(gpu_lws("resized", 2, 2, {}, rack=None, gpus="1"), ns)
    pods = await converged(op, "resized", 2, 2)
    old_revision = pods[0]["metadata"]["labels"][P + "template-revision-hash"]
    await op.kube.patch(API, KIND, "resized", {"spec": {"leaderWorkerTemplate": {"size": 3}}}, ns)

    async def rolled() -> list[dict[str, Any]] | None:
        current = await pods_of(op, "resized")
        revisions = {p["metadata"]["labels"][P + "template-revision-hash"] for p in current}
        groups = await pod_groups(op, "resized")
        if (len(current) == 6 and revisions != {old_revision} and len(revisions) == 1
                and len(groups) == 2
                and all(g["metadata"]["labels"][P + "template-revision-hash"] in revisions
                        for g in groups)):
            return groups
        return None

    groups = await wait_for(rolled, timeout=180, what="the resize to roll the gangs")
    assert groups is not None
    assert [g["spec"]["schedulingPolicy"] for g in groups] == [{"gang": {"minCount": 3}}] * 2
    await converged(op, "resized", 2, 3)
    workloads = await op.kube.list(SCHED, "Workload", ns, label_selector=f"{P}name=resized")
    assert [t["schedulingPolicy"] for t in workloads[0]["spec"]["podGroupTemplates"]] == [
        {"gang": {"minCount": 3}}]
    await delete_lws(op, "resized")


async def test_pod_groups_of_an_earlier_naming_scheme_are_deleted(operator: Operator) -> None:
    """A PodGroup named without an incarnation (what an earlier controller creates for a leader
    that carries one) is referenced by no pod: the next pass deletes it."""
    op, ns = operator, operator.namespace
    await op.kube.create(gpu_lws("legacy", 1, 2, {}, rack=None, gpus="1"), ns)
    pods = await converged(op, "legacy", 1, 2)
    group = (await pod_groups(op, "legacy"))[0]
    revision = pods[0]["metadata"]["labels"][P + "template-revision-hash"]
    workload = group["spec"]["workloadRef"]["workloadName"]
    legacy = f"{workload}-0-{revision}"
    await op.kube.create({"apiVersion": SCHED, "kind": "PodGroup", "metadata": {
        "name": legacy, "labels": {P + "name": "legacy", P + "group-index": "0",
                                   P + "template-revision-hash": revision,
                                   P + "scheduling-level": "replica"}},
        "spec": {"workloadRef": {"workloadName": workload, "templateName": "replica"},
                 "schedulingPolicy": {"gang": {"minCount": 2}}}}, ns)

    async def deleted() -> bool:
        return [g["metadata"]["name"] for g in await pod_groups(op, "legacy")] == [
            group["metadata"]["name"]]

    await wait_for(deleted, timeout=30, what="the incarnation-less PodGroup to be deleted")
    await delete_lws(op, "legacy")


async def test_role_level_and_a_recreated_leader_gets_new_pod_groups(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    scheduling: dict[str, Any] = {"replica": {"leader": {}, "worker": {}}}
    await op.kube.create(gpu_lws("roles", 1, 3, scheduling, rack=None, gpus="1"), ns)
    pods = await converged(op, "roles", 1, 3)
    groups = {g["metadata"]["labels"][P + "role"]: g for g in await pod_groups(op, "roles")}
    assert {r: g["spec"]["schedulingPolicy"] for r, g in groups.items()} == {
        "leader": {"gang": {"minCount": 1}}, "worker": {"gang": {"minCount": 2}}}
    for pod in pods:
        role = "leader" if pod["metadata"]["labels"][P + "worker-index"] == "0" else "worker"
        assert pod["spec"]["schedulingGroup"]["podGroupName"] == (
            groups[role]["metadata"]["name"])
        assert f"-0-{role}-" in groups[role]["metadata"]["name"]
    old = {g["metadata"]["name"] for g in groups.values()}

    # A recreated leader (same name, index and revision) gets PodGroups of its own.
    await op.kube.delete("v1", "Pod", "roles-0", ns, propagation="Foreground")

    async def recreated() -> set[str] | None:
        current = {g["metadata"]["name"] for g in await pod_groups(op, "roles")}
        return current if len(current) == 2 and not current & old else None

    await wait_for(recreated, timeout=90, what="new PodGroups for the new leader")
    await converged(op, "roles", 1, 3)
    await delete_lws(op, "roles")


async def test_a_parent_owned_workload_sets_the_policy(operator: Operator) -> None:
    """With scheduling.k8s.io/group-template-name, LWS creates no Workload: its PodGroups
    instantiate the parent's template, minCount included; until that Workload exists the
    LeaderWorkerSet waits, and says so."""
    op, ns = operator, operator.namespace
    parent = await op.kube.create({"apiVersion": "v1", "kind": "ConfigMap",
                                   "metadata": {"name": "parent"}}, ns)
    body = gpu_lws("child", 1, 2, {}, rack=None, gpus="1",
                   annotations={"scheduling.k8s.io/group-template-name": "decode"})
    body["metadata"]["ownerReferences"] = [{
        "apiVersion": "v1", "kind": "ConfigMap", "name": "parent",
        "uid": parent["metadata"]["uid"], "controller": True}]
    await op.kube.create(body, ns)

    async def waiting() -> bool:
        lws = await op.kube.get(API, KIND, "child", ns)
        return condition(lws, "WorkloadSchedulingCreated") == "False"

    await wait_for(waiting, timeout=30, what="ParentWorkloadNotReady")
    assert not await pods_of(op, "child")  # no member pod before its Workload
    await op.kube.create({"apiVersion": SCHED, "kind": "Workload",
                          "metadata": {"name": "parent-wl"},
                          "spec": {"controllerRef": {"kind": "ConfigMap", "name": "parent"},
                                   "podGroupTemplates": [{
                                       "name": "decode",
                                       "schedulingPolicy": {"gang": {"minCount": 2}}}]}}, ns)
    await converged(op, "child", 1, 2, timeout=60)
    groups = await pod_groups(op, "child")
    assert [(g["spec"]["workloadRef"], g["spec"]["schedulingPolicy"]) for g in groups] == [
        ({"workloadName": "parent-wl", "templateName": "decode"}, {"gang": {"minCount": 2}})]
    assert groups[0]["metadata"]["name"].startswith("child-")  # named after the LWS
    assert not await op.kube.list(SCHED, "Workload", ns, label_selector=f"{P}name=child")
    await delete_lws(op, "child")
    await op.kube.delete(SCHED, "Workload", "parent-wl", ns)
    await op.kube.delete("v1", "ConfigMap", "parent", ns)


async def test_gang_restrictions_are_rejected_naming_the_field(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    cases = [
        (gpu_lws("bad", 1, 2, {}, startupPolicy="LeaderReady"), "spec.startupPolicy"),
        (gpu_lws("bad", 1, 2, {}, annotations={P + "exclusive-topology": RACK_LABEL}),
         "metadata.annotations.leaderworkerset.sigs.k8s.io/exclusive-topology"),
        (gpu_lws("bad", 1, 2, {"schedulingPolicy": {"gang": {}}, "replica": {}}),
         "spec.scheduling"),
    ]
    with_group = gpu_lws("bad", 1, 2, {})
    with_group["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["schedulingGroup"] = {
        "podGroupName": "mine"}
    cases.append((with_group, "spec.leaderWorkerTemplate.workerTemplate.spec.schedulingGroup"))
    for body, field in cases:
        with pytest.raises(DynamicApiError) as exc:
            await op.kube.create(body, ns)
        assert field in str(exc.value.body), exc.value.body
    await op.kube.create(gpu_lws("fixed", 0, 2, None), ns)
    with pytest.raises(DynamicApiError) as exc:
        await op.kube.patch(API, KIND, "fixed", {"spec": {"scheduling": {}}}, ns,
                            content_type=MERGE_PATCH)
    assert "spec.scheduling: Forbidden: gang scheduling cannot be added" in str(exc.value.body)
    await op.kube.create(gpu_lws("leveled", 0, 2, {}), ns)
    with pytest.raises(DynamicApiError) as exc:
        await op.kube.patch(API, KIND, "leveled", {"spec": {"scheduling": {
            "replica": {"worker": {}}}}}, ns)
    assert "the scheduling level cannot change" in str(exc.value.body)
    await delete_lws(op, "fixed")
    await delete_lws(op, "leveled")


async def _racks_of(op: Operator, pods: list[dict[str, Any]], label: str) -> dict[str, set[str]]:
    racks: dict[str, set[str]] = {}
    for pod in pods:
        node = await op.kube.get("v1", "Node", pod["spec"]["nodeName"])
        assert node is not None
        racks.setdefault(pod["metadata"]["labels"][label], set()).add(
            node["metadata"]["labels"][RACK_LABEL])
    return racks


async def test_exclusive_topology_gives_each_group_its_own_rack(operator: Operator) -> None:
    """Four racks, five groups: four groups each fill one rack alone, the fifth waits rather
    than share one."""
    op, ns = operator, operator.namespace
    for rack in ("rack-0", "rack-1", "rack-2", "rack-3"):
        await wait_rack_free(op, rack)
    body = gpu_lws("excl", 5, 4, None, rack=None, gpus="1",
                   annotations={P + "exclusive-topology": RACK_LABEL})

    async def four_placed() -> list[dict[str, Any]] | None:
        pods = await pods_of(op, "excl")
        placed = [p for p in pods if p["spec"].get("nodeName")]
        leaders = [p for p in pods if p["metadata"]["labels"][P + "worker-index"] == "0"]
        if len(placed) == 16 and len(leaders) == 5 and any(unschedulable(p) for p in leaders):
            return placed
        return None

    await op.kube.create(body, ns)
    placed = await wait_for(four_placed, timeout=120, what="four groups in four racks")
    assert placed is not None
    racks = await _racks_of(op, placed, P + "group-index")
    assert all(len(r) == 1 for r in racks.values()), racks
    assert len({next(iter(r)) for r in racks.values()}) == 4, racks
    waiting = [p for p in await pods_of(op, "excl") if not p["spec"].get("nodeName")]
    assert [p["metadata"]["labels"][P + "worker-index"] for p in waiting] == ["0"]

    await op.kube.patch(API, KIND, "excl", {"spec": {"replicas": 4}}, ns)
    await converged(op, "excl", 4, 4, timeout=120)
    await delete_lws(op, "excl")


async def test_subgroup_exclusive_placement(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    for rack in ("rack-0", "rack-1", "rack-2", "rack-3"):
        await wait_rack_free(op, rack)
    body = gpu_lws("subex", 2, 8, None, rack=None, gpus="1",
                   annotations={P + "subgroup-exclusive-topology": RACK_LABEL})
    body["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] = {"subGroupSize": 4}
    await op.kube.create(body, ns)
    pods = await converged(op, "subex", 2, 8, timeout=120)
    racks = await _racks_of(op, pods, P + "subgroup-key")
    assert len(racks) == 4
    assert all(len(r) == 1 for r in racks.values()), racks
    assert len({next(iter(r)) for r in racks.values()}) == 4, racks
    await delete_lws(op, "subex")


async def test_a_gang_lws_at_rest_costs_no_writes(operator: Operator) -> None:
    """Workload, PodGroups and gates included: passes over a converged LWS write nothing."""
    op, ns = operator, operator.namespace
    await op.kube.create(gpu_lws("quiet", 2, 2, {}, rack=None, gpus="1"), ns)
    await converged(op, "quiet", 2, 2)
    await asyncio.sleep(2)  # let the last status write and its watch events settle
    before = op.writes()
    assert any(r == "podgroups" for _, r in before)  # the counters are really read
    for _ in range(3):
        op.runtime.queue.add((ns, "quiet"))
        await asyncio.sleep(1)
    assert op.writes() == before
    await delete_lws(op, "quiet")
