"""The chart installed on a real cluster (full tier) with a values file written for the upstream
chart (``upstream-values.yaml``: upstream's keys only), under upstream's release name ``lws``.

Users coming from upstream keep their values file and their runbooks: the schema accepts every
key, each key has upstream's effect on the installed objects, and the objects carry upstream's
names (``kubectl -n <ns> rollout status deploy/lws-controller-manager`` works as written).

Only the webhook configurations are confined, by a second values file layered on top, as a test
on a shared cluster must: their names and namespaceSelector, so that no other test's pods reach
a webhook whose pods (kwok) serve nothing. The release lives in a namespace of its own, so a
cluster that already runs a release ``lws`` in ``lws-system`` is never touched. The
ServiceMonitor CRD (``enablePrometheus``) is a stand-in for the Prometheus Operator's, created
only where the cluster has none and removed afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from e2e.cluster import LocalCluster
from e2e.harness.chart import CHART, UPSTREAM_VALUES, UPSTREAM_VALUES_FILE, helm, objects
from e2e.harness.clusters import Clusters
from e2e.kube import Kube, is_ready, wait_for

pytestmark = pytest.mark.full

RELEASE = "lws"
MANAGER = "lws-controller-manager"
METRICS_SERVICE = "lws-controller-manager-metrics-service"
POD_LABELS = {"control-plane": "controller-manager", "app.kubernetes.io/name": "lws",
              "app.kubernetes.io/instance": RELEASE}
SERVICE_MONITOR_CRD = "servicemonitors.monitoring.coreos.com"


@dataclass
class Installed:
    cluster: LocalCluster
    kube: Kube
    namespace: str
    objects: list[dict[str, Any]]
    notes: str  # what helm install printed after NOTES:
    confine: Path  # the test's second values file

    def kubectl(self, *args: str) -> str:
        return self.cluster.kubectl("-n", self.namespace, *args)


def service_monitor_crd() -> dict[str, Any]:
    """The ServiceMonitor kind with an open schema: enough for the API server to store one."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": SERVICE_MONITOR_CRD},
        "spec": {"group": "monitoring.coreos.com", "scope": "Namespaced",
                 "names": {"kind": "ServiceMonitor", "plural": "servicemonitors",
                           "singular": "servicemonitor", "listKind": "ServiceMonitorList"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object",
                                         "x-kubernetes-preserve-unknown-fields": True}}}]},
    }


async def allowed(installed: Installed, service_account: str, verb: str, group: str,
                  resource: str) -> bool:
    """A SubjectAccessReview in the release namespace for ``<namespace>:<name>``
    (``kubectl auth can-i`` drops the group of a kind the server does not serve)."""
    review = await installed.kube.create({
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": f"system:serviceaccount:{service_account}",
                 "groups": ["system:serviceaccounts"],
                 "resourceAttributes": {"namespace": installed.namespace, "verb": verb,
                                        "group": group, "resource": resource}}})
    return bool(review["status"]["allowed"])


