"""A rate-limited ``KubeClient`` against a real API server counts every request it makes, by
HTTP code and method and by Kubernetes verb and resource, exactly; and every request went through
the limiter. Counts only: no assertion depends on how long anything took."""

from __future__ import annotations

import uuid

import pytest
from prometheus_client import CollectorRegistry

from e2e.cluster import LocalCluster
from lws_operator.kube.client import APPLY_PATCH, MERGE_PATCH, KubeClient
from lws_operator.kube.metrics import ClientMetrics
from lws_operator.kube.ratelimit import TokenBucket

pytestmark = pytest.mark.api


def configmap(name: str, value: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"key": value}}


async def test_a_limited_client_counts_its_requests_by_verb_and_resource(
    cluster: LocalCluster,
) -> None:
    registry = CollectorRegistry()
    kube = await KubeClient.connect(str(cluster.kubeconfig), limiter=TokenBucket(5, 1),
                                    metrics=ClientMetrics.for_registry(registry))
    ns = f"t-{uuid.uuid4().hex[:10]}"
    base = f"/api/v1/namespaces/{ns}"
    try:
        await kube.request("POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
        for i in range(3):
            await kube.request("POST", f"{base}/configmaps", body=configmap(f"cm-{i}", "a"))
        for i in range(3):
            assert await kube.get(f"{base}/configmaps/cm-{i}") is not None
        assert await kube.get(f"{base}/configmaps/missing") is None
        listed = await kube.request("GET", f"{base}/configmaps",
                                    query={"labelSelector": "absent"})
        assert listed["items"] == []
        await kube.request("PATCH", f"{base}/configmaps/cm-0", body={"data": {"key": "b"}},
                           content_type=MERGE_PATCH)
        await kube.request("PATCH", f"{base}/configmaps/cm-1", body=configmap("cm-1", "c"),
                           content_type=APPLY_PATCH,
                           query={"fieldManager": "lws-tests", "force": "true"})
        await kube.request("POST", f"{base}/pods", body={
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}})
        await kube.request("PATCH", f"{base}/pods/p/status", content_type=MERGE_PATCH,
                           body={"status": {"conditions": [
                               {"type": "Ready", "status": "False"}]}})
        await kube.request("DELETE", f"{base}/configmaps/cm-2")
        await kube.request("DELETE", f"{base}/configmaps")
    finally:
        await kube.request("DELETE", f"/api/v1/namespaces/{ns}")
        await kube.close()

    counts = {
        (s.labels["verb"], s.labels["resource"], s.labels["code"]): s.value
        for family in registry.collect() if family.name == "lws_operator_api_requests"
        for s in family.samples if s.name == "lws_operator_api_requests_total"
    }
    assert counts == {
        ("create", "namespaces", "201"): 1,
        ("create", "configmaps", "201"): 3,
        ("get", "configmaps", "200"): 3,
        ("get", "configmaps", "404"): 1,
        ("list", "configmaps", "200"): 1,
        ("patch", "configmaps", "200"): 1,
        ("apply", "configmaps", "200"): 1,
        ("create", "pods", "201"): 1,
        ("patch", "pods/status", "200"): 1,
        ("delete", "configmaps", "200"): 1,
        ("deletecollection", "configmaps", "200"): 1,
        ("delete", "namespaces", "200"): 1,
    }
    total = sum(counts.values())
    by_method = {
        (s.labels["method"], s.labels["code"]): s.value
        for family in registry.collect() if family.name == "rest_client_requests"
        for s in family.samples if s.name == "rest_client_requests_total"
    }
    assert by_method == {
        ("POST", "201"): 5,
        ("GET", "200"): 4,
        ("GET", "404"): 1,
        ("PATCH", "200"): 3,
        ("DELETE", "200"): 3,
    }
    hosts = {s.labels["host"] for family in registry.collect()
             if family.name == "rest_client_requests" for s in family.samples}
    assert hosts == {kube.host}
    assert kube.host  # host:port of the API server
    waited = sum(
        s.value for family in registry.collect()
        if family.name == "rest_client_rate_limiter_duration_seconds"
        for s in family.samples if s.name.endswith("_count"))
    assert waited == total  # every request went through the limiter
