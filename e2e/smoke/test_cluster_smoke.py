"""Smoke tests proving the local control plane is a real cluster.

Each test exercises one piece later issues depend on: the StatefulSet controller with the ordinals
and parallel policy our worker StatefulSets use, the scheduler with scheduling gates, gang
scheduling through the Workload-Aware Scheduling API, the garbage collector's cascades, kwok's
node and pod lifecycle and the fault injections the failure tests use.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from e2e.cluster import LocalCluster
from e2e.cluster.faults import fail_pod, restart_container, set_node_ready
from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.kube import MERGE_PATCH, STRATEGIC_PATCH, Kube, condition, is_ready, wait_for

pytestmark = pytest.mark.full

PAUSE = "registry.k8s.io/pause:3.10"


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {"containers": [{"name": "main", "image": PAUSE}], **spec},
    }


def statefulset(name: str, replicas: int, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "serviceName": name,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": [{"name": "main", "image": PAUSE,
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
            },
            **spec,
        },
    }


async def test_nodes_carry_topology_and_accelerators(cluster: LocalCluster, kube: Kube) -> None:
    nodes = await kube.list("v1", "Node")
    ready = [n for n in nodes if condition(n, "Ready") == "True"]
    assert len(ready) == 20
    gpu = [n for n in ready if n["metadata"]["name"].startswith("gpu-node-")]
    tpu = [n for n in ready if n["metadata"]["name"].startswith("tpu-node-")]
    assert len(gpu) == 16
    assert len(tpu) == 4
    assert {n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in gpu} == {
        "zone-a", "zone-b"}
    racks: dict[str, int] = {}
    for n in gpu:
        rack = n["metadata"]["labels"]["topology.kubernetes.io/rack"]
        racks[rack] = racks.get(rack, 0) + 1
    assert racks == {"rack-0": 4, "rack-1": 4, "rack-2": 4, "rack-3": 4}
    assert all(n["status"]["allocatable"]["nvidia.com/gpu"] == "8" for n in gpu)
    assert all(n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] for n in ready)
    assert all(n["metadata"]["labels"]["kubernetes.io/hostname"] == n["metadata"]["name"]
               for n in ready)
    for n in tpu:
        labels = n["metadata"]["labels"]
        assert labels["cloud.google.com/gke-tpu-topology"] == "4x4"
        assert labels["cloud.google.com/gke-tpu-accelerator"] == "tpu-v5-lite-podslice"
        assert n["status"]["allocatable"]["google.com/tpu"] == "4"
    version = cluster.kubectl("version", "-o", "json")
    assert '"gitVersion": "v1.37.2"' in version


async def test_parallel_statefulset_with_ordinal_start(kube: Kube, namespace: str) -> None:
    await kube.create(statefulset("workers", 3, podManagementPolicy="Parallel",
                                  ordinals={"start": 1}), namespace)

    async def ready_pods() -> list[str]:
        pods = await kube.list("v1", "Pod", namespace, label_selector="app=workers")
        names = sorted(p["metadata"]["name"] for p in pods if is_ready(p))
        return names if len(names) == 3 else []

    assert await wait_for(ready_pods, what="3 ready workers") == [
        "workers-1", "workers-2", "workers-3"]
    for name in ("workers-1", "workers-2", "workers-3"):
        got = await kube.get("v1", "Pod", name, namespace)
        assert got is not None
        assert got["spec"]["nodeName"].startswith("gpu-node-")
        assert got["status"]["phase"] == "Running"
        assert got["status"]["podIP"]

    async def sts_ready() -> bool:
        sts = await kube.get("apps/v1", "StatefulSet", "workers", namespace)
        return bool(sts and sts.get("status", {}).get("readyReplicas") == 3)

    await wait_for(sts_ready, what="statefulset readyReplicas=3")


async def test_scheduling_gate_holds_pod_until_removed(kube: Kube, namespace: str) -> None:
    await kube.create(pod("gated", schedulingGates=[{"name": "example.com/hold"}]), namespace)

    async def gated_condition() -> str | None:
        got = await kube.get("v1", "Pod", "gated", namespace)
        for cond in (got or {}).get("status", {}).get("conditions") or []:
            if cond["type"] == "PodScheduled":
                return str(cond.get("reason"))
        return None

    assert await wait_for(gated_condition, what="PodScheduled condition") == "SchedulingGated"
    got = await kube.get("v1", "Pod", "gated", namespace)
    assert got is not None
    assert not got["spec"].get("nodeName")
    assert got["status"]["phase"] == "Pending"

    await kube.patch("v1", "Pod", "gated", {"spec": {"schedulingGates": None}}, namespace,
                     content_type=MERGE_PATCH)

    async def running() -> bool:
        return is_ready(await kube.get("v1", "Pod", "gated", namespace))

    await wait_for(running, what="ungated pod Ready")


async def test_gang_scheduling_waits_for_min_count(kube: Kube, namespace: str) -> None:
    await kube.create({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "gang"},
        "spec": {"schedulingPolicy": {"gang": {"minCount": 2}}},
    }, namespace)
    member = {"schedulingGroup": {"podGroupName": "gang"}}
    created = await kube.create(pod("member-0", **member), namespace)
    # The field is gated: a server without the Workload API silently drops it.
    assert created["spec"]["schedulingGroup"] == {"podGroupName": "gang"}

    async def unschedulable() -> bool:
        got = await kube.get("v1", "Pod", "member-0", namespace)
        return condition(got, "PodScheduled") == "False" or bool(got and got["status"].get(
            "phase") == "Pending" and not got["spec"].get("nodeName"))

    await wait_for(unschedulable, what="first member pending")
    # Give the scheduler several cycles: a lone member of a gang of two must stay unbound.
    await asyncio.sleep(3)
    lone = await kube.get("v1", "Pod", "member-0", namespace)
    assert lone is not None
    assert not lone["spec"].get("nodeName"), "a gang member was bound before quorum"

    await kube.create(pod("member-1", **member), namespace)

    async def both_bound() -> bool:
        pods = [await kube.get("v1", "Pod", n, namespace) for n in ("member-0", "member-1")]
        return all(p and p["spec"].get("nodeName") and is_ready(p) for p in pods)

    await wait_for(both_bound, what="both gang members bound and Ready")


@pytest.mark.parametrize("propagation", ["Background", "Foreground"])
async def test_owner_reference_cascade(kube: Kube, namespace: str, propagation: str) -> None:
    await kube.create(statefulset("owner", 2), namespace)

    async def pods() -> list[dict[str, Any]]:
        return await kube.list("v1", "Pod", namespace, label_selector="app=owner")

    async def two_ready() -> bool:
        return len([p for p in await pods() if is_ready(p)]) == 2

    await wait_for(two_ready, what="owned pods Ready")
    answer = await kube.delete("apps/v1", "StatefulSet", "owner", namespace,
                               propagation=propagation)
    assert answer is not None
    if propagation == "Foreground":
        # The owner stays, marked for deletion, until the garbage collector removed its pods.
        assert answer["kind"] == "StatefulSet"
        assert answer["metadata"]["deletionTimestamp"]
        assert answer["metadata"]["finalizers"] == ["foregroundDeletion"]
    else:
        assert answer["kind"] == "Status"

    async def gone() -> bool:
        owner = await kube.get("apps/v1", "StatefulSet", "owner", namespace)
        return owner is None and not await pods()

    await wait_for(gone, what=f"{propagation} cascade")


async def test_container_restart_and_pod_failure_injection(kube: Kube, namespace: str) -> None:
    for name in ("restarts", "fails"):
        await kube.create(pod(name), namespace)

    async def both_ready() -> bool:
        pods = [await kube.get("v1", "Pod", n, namespace) for n in ("restarts", "fails")]
        return all(is_ready(p) for p in pods)

    await wait_for(both_ready, what="pods Ready")

    assert await restart_container(kube, namespace, "restarts") == 1
    assert await restart_container(kube, namespace, "restarts") == 2
    await asyncio.sleep(1)  # kwok must not overwrite a Running pod's reported restarts
    got = await kube.get("v1", "Pod", "restarts", namespace)
    assert got is not None
    assert got["status"]["containerStatuses"][0]["restartCount"] == 2
    assert got["status"]["containerStatuses"][0]["lastState"]["terminated"]["exitCode"] == 137

    await fail_pod(kube, namespace, "fails")

    async def failed() -> bool:
        got = await kube.get("v1", "Pod", "fails", namespace)
        return bool(got and got["status"]["phase"] == "Failed")

    await wait_for(failed, what="pod Failed")


async def test_node_not_ready_is_observed(kube: Kube) -> None:
    node = "gpu-node-015"
    await set_node_ready(kube, node, ready=False)
    try:
        async def not_ready() -> bool:
            return condition(await kube.get("v1", "Node", node), "Ready") == "False"

        await wait_for(not_ready, what=f"{node} NotReady")

        async def tainted() -> bool:
            got = await kube.get("v1", "Node", node)
            taints = (got or {}).get("spec", {}).get("taints") or []
            return any(t["key"] == "node.kubernetes.io/not-ready" for t in taints)

        await wait_for(tainted, what="node-lifecycle controller taints the node")
    finally:
        await set_node_ready(kube, node, ready=True)

    async def ready_again() -> bool:
        return condition(await kube.get("v1", "Node", node), "Ready") == "True"

    await wait_for(ready_again, what=f"{node} Ready again")


async def test_readiness_gates_hold_ready_like_a_kubelet(kube: Kube, namespace: str) -> None:
    gate = "example.com/group-ready"
    await kube.create(pod("gated-ready", readinessGates=[{"conditionType": gate}]), namespace)

    async def running() -> dict[str, Any] | None:
        got = await kube.get("v1", "Pod", "gated-ready", namespace)
        return got if got and got["status"].get("phase") == "Running" else None

    got = await wait_for(running, what="pod Running")
    assert condition(got, "ContainersReady") == "True"
    assert condition(got, "Ready") == "False"
    await asyncio.sleep(1)
    assert not is_ready(await kube.get("v1", "Pod", "gated-ready", namespace))

    await kube.patch("v1", "Pod", "gated-ready", {"status": {"conditions": [
        {"type": gate, "status": "True"}]}}, namespace, content_type=STRATEGIC_PATCH,
        subresource="status")

    async def ready() -> bool:
        return is_ready(await kube.get("v1", "Pod", "gated-ready", namespace))

    await wait_for(ready, what="Ready once the gate is True")


async def test_ready_delay_annotation_holds_a_scheduled_pod(kube: Kube, namespace: str) -> None:
    slow = pod("slow")
    slow["metadata"]["annotations"] = {READY_DELAY_ANNOTATION: "1h"}
    await kube.create(slow, namespace)

    async def scheduled() -> dict[str, Any] | None:
        got = await kube.get("v1", "Pod", "slow", namespace)
        return got if got and got["spec"].get("nodeName") else None

    await wait_for(scheduled, what="pod bound")
    await asyncio.sleep(2)
    got = await kube.get("v1", "Pod", "slow", namespace)
    assert got is not None
    assert got["status"]["phase"] == "Pending"
    assert not is_ready(got)