async def crd_established(kube: Kube, name: str) -> bool:
    crd = await kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    return any(c["type"] == "Established" and c["status"] == "True"
               for c in ((crd or {}).get("status") or {}).get("conditions") or [])


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def installed(clusters: Clusters, tmp_path_factory: pytest.TempPathFactory,
                    ) -> AsyncIterator[Installed]:
    cluster: LocalCluster = clusters.get("full")
    suffix = uuid.uuid4().hex[:8]
    namespace = f"lws-system-{suffix}"
    confine = {"webhook": {
        "mutatingConfigurationName": f"lws-mutating-{suffix}",
        "validatingConfigurationName": f"lws-validating-{suffix}",
        "namespaceSelectorExpressions": [{"key": "kubernetes.io/metadata.name",
                                          "operator": "In", "values": [f"none-{suffix}"]}]}}
    confine_file = tmp_path_factory.mktemp("upstream") / "confine.yaml"
    confine_file.write_text(yaml.safe_dump(confine))
    kube = await Kube.connect(str(cluster.kubeconfig))
    made_crd = await kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                              SERVICE_MONITOR_CRD) is None
    if made_crd:
        await kube.create(service_monitor_crd())
        await wait_for(lambda: crd_established(kube, SERVICE_MONITOR_CRD), timeout=30,
                       what="the ServiceMonitor CRD")
    try:
        done = helm("install", RELEASE, str(CHART), "--kubeconfig", str(cluster.kubeconfig),
                    "--namespace", namespace, "--create-namespace",
                    "-f", str(UPSTREAM_VALUES_FILE), "-f", str(confine_file))
        manifest = helm("get", "manifest", RELEASE, "--kubeconfig", str(cluster.kubeconfig),
                        "--namespace", namespace).stdout
        yield Installed(cluster, kube, namespace, objects(manifest),
                        done.stdout.partition("NOTES:")[2], confine_file)
    finally:
        helm("uninstall", RELEASE, "--kubeconfig", str(cluster.kubeconfig), "--namespace",
             namespace, "--ignore-not-found", "--wait", check=False)
        await kube.delete("v1", "Namespace", namespace)
        if made_crd:
            await kube.delete("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                              SERVICE_MONITOR_CRD)
        await kube.close()


async def test_every_object_is_created_under_upstreams_name(installed: Installed) -> None:
    for obj in installed.objects:
        meta = obj["metadata"]
        live = await installed.kube.get(obj["apiVersion"], obj["kind"], meta["name"],
                                        meta.get("namespace"))
        assert live is not None, f"{obj['kind']} {meta['name']} was not created"
    names = {(o["kind"], o["metadata"]["name"]) for o in installed.objects}
    assert {("Deployment", MANAGER), ("ServiceAccount", MANAGER), ("Service", METRICS_SERVICE),
            ("Service", "lws-webhook-service"), ("Secret", "lws-webhook-server-cert"),
            ("ServiceMonitor", "lws-controller-manager-metrics-monitor"),
            ("ClusterRole", "lws-manager-role"),
            ("ClusterRoleBinding", "lws-manager-rolebinding")} <= names


async def test_runbook_commands_find_the_operator(installed: Installed) -> None:
    """An upstream runbook's commands, by name and by label; the pods are scheduled under the
    values file's nodeSelector, tolerations and affinity, and become Ready (kwok)."""
    installed.kubectl("rollout", "status", f"deploy/{MANAGER}", "--timeout=180s")
    by_label = installed.kubectl("get", "pods", "-l", "control-plane=controller-manager",
                                 "-o", "name").split()
    assert len(by_label) == UPSTREAM_VALUES["replicaCount"]
    pods = await installed.kube.list("v1", "Pod", installed.namespace,
                                     label_selector="control-plane=controller-manager")
    for pod in pods:
        assert is_ready(pod)
        assert pod["spec"]["nodeName"]
        assert pod["spec"]["serviceAccountName"] == MANAGER
        assert POD_LABELS.items() <= pod["metadata"]["labels"].items()


async def test_upstream_keys_take_effect(installed: Installed) -> None:
    live = await installed.kube.get("apps/v1", "Deployment", MANAGER, installed.namespace)
    assert live is not None
    assert live["metadata"]["labels"]["control-plane"] == "controller-manager"
    assert live["spec"]["selector"]["matchLabels"] == POD_LABELS
    assert live["spec"]["replicas"] == UPSTREAM_VALUES["replicaCount"]
    template = live["spec"]["template"]
    pod = template["spec"]
    main = pod["containers"][0]
    image = UPSTREAM_VALUES["image"]["manager"]
    assert main["image"] == f"{image['repository']}:{image['tag']}"
    assert main["imagePullPolicy"] == image["pullPolicy"]
    assert main["resources"]["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert {"name": "webhook-server", "containerPort": UPSTREAM_VALUES["service"]["port"],
            "protocol": "TCP"} in main["ports"]
    assert "--scheduler-provider=volcano" in main["args"]  # gangSchedulingManagement
    assert main["securityContext"]["readOnlyRootFilesystem"] is True
    for key in ("nodeSelector", "tolerations", "affinity", "imagePullSecrets"):
        assert pod[key] == UPSTREAM_VALUES[key], key
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert template["metadata"]["annotations"]["example.com/owner"] == "ml-platform"
    # enablePrometheus: the metrics Service (upstream's service.type) and a ServiceMonitor
    # that selects it.
    service = await installed.kube.get("v1", "Service", METRICS_SERVICE, installed.namespace)
    assert service is not None
    assert service["spec"]["type"] == UPSTREAM_VALUES["service"]["type"]
    assert service["spec"]["selector"] == POD_LABELS
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [("https", 8443)]
    monitor = await installed.kube.get("monitoring.coreos.com/v1", "ServiceMonitor",
                                       "lws-controller-manager-metrics-monitor",
                                       installed.namespace)
    assert monitor is not None
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"][
        "labels"].items()
    # The volcano PodGroup rule is granted to upstream's ServiceAccount name, and
    # kube-prometheus's Prometheus may discover the metrics Service (enablePrometheus).
    assert await allowed(installed, f"{installed.namespace}:{MANAGER}", "create",
                         "scheduling.volcano.sh", "podgroups")
    assert await allowed(installed, "monitoring:prometheus-k8s", "list", "", "services")
    # crdUpgrade is accepted and has no effect: no hook Job.
    assert not await installed.kube.list("batch/v1", "Job", installed.namespace)


def test_notes_name_the_deployment_and_the_keys_without_effect(installed: Installed) -> None:
    assert f"rollout status deployment/{MANAGER}" in installed.notes
    assert "crdUpgrade has no effect" in installed.notes  # the values file enables it
    assert "featureGates" not in installed.notes  # empty in the values file
    # Into a namespace of its own: helm checks that nothing there belongs to another release.
    done = helm("install", "lws-dry-run", str(CHART), "--dry-run=client", "--kubeconfig",
                str(installed.cluster.kubeconfig), "--namespace", f"{installed.namespace}-dry",
                "-f", str(UPSTREAM_VALUES_FILE), "-f", str(installed.confine),
                "--set", f"webhook.mutatingConfigurationName={installed.namespace}-dry",
                "--set", f"webhook.validatingConfigurationName={installed.namespace}-dry",
                "--set", "featureGates=SomeGate=true")
    assert "featureGates (SomeGate=true) has no effect" in done.stdout.partition("NOTES:")[2]
