"""The node tier runs real containers and wires them up as a cluster does.

One probe pod (``node_images/probe.go``) on the real node serves each test: it answers on its pod
IP from the host, it calls the API server through the ``kubernetes`` Service as its
ServiceAccount, the API server reaches it through its Service's endpoint, and ``kubectl logs``
shows its output. The last test stops the tier and checks that the host is as before.
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import time
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
from e2e.cluster.pki import issue_serving_cert
from e2e.harness.clusters import Clusters

pytestmark = pytest.mark.node


def _apply(cluster: LocalCluster, *docs: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List",
                                                          "items": list(docs)}))


@pytest.fixture(scope="module")
def probe(clusters: Clusters, tmp_path_factory: pytest.TempPathFactory,
          ) -> Iterator[tuple[LocalCluster, str, str]]:
    """The probe pod, Ready on the real node, with a serving certificate for its Service
    (``probe.<ns>.svc``, CA in ``probe-ca.crt`` of the namespace's ConfigMap ``probe-ca``);
    yields the cluster, its namespace and pod IP."""
    cluster = clusters.get("node")
    ns = f"t-{uuid.uuid4().hex[:10]}"
    ca, cert, key = issue_serving_cert(tmp_path_factory.mktemp("probe-tls"), [f"probe.{ns}.svc"])
    _apply(cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    _apply(cluster, {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": "probe-tls", "namespace": ns},
        "data": {"tls.crt": base64.b64encode(cert.read_bytes()).decode(),
                 "tls.key": base64.b64encode(key.read_bytes()).decode()},
    }, {
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "probe-ca", "namespace": ns},
        "data": {"ca.crt": ca.decode()},
    })
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
                "volumeMounts": [{"name": "tls", "mountPath": "/tls", "readOnly": True}],
            }],
            "volumes": [{"name": "tls", "secret": {"secretName": "probe-tls",
                                                   "defaultMode": 0o444}}],
        },
    }, {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "probe", "namespace": ns},
        "spec": {"selector": {"app": "probe"}, "ports": [
            {"name": "http", "port": 80, "targetPort": 8080},
            {"name": "https", "port": 443, "targetPort": 8443},
        ]},
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


def test_apiserver_calls_a_webhook_through_its_service(
        probe: tuple[LocalCluster, str, str]) -> None:
    cluster, ns, _ = probe
    ca = json.loads(cluster.kubectl("get", "-n", ns, "configmap", "probe-ca", "-o", "json"))
    name = f"probe-{ns}"
    _apply(cluster, {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "probe.lws-operator.dev",
            "clientConfig": {
                "service": {"namespace": ns, "name": "probe", "path": "/validate", "port": 443},
                "caBundle": base64.b64encode(ca["data"]["ca.crt"].encode()).decode(),
            },
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
        }],
    })
    try:
        # The API server picks a new configuration up within a moment: until then creates pass.
        denied = ""
        deadline = time.monotonic() + 60
        for i in itertools.count():
            labelled = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
                "name": f"denied-{i}", "namespace": ns, "labels": {"deny": "true"}}}
            out = subprocess.run(
                [str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.kubeconfig),
                 "create", "-f", "-"],
                input=json.dumps(labelled), capture_output=True, text=True, check=False)
            denied = out.stderr
            if out.returncode != 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert "denied by the probe webhook" in denied
        # Called, not failing closed: an unlabelled one passes.
        _apply(cluster, {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "allowed", "namespace": ns}})
    finally:
        cluster.kubectl("delete", "validatingwebhookconfiguration", name, check=False)


def test_kubectl_logs_shows_the_container_output(probe: tuple[LocalCluster, str, str]) -> None:
    cluster, ns, _ = probe
    assert "probe probe listening on :8080" in cluster.kubectl("logs", "-n", ns, "probe")


def test_a_second_node_tier_is_refused_while_one_is_up(
        probe: tuple[LocalCluster, str, str], tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = probe[0]
    monkeypatch.setenv("LWS_NODE_WAIT", "0")
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
