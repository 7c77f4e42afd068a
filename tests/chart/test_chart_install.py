"""The chart on a real cluster (full tier), and its RBAC proven sufficient by the operator itself.

The chart is installed with the pinned ``helm`` (it needs nothing in the cluster), upgraded and
uninstalled at the end. kwok pods run no container image,
so the operator is then started as a local process with the Deployment's own arguments and
environment, authenticated as the chart's ServiceAccount (a TokenRequest token in a kubeconfig
of its own). It drives create, rollout, scale, group recreation, native gang scheduling, Hash
group identity (a leader Deployment) and delete, and must never have been refused: no 403 in
its ``rest_client_requests_total``, no Forbidden in its log. The other half of least privilege
is asked of the API server directly (``kubectl auth can-i`` as the ServiceAccount).

The release's webhook configurations are confined to the test's workload namespace
(``webhook.namespaceSelectorExpressions``) and carry names of their own, so the shared cluster's
other tests never reach them. Since nothing in this cluster routes a Service to a local process,
the test points the configurations' clientConfig at the operator's local port, which is then
started with ``--webhook-host 127.0.0.1 --no-register-webhooks``: it injects the caBundle into
the existing configurations exactly as in a pod (get and update, nothing more).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml
from prometheus_client.parser import text_string_to_metric_families

from e2e.cluster import LocalCluster
from e2e.cluster.launcher import free_port
from e2e.harness.chart import CHART, helm, http_get, objects, start, stop
from e2e.harness.clusters import Clusters
from e2e.kube import Kube, condition, is_ready, wait_for
from lws_operator.admission.runtime import WebhookOptions
from lws_operator.logic.runtime import certs

pytestmark = pytest.mark.full

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"
CRD = CHART / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
NAMESPACE_LABEL = "kubernetes.io/metadata.name"


@dataclass
class Release:
    cluster: LocalCluster
    kube: Kube
    name: str
    namespace: str  # the release's
    workloads: str  # where the test's LeaderWorkerSets live (the webhooks are confined to it)
    objects: list[dict[str, Any]]

    def rendered(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    @property
    def service_account(self) -> str:
        name: str = self.rendered("ServiceAccount")[0]["metadata"]["name"]
        return name

    @property
    def args(self) -> list[str]:
        deployment = self.rendered("Deployment")[0]
        found: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        return found


def _api_version(obj: dict[str, Any]) -> tuple[str, str]:
    return obj["apiVersion"], obj["kind"]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def release(clusters: Clusters, tmp_path_factory: pytest.TempPathFactory,
                  ) -> AsyncIterator[Release]:
    """``helm install`` into a fresh namespace; uninstalled (if a test has not done it) after
    the module."""
    cluster: LocalCluster = clusters.get("full")
    suffix = uuid.uuid4().hex[:8]
    name, namespace, workloads = f"chart-{suffix}", f"lws-chart-{suffix}", f"t-chart-{suffix}"
    values = {
        "image": {"tag": "test"},
        "webhook": {
            "mutatingConfigurationName": f"lws-mutating-{suffix}",
            "validatingConfigurationName": f"lws-validating-{suffix}",
            "namespaceSelectorExpressions": [
                {"key": NAMESPACE_LABEL, "operator": "In", "values": [workloads]}],
        },
    }
    values_file = tmp_path_factory.mktemp("chart") / "values.yaml"
    values_file.write_text(yaml.safe_dump(values))
    kube = await Kube.connect(str(cluster.kubeconfig))
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": workloads}})
    helm("install", name, str(CHART), "--kubeconfig", str(cluster.kubeconfig),
         "--namespace", namespace, "--create-namespace", "-f", str(values_file))
    cluster.install_crd(CRD)  # a no-op but for waiting until it is Established
    manifest = helm("get", "manifest", name, "--kubeconfig", str(cluster.kubeconfig),
                    "--namespace", namespace).stdout
    yield Release(cluster, kube, name, namespace, workloads, objects(manifest))
    helm("uninstall", name, "--kubeconfig", str(cluster.kubeconfig), "--namespace", namespace,
         "--ignore-not-found", check=False)
    for ns in (workloads, namespace):
        await kube.delete("v1", "Namespace", ns)
    await kube.close()


async def test_install_creates_every_object(release: Release) -> None:
    kube = release.kube
    for obj in release.objects:
        meta = obj["metadata"]
        live = await kube.get(*_api_version(obj), meta["name"], meta.get("namespace"))
        assert live is not None, f"{obj['kind']} {meta['name']} was not created"
    service = await kube.get("v1", "Service", "lws-webhook-service", release.namespace)
    assert service is not None
    assert service["spec"]["clusterIP"]
    # kube-controller-manager takes the Deployment: its pod template (service account,
    # security contexts, probes) is one the API server accepts.
    deployment = release.rendered("Deployment")[0]

    async def pods() -> list[dict[str, Any]] | None:
        selector = ",".join(f"{k}={v}" for k, v in deployment["spec"]["selector"][
            "matchLabels"].items())
        found = await kube.list("v1", "Pod", release.namespace, label_selector=selector)
        return found if len(found) == deployment["spec"]["replicas"] else None

    created = await wait_for(pods, timeout=60, what="the Deployment's pods")
    assert created is not None
    for pod in created:
        assert pod["spec"]["serviceAccountName"] == release.service_account
        assert pod["spec"]["securityContext"]["runAsNonRoot"] is True


@pytest.mark.parametrize(("verb", "resource", "namespace_scoped"), [
    ("create", "secrets", True),
    ("list", "secrets", True),
    ("get", "secrets", False),  # any namespace but the release's
    ("create", "pods", True),
    ("update", "pods", True),
    # LeaderWorkerSets are created and deleted by the DisaggregatedSet controller (its
    # children); DisaggregatedSets themselves only by their users.
    ("delete", "disaggregatedsets.disaggregatedset.x-k8s.io", True),
    ("create", "mutatingwebhookconfigurations.admissionregistration.k8s.io", False),
    ("update", "mutatingwebhookconfigurations.admissionregistration.k8s.io", False),
    ("update", "nodes", False),
    ("list", "nodes", False),
    ("create", "disaggregatedsets.disaggregatedset.x-k8s.io", True),
    ("*", "*", False),
])
def test_service_account_is_refused_what_the_operator_never_does(
        release: Release, verb: str, resource: str, namespace_scoped: bool) -> None:
    user = f"system:serviceaccount:{release.namespace}:{release.service_account}"
    where = ["-n", release.namespace] if namespace_scoped else ["-n", "default"]
    if resource.startswith(("mutatingwebhook", "nodes", "*")):
        where = []
    answer = release.cluster.kubectl("auth", "can-i", verb, resource, "--as", user, *where,
                                     check=False).strip()
    assert answer == "no", f"{user} may {verb} {resource}"


def test_service_account_may_do_what_the_operator_does(release: Release) -> None:
    """The positive half, so that the refusals above cannot pass for a broken binding."""
    user = f"system:serviceaccount:{release.namespace}:{release.service_account}"
    secret = release.rendered("Secret")[0]["metadata"]["name"]
    mutating = release.rendered("MutatingWebhookConfiguration")[0]["metadata"]["name"]
    for args in (["patch", "leaderworkersets.leaderworkerset.x-k8s.io", "--subresource=status",
                  "-n", "x"],
                 ["watch", "pods", "-A"],
                 ["update", f"secrets/{secret}", "-n", release.namespace],
                 ["update", f"mutatingwebhookconfigurations.admissionregistration.k8s.io/"
                  f"{mutating}"],
                 ["create", "events.events.k8s.io", "-n", "x"],
                 ["create", "leaderworkersets.leaderworkerset.x-k8s.io", "-n", "x"],
                 ["delete", "leaderworkersets.leaderworkerset.x-k8s.io", "-n", "x"],
                 ["patch", "disaggregatedsets.disaggregatedset.x-k8s.io", "--subresource=status",
                  "-n", "x"],
                 ["create", "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io", "-n", "x"]):
        answer = release.cluster.kubectl("auth", "can-i", *args, "--as", user,
                                         check=False).strip()
        assert answer == "yes", f"{user} may not {' '.join(args)}"


# ------------------------------------------------------------------------------- the RBAC run


def service_account_kubeconfig(release: Release, path: Path) -> Path:
    """A kubeconfig for the chart's ServiceAccount: the cluster entry of the admin kubeconfig
    and a token from the TokenRequest API."""
    token = release.cluster.kubectl("create", "token", release.service_account, "-n",
                                    release.namespace, "--duration=2h").strip()
    admin = yaml.safe_load(release.cluster.kubeconfig.read_text())
    cluster = admin["clusters"][0]["cluster"]
    if "certificate-authority" in cluster:
        base = release.cluster.kubeconfig.parent
        cluster = {**cluster, "certificate-authority": str(
            (base / cluster["certificate-authority"]).resolve())}
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "test", "cluster": cluster}],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": "test", "user": "operator"}}],
        "current-context": "operator",
    }))
    return path


def point_webhooks_at(release: Release, port: int) -> None:
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        config = release.rendered(kind)[0]
        paths = [hook["clientConfig"]["service"]["path"] for hook in config["webhooks"]]
        ops = [{"op": "replace", "path": f"/webhooks/{i}/clientConfig",
                "value": {"url": f"https://127.0.0.1:{port}{path}"}}
               for i, path in enumerate(paths)]
        release.cluster.kubectl("patch", kind.lower(), config["metadata"]["name"],
                                "--type=json", "-p", json.dumps(ops))


# The flags whose values the RBAC run replaces with local ports (the later flag wins).
LOCAL_OVERRIDES = {"--webhook-port", "--health-port", "--metrics-bind-address"}


def operator_argv(release: Release, kubeconfig: Path, webhook_port: int, health_port: int,
                  metrics_port: int) -> list[str]:
    """The Deployment's arguments, then what a local process needs instead of a pod's network
    identity."""
    return [str(Path(sys.executable).parent / "lws-operator"), "run", *release.args,
            f"--kubeconfig={kubeconfig}", "--webhook-host=127.0.0.1", "--no-register-webhooks",
            f"--webhook-port={webhook_port}", f"--health-port={health_port}",
            f"--metrics-bind-address=127.0.0.1:{metrics_port}"]


def sample(name: str, replicas: int, size: int, gpus: str | None = None,
           **spec: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "engine:1"}
    if gpus:
        container["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return {"apiVersion": API, "kind": KIND, "metadata": {"name": name},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {
                "size": size, "workerTemplate": {"spec": {"containers": [container]}}}, **spec}}


Guard = Callable[[], None]


async def converged(kube: Kube, ns: str, name: str, replicas: int, size: int, guard: Guard,
                    ) -> list[dict[str, Any]]:
    """Every group ready and updated, exactly its pods, all Ready. ``guard`` runs on every poll
    (it fails at once if the operator was refused anything, rather than at the timeout)."""

    async def probe() -> list[dict[str, Any]] | None:
        guard()
        lws = await kube.get(API, KIND, name, ns)
        status = (lws or {}).get("status") or {}
        pods = [p for p in await kube.list("v1", "Pod", ns, label_selector=f"{P}name={name}")
                if not p["metadata"].get("deletionTimestamp")]
        if (status.get("readyReplicas") == replicas and status.get("updatedReplicas") == replicas
                and condition(lws, "Available") == "True" and len(pods) == replicas * size
                and all(is_ready(p) for p in pods)):
            return pods
        return None

    pods = await wait_for(probe, timeout=120, what=f"{name} to converge")
    assert pods is not None
    return pods


def revision(pods: list[dict[str, Any]]) -> set[str]:
    return {p["metadata"]["labels"][P + "template-revision-hash"] for p in pods}


async def drive_scenarios(kube: Kube, ns: str, guard: Guard) -> None:
    """What users do, each step waited for as a user would see it."""
    await kube.create(sample("rbac", replicas=2, size=2), ns)
    pods = await converged(kube, ns, "rbac", 2, 2, guard)
    first = revision(pods)

    # Rolling update.
    await kube.patch(API, KIND, "rbac", {"spec": {"leaderWorkerTemplate": {"workerTemplate": {
        "spec": {"containers": [{"name": "main", "image": "engine:2"}]}}}}}, ns)

    async def rolled() -> list[dict[str, Any]] | None:
        now = await converged(kube, ns, "rbac", 2, 2, guard)
        return now if revision(now).isdisjoint(first) else None

    await wait_for(rolled, timeout=180, what="the rollout")

    # Scale through the scale subresource, as kubectl scale and the HPA do.
    await kube.patch(API, KIND, "rbac", {"spec": {"replicas": 3}}, ns, subresource="scale")
    pods = await converged(kube, ns, "rbac", 3, 2, guard)

    # A failed worker recreates its group (RecreateGroupOnPodRestart, the default).
    leader = next(p for p in pods if p["metadata"]["name"] == "rbac-1")
    await kube.delete("v1", "Pod", "rbac-1-1", ns)

    async def recreated() -> bool:
        now = await kube.get("v1", "Pod", "rbac-1", ns)
        return now is not None and now["metadata"]["uid"] != leader["metadata"]["uid"]

    await wait_for(recreated, timeout=90, what="the group's leader to be recreated")
    await converged(kube, ns, "rbac", 3, 2, guard)

    # Native gang scheduling: a Workload and one PodGroup per group.
    await kube.create(sample("gang", replicas=1, size=2, gpus="1", scheduling={}), ns)
    await converged(kube, ns, "gang", 1, 2, guard)
    groups = await kube.list("scheduling.k8s.io/v1beta1", "PodGroup", ns,
                             label_selector=f"{P}name=gang")
    assert len(groups) == 1

    # Hash group identity: the leaders come from a Deployment; a failed group is replaced by
    # one with a new key (and so new pod names).
    await kube.create(sample("hashed", replicas=2, size=2, groupIdentity="Hash"), ns)
    pods = await converged(kube, ns, "hashed", 2, 2, guard)
    before = {p["metadata"]["name"] for p in pods}
    worker = next(p for p in pods if p["metadata"]["labels"][P + "worker-index"] != "0")
    await kube.delete("v1", "Pod", worker["metadata"]["name"], ns)

    async def replaced() -> list[dict[str, Any]] | None:
        now = await converged(kube, ns, "hashed", 2, 2, guard)
        return now if {p["metadata"]["name"] for p in now} != before else None

    await wait_for(replaced, timeout=180, what="the failed Hash group to be replaced")
    deployment = await kube.get("apps/v1", "Deployment", "hashed", ns)
    assert deployment is not None

    for name in ("rbac", "gang", "hashed"):
        await kube.delete(API, KIND, name, ns)

    async def gone() -> bool:
        return not await kube.list("v1", "Pod", ns, label_selector=P + "name")

    await wait_for(gone, timeout=90, what="every pod to be gone")


# A 403 that is not about RBAC: writing into a namespace that is being deleted. The operator
# watches the whole shared cluster, and another test's namespace may still be terminating (its
# retained pods wait for an operator to release them).
TERMINATING = "because it is being terminated"


def refusals(log_text: str) -> list[str]:
    """The log lines that report a refused request (ours say "403 ...", kopf's "Forbidden")."""
    return [line for line in log_text.splitlines()
            if "forbidden" in line.lower() or " 403" in line]


def check_refusals(metrics: str, log_text: str) -> None:
    """No request was refused for want of a permission: every 403 the client counted is one
    logged as a write into a terminating namespace, and no other refusal was logged."""
    _, refused = forbidden_requests(metrics)
    lines = refusals(log_text)
    rbac = [line for line in lines if TERMINATING not in line]
    assert not rbac, "requests were refused:\n" + "\n".join(rbac)
    assert refused <= len(lines), (
        f"{refused:.0f} requests were refused (403), {len(lines)} logged:\n" + "\n".join(lines))


def forbidden_requests(metrics: str) -> tuple[float, float]:
    """(all requests, requests answered 403) in ``rest_client_requests_total``, less the one
    403 the startup check expects: it asks whether its namespace exists with a GET that an
    identity without access to namespaces, as the chart's, is refused, and goes on
    (``kube.preflight``)."""
    total = refused = probes = 0.0
    for family in text_string_to_metric_families(metrics):
        for sample_ in family.samples:
            if sample_.name == "rest_client_requests_total":
                total += sample_.value
                if sample_.labels.get("code") == "403":
                    refused += sample_.value
            elif (sample_.name == "lws_operator_api_requests_total"
                  and sample_.labels == {"verb": "get", "resource": "namespaces",
                                         "code": "403"}):
                probes += sample_.value
    assert probes <= 1, f"{probes:.0f} namespace reads refused; the startup check makes one"
    return total, refused - probes


def metrics_scraper_token(release: Release) -> str:
    """A token of a ServiceAccount bound to the chart's metrics-reader ClusterRole, as a
    Prometheus would be. The binding is cluster-scoped: the caller deletes it."""
    reader = next(r for r in release.rendered("ClusterRole")
                  if r["metadata"]["name"].endswith("-metrics-reader"))
    cluster = release.cluster
    cluster.kubectl("create", "serviceaccount", "scraper", "-n", release.namespace)
    cluster.kubectl("create", "clusterrolebinding", f"{release.name}-scraper",
                    f"--clusterrole={reader['metadata']['name']}",
                    f"--serviceaccount={release.namespace}:scraper")
    return cluster.kubectl("create", "token", "scraper", "-n", release.namespace,
                           "--duration=1h").strip()


async def test_operator_needs_nothing_beyond_the_charts_rbac(release: Release,
                                                               tmp_path: Path) -> None:
    kubeconfig = service_account_kubeconfig(release, tmp_path / "kubeconfig")
    webhook_port, health_port, metrics_port = free_port(), free_port(), free_port()
    point_webhooks_at(release, webhook_port)
    # The chart serves /metrics over HTTPS to scrapers holding the metrics-reader role: the
    # operator's TokenReviews and SubjectAccessReviews run under the chart's RBAC too.
    assert "--metrics-secure=true" in release.args
    token = metrics_scraper_token(release)
    metrics_url = f"https://127.0.0.1:{metrics_port}/metrics"
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    # The Deployment's environment: the namespace and name from the downward API.
    env.update(POD_NAMESPACE=release.namespace, POD_NAME=f"{release.name}-0")
    log_path = tmp_path / "operator.log"
    proc = start(operator_argv(release, kubeconfig, webhook_port, health_port, metrics_port),
                 env, log_path)
    metrics = ""
    try:
        async def ready() -> bool:
            assert proc.poll() is None, "the operator exited:\n" + log_path.read_text()
            return http_get(f"http://127.0.0.1:{health_port}/readyz")[0] == 200

        await wait_for(ready, timeout=60, what="the operator's /readyz")

        async def injected() -> bool:
            for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
                live = await release.kube.get("admissionregistration.k8s.io/v1", kind,
                                              release.rendered(kind)[0]["metadata"]["name"])
                hooks = (live or {}).get("webhooks") or []
                if not hooks or not all(h["clientConfig"].get("caBundle") for h in hooks):
                    return False
            return True

        def guard() -> None:
            assert proc.poll() is None, "the operator exited:\n" + log_path.read_text()
            status, text = http_get(metrics_url, token)
            assert status == 200, f"/metrics answered {status}: {text}"
            check_refusals(text, log_path.read_text())

        await wait_for(injected, timeout=30, what="the caBundle in both configurations")
        # Scrapers without a token, or without the role, are turned away.
        assert http_get(metrics_url)[0] == 401
        operator_token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
        assert http_get(metrics_url, operator_token)[0] == 403
        assert http_get(f"http://127.0.0.1:{health_port}/metrics")[0] == 404
        await drive_scenarios(release.kube, release.workloads, guard)
        status, metrics = http_get(metrics_url, token)
        assert status == 200
        (tmp_path / "metrics.txt").write_text(metrics)  # kept by pytest for a post-mortem
        assert "leader_election_master_status" in metrics
    finally:
        release.cluster.kubectl("delete", "clusterrolebinding", f"{release.name}-scraper",
                                "--ignore-not-found", check=False)
        code = stop(proc)
    log_text = log_path.read_text()
    total, _ = forbidden_requests(metrics)
    assert total > 0, "no API request was counted: the check below would prove nothing"
    check_refusals(metrics, log_text)
    assert code == 0, log_text
    # The events the operator recorded went through (events.k8s.io create).
    events = await release.kube.list("events.k8s.io/v1", "Event", release.workloads)
    assert any(e.get("reportingController") == "leaderworkerset" for e in events), events[:3]


def test_deployment_arguments_reach_the_test_operator(release: Release) -> None:
    """The RBAC run used the chart's flags: everything but the local-network overrides."""
    argv = operator_argv(release, Path("k"), 1, 2, 3)
    for arg in release.args:
        assert arg in argv
    # Only the ports are replaced, by flags given after the chart's.
    overridden = [a for a in argv[2 + len(release.args):] if a.split("=", 1)[0] in
                  LOCAL_OVERRIDES]
    assert {a.split("=", 1)[0] for a in overridden} == LOCAL_OVERRIDES


# ----------------------------------------------------------------------- upgrade and uninstall


async def test_upgrade_keeps_what_the_operator_wrote(release: Release) -> None:
    """Helm's three-way merge leaves the certificates the operator put into the chart's empty
    Secret, and the caBundles it injected, alone: an upgrade must not break admission."""
    kube, cluster = release.kube, release.cluster
    secret_name = release.rendered("Secret")[0]["metadata"]["name"]
    secret = await kube.get("v1", "Secret", secret_name, release.namespace)
    assert secret is not None
    if not secret.get("data"):  # run alone: write what the operator would have
        secret = await kube.patch("v1", "Secret", secret_name, {"data": {
            "tls.crt": base64.b64encode(b"operator's").decode()}}, release.namespace)
    configs: dict[str, Any] = {}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        name = release.rendered(kind)[0]["metadata"]["name"]
        live = await kube.get("admissionregistration.k8s.io/v1", kind, name)
        assert live is not None
        # As in a cluster: the chart's Service client config (the RBAC run pointed it at a
        # local URL) with the caBundle the operator injected (or one like it, run alone).
        bundle = live["webhooks"][0]["clientConfig"].get("caBundle") or base64.b64encode(
            certs.bundle_pem(certs.plan(None, now=dt.datetime.now(dt.UTC),
                                        policy=WebhookOptions().policy(),
                                        bundle_injected=False).data or {})).decode()
        ops = [{"op": "replace", "path": f"/webhooks/{i}/clientConfig",
                "value": {**hook["clientConfig"], "caBundle": bundle}}
               for i, hook in enumerate(release.rendered(kind)[0]["webhooks"])]
        cluster.kubectl("patch", kind.lower(), name, "--type=json", "-p", json.dumps(ops))
        live = await kube.get("admissionregistration.k8s.io/v1", kind, name)
        assert live is not None
        configs[kind] = live

    helm("upgrade", release.name, str(CHART), "--kubeconfig", str(cluster.kubeconfig),
         "--namespace", release.namespace, "--reuse-values", "--set", "logLevel=debug")

    deployment = await kube.get("apps/v1", "Deployment", release.rendered("Deployment")[0][
        "metadata"]["name"], release.namespace)
    assert deployment is not None
    assert "--log-level=debug" in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    after = await kube.get("v1", "Secret", secret_name, release.namespace)
    assert after is not None
    assert after.get("data") == secret.get("data")
    for kind, before in configs.items():
        now = await kube.get("admissionregistration.k8s.io/v1", kind,
                             before["metadata"]["name"])
        assert now is not None
        assert [h["clientConfig"] for h in now["webhooks"]] == [
            h["clientConfig"] for h in before["webhooks"]]


async def test_uninstall_removes_the_release_but_never_the_crd(release: Release) -> None:
    """Last in this module: it takes the release away."""
    kube = release.kube
    helm("uninstall", release.name, "--kubeconfig", str(release.cluster.kubeconfig),
         "--namespace", release.namespace, "--wait")
    for obj in release.objects:
        meta = obj["metadata"]
        live = await kube.get(*_api_version(obj), meta["name"], meta.get("namespace"))
        assert live is None or live["metadata"].get("deletionTimestamp"), (
            f"{obj['kind']} {meta['name']} survived helm uninstall")
    crd = await kube.get("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                         "leaderworkersets.leaderworkerset.x-k8s.io")
    assert crd is not None
    assert not crd["metadata"].get("deletionTimestamp")
