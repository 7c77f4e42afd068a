"""The chart's alerts on the operator itself, each made to fire on a real Prometheus by the
situation it is for, on the full tier.

The rules are the PrometheusRule as the chart renders it (every ``for`` and window short), the
job is the one the chart's ServiceMonitor gives the operator's targets (the metrics Service's
name), and each target carries its namespace as the Prometheus Operator's discovery labels it
(``honor_labels``, so the LeaderWorkerSet series keep their own ``namespace``). Three
``lws-operator run`` processes, each as one installation in a namespace of its own:

* ``main`` leads and reconciles. A LeaderWorkerSet with the group budget ``"0"`` is drained as
  ``kubectl drain`` does (an eviction asked again every 2 s, refused with 429 each time):
  LeaderWorkerSetDrainBlocked. A caller sends the pod webhook requests that are no
  AdmissionReview (each answered as a failure, 400): LeaderWorkerSetWebhookFailing. A
  DisaggregatedSet rolled to a template no node can hold (64 GPUs
  a pod) waits for groups that never become Ready: DisaggregatedSetNotProgressing. At the end
  the process is stopped: LeaderWorkerSetOperatorDown.
* ``standby`` runs while its Lease is held by a holder that is none of the scraped replicas
  (a hung pod still renewing, another installation under the same Lease name): it never leads,
  LeaderWorkerSetOperatorNoLeader.
* ``uncertified`` is in cert-manager mode (``--cert-management=external``) with a Secret whose
  certificate expires in two days and webhook configurations whose caBundle was never injected:
  it serves the certificate (LeaderWorkerSetWebhookCertificateExpiry) and is never ready, so the
  webhook Service would have no endpoints (LeaderWorkerSetPodWebhookUnavailable).

The processes run the ``lws-operator`` of the test's interpreter (an editable install of the
checkout); from another worktree, put it first with ``PYTHONPATH``.

Each alert's time from the action that caused it to firing is printed (``-s`` shows it); none of
them may fire for an installation that is fine.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import http.client
import json
import ssl
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from e2e import prometheus
from e2e.cluster import LocalCluster
from e2e.cluster.launcher import free_port
from e2e.harness.builder import API, DS_API, DS_KIND, DisaggregatedSet, LeaderWorkerSet, Role
from e2e.harness.chart import objects, render
from e2e.harness.clusters import Clusters
from e2e.harness.disaggregated import PAUSE, install_crds
from e2e.harness.launcher import OperatorProcess
from e2e.kube import MERGE_PATCH, Kube, wait_for
from lws_operator.api.constants import MUTATE_POD_PATH
from lws_operator.logic.runtime import certs

pytestmark = pytest.mark.full

OURS = "lws-operator.dev/"
ADMISSION = "admissionregistration.k8s.io/v1"
VALUES: dict[str, Any] = {"prometheusRule": {"enabled": True, "alerts": {
    "operatorDown": {"for": "2s"},
    "noLeader": {"for": "5s"},
    "podWebhookUnavailable": {"for": "5s"},
    "webhookCertificateExpiry": {"for": "5s"},
    "webhookFailing": {"for": "5s", "window": "30s"},
    "drainBlocked": {"for": "20s", "window": "30s"},
    "disaggregatedSetNotProgressing": {"for": "5s", "window": "30s"},
}}}
NEW_ALERTS = {"LeaderWorkerSetOperatorDown", "LeaderWorkerSetOperatorNoLeader",
              "LeaderWorkerSetPodWebhookUnavailable", "LeaderWorkerSetWebhookCertificateExpiry",
              "LeaderWorkerSetWebhookFailing",
              "LeaderWorkerSetDrainBlocked", "DisaggregatedSetNotProgressing"}


@dataclass
class Rendered:
    groups: list[dict[str, Any]]
    job: str
    lease: str


def rendered() -> Rendered:
    objs = objects(render(values=VALUES))
    [rule] = [o for o in objs if o["kind"] == "PrometheusRule"]
    [service] = [o for o in objs if o["kind"] == "Service"
                 and o["metadata"]["labels"].get("app.kubernetes.io/component") == "metrics"]
    [deployment] = [o for o in objs if o["kind"] == "Deployment"]
    [lease] = [a.split("=", 1)[1] for a in deployment["spec"]["template"]["spec"]
               ["containers"][0]["args"] if a.startswith("--leader-elect-resource-name=")]
    return Rendered(rule["spec"]["groups"], service["metadata"]["name"], lease)


@dataclass
class Env:
    cluster: LocalCluster
    kube: Kube
    namespace: str  # the workloads'
    tmp: Path
    started: list[OperatorProcess] = field(default_factory=list)
    configurations: list[str] = field(default_factory=list)  # mutating, made by the test


@pytest_asyncio.fixture(loop_scope="session")
async def env(clusters: Clusters, tmp_path: Path) -> AsyncIterator[Env]:
    cluster = clusters.get("full")
    await asyncio.to_thread(install_crds, cluster)
    kube = await Kube.connect(str(cluster.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    found = Env(cluster, kube, namespace, tmp_path)
    try:
        yield found
    finally:
        await kube.delete(API, "LeaderWorkerSet", "held", namespace)
        await kube.delete(DS_API, DS_KIND, "llm", namespace)
        for op in found.started:
            await op.stop()
        for name in found.configurations:
            await kube.delete(ADMISSION, "MutatingWebhookConfiguration", name)
            await kube.delete("v1", "Namespace", op.namespace)
        await kube.delete("v1", "Namespace", namespace)
        await kube.close()


async def new_operator(env: Env, name: str, lease: str, *extra: str) -> OperatorProcess:
    op = OperatorProcess.local(str(env.cluster.kubeconfig), f"{name[:4]}{uuid.uuid4().hex[:6]}",
                               env.tmp / f"{name}.log",
                               extra_args=["--leader-elect", "--leader-elect-resource-name",
                                           lease, *extra])
    op.metrics_port = free_port()
    await env.kube.create({"apiVersion": "v1", "kind": "Namespace",
                           "metadata": {"name": op.namespace}})
    env.started.append(op)
    return op


async def spawn(op: OperatorProcess) -> None:
    """Start without waiting for ``/readyz`` (a process that is never ready)."""
    log = op.log_path.open("ab")
    op.process = await asyncio.create_subprocess_exec(
        *op.argv(), cwd=op.cwd, stdout=log, stderr=log, stdin=asyncio.subprocess.DEVNULL,
        start_new_session=True)
    log.close()


def micro_time(at: dt.datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def expiring_secret(namespace: str, days: float) -> dict[str, Any]:
    """A kubernetes.io/tls Secret as cert-manager writes it, whose certificate expires in
    ``days``."""
    from cryptography.hazmat.primitives import serialization

    now = dt.datetime.now(dt.UTC)
    ca, ca_key = certs.new_ca(now, dt.timedelta(days=365))
    cert, key = certs.new_serving_cert(ca, ca_key, now, dt.timedelta(days=days),
                                       ["localhost"], ["127.0.0.1"])
    pem = cert.public_bytes(serialization.Encoding.PEM)
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(serialization.Encoding.PEM,
                                serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    import base64

    def b64(data: bytes) -> str:
        return base64.b64encode(data).decode()

    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": "lws-webhook-server-cert", "namespace": namespace},
            "data": {"tls.crt": b64(pem), "tls.key": b64(key_pem), "ca.crt": b64(ca_pem)}}


class Alerts:
    """When each (alert, label) pair was first seen firing."""

    def __init__(self, prom: prometheus.Prometheus) -> None:
        self.prom = prom

    async def firing(self, alert: str, **labels: str) -> bool:
        found = await asyncio.to_thread(self.prom.alerts)
        return any(a["labels"].get("alertname") == alert and a["state"] == "firing"
                   and all(a["labels"].get(k) == v for k, v in labels.items()) for a in found)

    async def time_to_fire(self, since: float, alert: str, within: float,
                           **labels: str) -> float:
        await wait_for(lambda: self.firing(alert, **labels), timeout=within, interval=0.5,
                       what=f"{alert}{labels} firing")
        took = time.monotonic() - since
        print(f"{alert} {labels}: fired {took:.1f}s after its cause")
        return took


async def keep_evicting(env: Env, pod: str, stop: asyncio.Event, answers: list[str]) -> None:
    """Ask for the eviction of ``pod`` every 2 s until ``stop``, as ``kubectl drain`` does
    (every 5 s), recording each answer."""
    body = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                       "metadata": {"name": pod, "namespace": env.namespace}})
    path = f"/api/v1/namespaces/{env.namespace}/pods/{pod}/eviction"
    while not stop.is_set():
        try:
            out = "allowed: " + await asyncio.to_thread(
                env.cluster.kubectl, "create", "--raw", path, "-f", "-", stdin=body)
        except RuntimeError as exc:  # kubectl failed: its stderr is the refusal
            out = str(exc)
        answers.append(out)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), 2.0)


async def until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    await wait_for(check, timeout=180, interval=1.0, what=what)


async def test_each_alert_on_the_operator_fires_in_its_situation(env: Env) -> None:
    rules = await asyncio.to_thread(rendered)
    loaded = {r["alert"] for g in rules.groups for r in g["rules"]}
    assert loaded >= NEW_ALERTS
    lease = rules.lease

    main = await new_operator(env, "main", lease, "--rollout-stall-grace=3s")
    standby = await new_operator(env, "standby", lease)
    uncertified = await new_operator(env, "uncertified", lease, "--cert-management=external")

    # The standby's Lease is held by someone it cannot see renewing stop.
    now = dt.datetime.now(dt.UTC)
    await env.kube.create({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": lease, "namespace": standby.namespace},
        "spec": {"holderIdentity": "lws-operator-7d9f-ghost_0", "leaseDurationSeconds": 3600,
                 "acquireTime": micro_time(now), "renewTime": micro_time(now),
                 "leaseTransitions": 0}})
    await env.kube.create(expiring_secret(uncertified.namespace, days=2))
    # Its webhook configuration as cert-manager's cainjector has not yet injected it (no
    # caBundle). It matches no request anyone makes, so it changes nothing else here.
    await env.kube.create({
        "apiVersion": ADMISSION, "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": uncertified.configurations[0]},
        "webhooks": [{"name": "nothing.lws-operator.dev", "admissionReviewVersions": ["v1"],
                      "sideEffects": "None", "failurePolicy": "Ignore",
                      "clientConfig": {"url": "https://127.0.0.1:1/nothing"},
                      "rules": [{"apiGroups": ["example.invalid"], "apiVersions": ["v1"],
                                 "operations": ["CREATE"], "resources": ["nothings"]}]}]})
    env.configurations.append(uncertified.configurations[0])

    targets = [{"targets": [f"127.0.0.1:{op.metrics_port}"],
                "labels": {"namespace": op.namespace}} for op in (main, standby, uncertified)]
    with prometheus.running(env.tmp / "prometheus", {"honor_labels": True,
                                                     "static_configs": targets},
                            rule_groups=rules.groups, job=rules.job) as prom:
        alerts = Alerts(prom)
        began = time.monotonic()
        await main.start()
        await standby.start()
        await spawn(uncertified)

        times: dict[str, float] = {}

        async def standby_and_uncertified() -> None:
            times["noLeader"] = await alerts.time_to_fire(
                began, "LeaderWorkerSetOperatorNoLeader", 120, namespace=standby.namespace)
            times["certificate"] = await alerts.time_to_fire(
                began, "LeaderWorkerSetWebhookCertificateExpiry", 120,
                namespace=uncertified.namespace)
            times["unavailable"] = await alerts.time_to_fire(
                began, "LeaderWorkerSetPodWebhookUnavailable", 120,
                namespace=uncertified.namespace)

        # The situations are independent of each other (the standby's and the uncertified
        # installation's from the start; on main, a set's evictions, requests sent to the pod
        # webhook directly, a DisaggregatedSet), so they are made at once: each alert waits out
        # its own window and ``for``.
        async with asyncio.TaskGroup() as situations:
            situations.create_task(standby_and_uncertified())
            situations.create_task(drain_blocked(env, alerts, times))
            situations.create_task(webhook_failing(main, alerts, times))
            situations.create_task(disaggregated_not_progressing(env, alerts, times))

        # Nothing fires for the installation that is fine (main), but what its sets cause.
        found = await asyncio.to_thread(prom.alerts)
        for alert in found:
            if alert["labels"]["alertname"] in ("LeaderWorkerSetOperatorDown",
                                                "LeaderWorkerSetOperatorNoLeader",
                                                "LeaderWorkerSetPodWebhookUnavailable",
                                                "LeaderWorkerSetWebhookCertificateExpiry"):
                assert alert["labels"].get("namespace") != main.namespace, alert
        for rule in await asyncio.to_thread(prom.rules):
            assert rule["health"] == "ok", rule
        # main's own certificate (self-managed: issued for a year) and readiness, as exported.
        left = await asyncio.to_thread(prom.query, (
            "lws_operator_webhook_certificate_expiry_timestamp_seconds"
            f'{{namespace="{main.namespace}"}} - time()'))
        assert [round(float(r["value"][1]) / 86400) for r in left] == [365], left
        checks = await asyncio.to_thread(
            prom.query, f'lws_operator_readiness_check{{namespace="{main.namespace}"}}')
        assert {r["metric"]["check"]: r["value"][1] for r in checks} == {
            "webhooks-serve": "1", "caches-synced": "1", "leaderworkerset-api": "1"}, checks

        stopped = time.monotonic()
        assert await main.stop() == 0, main.log_tail()
        times["down"] = await alerts.time_to_fire(
            stopped, "LeaderWorkerSetOperatorDown", 60, namespace=main.namespace)
    print("times to fire:", {k: round(v, 1) for k, v in times.items()})


async def drain_blocked(env: Env, alerts: Alerts, times: dict[str, float]) -> None:
    """A set whose budget allows no disrupted group, drained: every eviction refused."""
    held = (LeaderWorkerSet("held").replicas(2).size(2).image("serve:1", name="main")
            .annotations({OURS + "max-disrupted-groups": "0"}).build())
    await env.kube.create(held, env.namespace)

    async def ready() -> bool:
        got = await env.kube.get(API, "LeaderWorkerSet", "held", env.namespace)
        return got is not None and (got.get("status") or {}).get("readyReplicas") == 2

    await until(ready, "LeaderWorkerSet held Ready")
    stop, answers = asyncio.Event(), list[str]()
    began = time.monotonic()
    evicting = asyncio.create_task(keep_evicting(env, "held-0", stop, answers))
    try:
        times["drain"] = await alerts.time_to_fire(
            began, "LeaderWorkerSetDrainBlocked", 120, namespace=env.namespace, name="held")
    finally:
        stop.set()
        await evicting
    assert answers
    assert all("429" in a or "Too Many Requests" in a or "TooManyRequests" in a
               for a in answers), answers[:3]
    pod = await env.kube.get("v1", "Pod", "held-0", env.namespace)
    assert pod is not None
    assert not pod["metadata"].get("deletionTimestamp")


async def disaggregated_not_progressing(env: Env, alerts: Alerts,
                                        times: dict[str, float]) -> None:
    """A two-role DisaggregatedSet rolled to a template no node can hold."""
    ds = (DisaggregatedSet("llm")
          .role(Role("prefill").replicas(1).size(1).image(PAUSE, name="main"))
          .role(Role("decode").replicas(1).size(1).image(PAUSE, name="main")).build())
    await env.kube.create(ds, env.namespace)

    async def available() -> bool:
        got = await env.kube.get(DS_API, DS_KIND, "llm", env.namespace)
        conditions = ((got or {}).get("status") or {}).get("conditions") or []
        return any(c["type"] == "Available" and c["status"] == "True" for c in conditions)

    await until(available, "DisaggregatedSet llm Available")
    got = await env.kube.get(DS_API, DS_KIND, "llm", env.namespace)
    assert got is not None
    roles = got["spec"]["roles"]
    for role in roles:
        if role["name"] == "prefill":
            container = role["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"][
                "containers"][0]
            container["resources"] = {"limits": {"nvidia.com/gpu": "64"}}
    began = time.monotonic()
    await env.kube.patch(DS_API, DS_KIND, "llm", {"spec": {"roles": roles}}, env.namespace,
                         content_type=MERGE_PATCH)
    times["disaggregated"] = await alerts.time_to_fire(
        began, "DisaggregatedSetNotProgressing", 180, namespace=env.namespace, name="llm")
    # The rollout's first step (the new revision's groups) is progress: not before a window.
    assert times["disaggregated"] >= 30, times


def post_unreadable(port: int) -> int:
    """One request to the pod webhook that is no AdmissionReview; the review's code."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    connection = http.client.HTTPSConnection("127.0.0.1", port, timeout=10, context=context)
    try:
        connection.request("POST", MUTATE_POD_PATH + "?timeout=10s", body=b"[]",
                           headers={"Content-Type": "application/json"})
        answer = json.loads(connection.getresponse().read())
    finally:
        connection.close()
    return int(answer["response"]["status"]["code"])


async def webhook_failing(main: OperatorProcess, alerts: Alerts,
                          times: dict[str, float]) -> None:
    """A caller of the pod webhook that sends no AdmissionReview (a proxy, a tool calling the
    Service): every such admission fails (400), which the API server would turn into a refused
    pod. The only failure of our own webhook that can be caused without a bug in it."""
    began = time.monotonic()
    codes = []
    while not await alerts.firing("LeaderWorkerSetWebhookFailing", webhook=MUTATE_POD_PATH):
        codes.append(await asyncio.to_thread(post_unreadable, main.webhook_port))
        await asyncio.sleep(0.5)
        assert time.monotonic() - began < 120, "LeaderWorkerSetWebhookFailing did not fire"
    times["failing"] = time.monotonic() - began
    print(f"LeaderWorkerSetWebhookFailing: fired {times['failing']:.1f}s after its cause")
    assert set(codes) == {400}
