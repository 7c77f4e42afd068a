"""The node tier runs real containers and wires them up as a cluster does.

One probe pod (``node_images/probe.go``) on the real node serves each test: it answers on its pod
IP from the host, it calls the API server through the ``kubernetes`` Service as its
ServiceAccount, the API server reaches it through its Service's endpoint, and ``kubectl logs``
shows its output. The last test stops the tier and checks that the host is as before.
"""

from __future__ import annotations

import json
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.cluster import PLACEMENT, LocalCluster
from e2e.cluster.containerd import PROBE_IMAGE
from e2e.cluster.node import (
    NODE_NAME,
    POD_SUBNET,
    HostRecord,
    NodeTierBusy,
    leftovers,
    release,
)
from e2e.harness.clusters import Clusters

pytestmark = pytest.mark.node


def _apply(cluster: LocalCluster, *docs: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": list(docs)}))


@pytest.fixture(scope="module")
def probe(clusters: Clusters) -> Iterator[tuple[LocalCluster, str, str]]:
    """The probe pod, Ready on the real node; yields the cluster, its namespace and pod IP."""
    cluster = clusters.get("node")
    ns = f"t-{uuid.uuid4().hex[:10]}"
    _apply(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    _apply(cluster, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "probe", "namespace": ns, "labels": {"app": "probe"}},
        "spec": {
            **PLACEMENT,
            "containers": [{
                "name": "probe", "image": PROBE_IMAGE, "imagePullPolicy": "Never",
                "ports": [{"containerPort": 8080}],
                "readinessProbe": {"httpGet": {"path": "/", "port": 8080},
                                   "periodSeconds": 1},
            }],
        },
    }, {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {"selector": {"app": "probe"}, "ports": [{"port": 80, "targetPort": 8080}]},
    })
    cluster.kubectl("wait", "-n", ns, "--for=condition=Ready", "pod/probe", "--timeout=120s")
    pod = json.loads(cluster.kubectl("get", "-n", ns, "pod", "probe", "-o", "json"))
    yield cluster, ns, pod["status"]["podIP"]
    cluster.kubectl("delete", "namespace", ns, "--wait=false", check=False)


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=20) as resp:
        return str(resp.read().decode())


def test_pod_runs_on_the_real_node_and_answers_on_its_pod_ip(
        probe: tuple[LocalCluster, str, str]) -> None:
    cluster, ns, ip = probe
    node = cluster.kubectl("get", "-n", ns, "pod", "probe", "-o", "jsonpath={.spec.nodeName}")
    assert node == NODE_NAME
    assert ip.startswith(POD_SUBNET.rsplit(".", 1)[0] + ".")
    assert _get(f"http://{ip}:8080/") == "probe probe\n"


def test_pod_reaches_the_apiserver_through_the_kubernetes_service_as_its_account(
        probe: tuple[LocalCluster, str, str]) -> None:
    cluster, ns, ip = probe
    path = f"/api/v1/namespaces/{ns}/pods/probe"
    denied = _get(f"http://{ip}:8080/apiserver?path={path}")
    # The API server knew the caller: the pod's token, not an anonymous request.
    assert denied.startswith("403 10.96.0.1:443\n"), denied
    assert f"system:serviceaccount:{ns}:default" in denied
    _apply(cluster, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "read-pods", "namespace": ns},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}],
    }, {
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "read-pods", "namespace": ns},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                    "name": "read-pods"},
        "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": ns}],
    })
    status, _, body = _get(f"http://{ip}:8080/apiserver?path={path}").partition("\n")
    assert status == "200 10.96.0.1:443"
    assert json.loads(body)["status"]["podIP"] == ip


def test_apiserver_reaches_the_pod_through_its_service_endpoint(
        probe: tuple[LocalCluster, str, str]) -> None:
    cluster, ns, _ = probe
    out = cluster.kubectl("get", "--raw",
                          f"/api/v1/namespaces/{ns}/services/http:probe:80/proxy/")
    assert out == "probe probe\n"


def test_kubectl_logs_shows_the_container_output(probe: tuple[LocalCluster, str, str]) -> None:
    cluster, ns, _ = probe
    assert "probe probe listening on :8080" in cluster.kubectl("logs", "-n", ns, "probe")


def test_a_second_node_tier_is_refused_while_one_is_up(
        probe: tuple[LocalCluster, str, str], tmp_path: Path) -> None:
    cluster = probe[0]
    with pytest.raises(NodeTierBusy, match=str(cluster.dir)):
        LocalCluster(tmp_path / "second").up("node", timeout=60)
    assert HostRecord.load() is not None
    assert cluster.kubectl("get", "node", NODE_NAME, "-o", "name").strip() == f"node/{NODE_NAME}"


def test_down_restores_the_host(probe: tuple[LocalCluster, str, str]) -> None:
    """Last in the module: stops the tier (and starts it again for later tests)."""
    cluster = probe[0]
    record = HostRecord.load()
    assert record is not None
    assert record.cluster == str(cluster.dir)
    changed = leftovers(record)
    # The tier did change the host (bridge, kube-proxy's chains, the run directory) ...
    assert any(c.startswith("bridge") for c in changed), changed
    assert any("chain KUBE-" in c for c in changed), changed
    cluster.down()
    left = leftovers(record)
    if left:  # put the host back before failing: a new `up` would record it as it is
        release(record)
    cluster.up("node", timeout=180)
    # ... and down puts every one of those changes back.
    assert left == []
