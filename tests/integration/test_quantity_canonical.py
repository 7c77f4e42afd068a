"""Quantities against a real kube-apiserver.

The server stores a StatefulSet's or Deployment's quantities in canonical form; the controller's
desired objects hold them as the LeaderWorkerSet's template writes them. Here the server is the
oracle: the canonical forms the unit tests assume are the ones it stores, and a leader
StatefulSet and leader Deployment applied exactly as the controller applies them (its builders,
its client, server-side apply) are in place afterwards by the controller's own check, so the
next pass writes nothing.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from lws_operator.api.constants import FIELD_MANAGER
from lws_operator.kube.client import APPLY_PATCH, KubeClient
from lws_operator.logic.hash_mode.hash_groups import leader_deployment
from lws_operator.logic.objects.difference import first_difference
from lws_operator.logic.objects.quantity import MILLI, NANO, same_quantity
from lws_operator.logic.workloads.statefulsets import leader_statefulset
from tests.harness.quantities import IN_RESOURCE_LIST, SINGLE

pytestmark = pytest.mark.api


def _statefulset(namespace: str, containers: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "canonical", "namespace": namespace},
            "spec": {"selector": {"matchLabels": {"app": "q"}}, "serviceName": "q",
                     "template": {"metadata": {"labels": {"app": "q"}},
                                  "spec": {"containers": containers}}}}


async def test_the_server_stores_the_forms_the_unit_tests_assume(
        client: KubeClient, namespace: str) -> None:
    """Each entry of the tables as a container's cpu request (a resource list: milli units)
    and as an emptyDir's size limit (a single quantity: nano units)."""
    containers = [{"name": f"c{i}", "image": "pause", "resources": {"requests": {"cpu": written}}}
                  for i, (written, _) in enumerate(IN_RESOURCE_LIST)]
    body = _statefulset(namespace, containers)
    body["spec"]["template"]["spec"]["volumes"] = [
        {"name": f"v{i}", "emptyDir": {"sizeLimit": written}}
        for i, (written, _) in enumerate(SINGLE)]
    stored = await client.request("POST", f"/apis/apps/v1/namespaces/{namespace}/statefulsets",
                                  body=body)
    spec = stored["spec"]["template"]["spec"]
    got = [c["resources"]["requests"]["cpu"] for c in spec["containers"]]
    assert got == [text for _, text in IN_RESOURCE_LIST]
    for (written, _), server in zip(IN_RESOURCE_LIST, got, strict=True):
        assert same_quantity(written, server, MILLI), (written, server)
    limits = [v["emptyDir"]["sizeLimit"] for v in spec["volumes"]]
    assert limits == [text for _, text in SINGLE]
    for (written, _), server in zip(SINGLE, limits, strict=True):
        assert same_quantity(written, server, NANO), (written, server)


def _lws(namespace: str, identity: str) -> dict[str, Any]:
    """A LeaderWorkerSet with a quantity, written as no server would store it, in every place
    a template can hold one."""
    resources = {"limits": {"google.com/tpu": 4, "memory": "1024Mi", "cpu": 125},
                 "requests": {"google.com/tpu": 4, "memory": "0.5Gi", "cpu": "1000m",
                              "ephemeral-storage": "1.0000000001"}}
    container = {"name": "main", "image": "pause", "resources": resources, "env": [
        {"name": "CPUS", "valueFrom": {"resourceFieldRef": {"resource": "limits.cpu",
                                                            "divisor": 1}}}]}
    pod_spec = {
        "resources": {"limits": {"cpu": 250, "memory": "2048Mi"}},
        "overhead": {"cpu": 0.5, "memory": "1048576Ki"},
        "initContainers": [{**container, "name": "init", "restartPolicy": "Always"}],
        "containers": [container],
        "volumes": [
            {"name": "scratch", "emptyDir": {"sizeLimit": "1024Mi"}},
            {"name": "claim", "ephemeral": {"volumeClaimTemplate": {"spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": 1e9}}}}}},
        ],
    }
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "quantities", "namespace": namespace, "uid": str(uuid.uuid4())},
        "spec": {"replicas": 2, "groupIdentity": identity, "leaderWorkerTemplate": {
            "size": 2, "workerTemplate": {"spec": pod_spec},
            "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": "1073741824"},
                              "limits": {"storage": "2Gi"}}}}]}},
    }


@pytest.mark.parametrize("identity", ["Ordinal", "Hash"])
async def test_a_leader_object_applied_as_the_controller_does_is_then_in_place(
        client: KubeClient, namespace: str, identity: str) -> None:
    lws = _lws(namespace, identity)
    if identity == "Ordinal":
        desired = leader_statefulset(lws, "k1", 0, 2)
        path = f"/apis/apps/v1/namespaces/{namespace}/statefulsets/quantities"
    else:
        desired = leader_deployment(lws, "k1")
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/quantities"
    live = await client.request("PATCH", path, body=desired,
                                query={"fieldManager": FIELD_MANAGER, "force": "true"},
                                content_type=APPLY_PATCH)
    spec = live["spec"]["template"]["spec"]
    # The server did store other text than the template's (else nothing here is tested) ...
    assert spec["containers"][0]["resources"]["limits"]["google.com/tpu"] == "4"
    assert spec["containers"][0]["resources"]["requests"]["memory"] == "512Mi"
    assert spec["containers"][0]["resources"]["requests"]["ephemeral-storage"] == "1001m"
    assert spec["overhead"] == {"cpu": "500m", "memory": "1Gi"}
    # ... and the controller's check finds everything in place.
    assert first_difference(desired, live) is None
