"""The api tier (etcd + kube-apiserver alone) behaves as the integration tests expect.

No scheduler and no kubelet run here: a pod stays unscheduled until a test writes its status, as
upstream's integration tests do, and the gated scheduling API is served.
"""

from __future__ import annotations

import pytest

from e2e.kube import MERGE_PATCH, Kube, is_ready

pytestmark = pytest.mark.api


async def test_pods_only_change_when_the_test_sets_their_status(
    kube: Kube, namespace: str
) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "leader"},
        "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]},
    }
    created = await kube.create(pod, namespace)
    assert created["status"]["phase"] == "Pending"
    assert not created["spec"].get("nodeName")
    status = {"status": {"phase": "Running", "conditions": [
        {"type": "Ready", "status": "True"}, {"type": "ContainersReady", "status": "True"}]}}
    await kube.patch("v1", "Pod", "leader", status, namespace, content_type=MERGE_PATCH,
                     subresource="status")
    got = await kube.get("v1", "Pod", "leader", namespace)
    assert is_ready(got)
    assert got is not None
    assert got["status"]["phase"] == "Running"


async def test_workload_scheduling_api_is_served(kube: Kube, namespace: str) -> None:
    workload = await kube.create({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "lws"},
        "spec": {"podGroupTemplates": [{
            "name": "replica", "schedulingPolicy": {"gang": {"minCount": 4}}}]},
    }, namespace)
    assert workload["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] == 4
    group = await kube.create({
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": "lws-0"},
        "spec": {
            "workloadRef": {"workloadName": "lws", "templateName": "replica"},
            "schedulingPolicy": {"gang": {"minCount": 4}},
        },
    }, namespace)
    assert group["spec"]["workloadRef"]["templateName"] == "replica"
