"""A real Prometheus scrapes ``lws-operator run`` on the full tier, as a cluster's would.

Once over plain HTTP (``make run``'s mode), once over HTTPS with each scrape authenticated and
authorized through the API server (the default, upstream's): Prometheus then presents the token
of a ServiceAccount granted ``get`` on the non-resource URL ``/metrics``. A LeaderWorkerSet is
created and the test asks Prometheus' query API, not the endpoint, for controller-runtime's
series and our group series, until they carry the values a user would chart. Scrapes without a
token, with a token the API server rejects, or with one whose user may not read metrics are
refused with 401 / 403.
"""

from __future__ import annotations

import asyncio
import http.client
import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from e2e import prometheus
from e2e.cluster import LocalCluster
from e2e.cluster.launcher import free_port
from e2e.harness.builder import API, LeaderWorkerSet
from e2e.harness.clusters import Clusters
from e2e.harness.launcher import OperatorProcess
from e2e.kube import Kube, wait_for

pytestmark = pytest.mark.full

RBAC = "rbac.authorization.k8s.io/v1"

# controller-runtime's names (upstream's pkg/metrics; the webhook series as upstream's e2e checks
# them), each with a label set that must be present.
CONTROLLER_SERIES = (
    'controller_runtime_reconcile_total{controller="leaderworkerset",result="success"}',
    'controller_runtime_reconcile_errors_total{controller="leaderworkerset"}',
    'controller_runtime_reconcile_time_seconds_count{controller="leaderworkerset"}',
    'workqueue_depth{name="leaderworkerset",controller="leaderworkerset"}',
    'workqueue_adds_total{name="leaderworkerset",controller="leaderworkerset"}',
    'workqueue_queue_duration_seconds_count{name="leaderworkerset"}',
    'workqueue_work_duration_seconds_count{name="leaderworkerset"}',
    'rest_client_requests_total{code="200",method="GET"}',
    'rest_client_requests_total{code="201",method="POST"}',
    'controller_runtime_webhook_requests_total{webhook="/mutate--v1-pod",code="200"}',
    'controller_runtime_webhook_latency_seconds_count{'
    'webhook="/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset"}',
    'process_resident_memory_bytes',
)


@dataclass
class Setup:
    cluster: LocalCluster
    kube: Kube
    namespace: str  # the workloads'


@pytest_asyncio.fixture(loop_scope="session")
async def setup(clusters: Clusters) -> AsyncIterator[Setup]:
    cluster = clusters.get("full")
    cluster.install_crd()
    kube = await Kube.connect(str(cluster.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    yield Setup(cluster, kube, namespace)
    await kube.delete("v1", "Namespace", namespace)
    await kube.close()


@pytest_asyncio.fixture(loop_scope="session")
async def operator_factory(setup: Setup, tmp_path: Path) -> AsyncIterator[Any]:
    """Starts ``lws-operator run`` with the given metrics flags; stopped (webhooks
    unregistered) and its namespace deleted at the end."""
    started: list[OperatorProcess] = []

    async def start(*metrics_args: str) -> OperatorProcess:
        op = OperatorProcess.local(str(setup.cluster.kubeconfig), uuid.uuid4().hex[:8],
                             tmp_path / "operator.log", extra_args=[*metrics_args])
        await setup.kube.create({"apiVersion": "v1", "kind": "Namespace",
                                 "metadata": {"name": op.namespace}})
        started.append(op)
        await op.start()
        return op

    yield start
    for op in started:
        code = await op.stop()
        assert code == 0, op.log_tail()
        await setup.kube.delete("v1", "Namespace", op.namespace)


def lws(name: str, replicas: int, size: int) -> dict[str, Any]:
    return LeaderWorkerSet(name).replicas(replicas).size(size).image("serve:1", name="main").build()


async def series_present(prom: prometheus.Prometheus, exprs: tuple[str, ...]) -> list[str]:
    """The expressions Prometheus has no sample for yet."""
    missing = []
    for expr in exprs:
        if not await asyncio.to_thread(prom.query, expr):
            missing.append(expr)
    return missing


async def value_of(prom: prometheus.Prometheus, expr: str) -> float | None:
    result = await asyncio.to_thread(prom.query, expr)
    return float(result[0]["value"][1]) if result else None


async def scrape_and_check(setup: Setup, prom: prometheus.Prometheus) -> None:
    """Create a LeaderWorkerSet; wait until Prometheus holds controller-runtime's series and
    the group series show both groups Ready; delete it; its group series go stale."""
    name = f"prom-{uuid.uuid4().hex[:6]}"
    await setup.kube.create(lws(name, replicas=2, size=2), setup.namespace)
    labels = f'namespace="{setup.namespace}",name="{name}"'

    async def everything() -> bool:
        missing = await series_present(prom, CONTROLLER_SERIES)
        ready = await value_of(prom, f'lws_groups{{{labels},state="ready"}}')
        timed = await value_of(prom, f"lws_group_ready_seconds_count{{{labels}}}")
        return not missing and ready == 2 and timed == 2

    await wait_for(everything, timeout=120, interval=1.0,
                   what="the controller series and both groups Ready in Prometheus")
    assert await value_of(prom, f'lws_groups{{{labels},state="missing"}}') == 0
    assert await value_of(
        prom, f'lws_group_recreations_total{{{labels},reason="pod-failure"}}') == 0
    assert await value_of(prom, 'up{job="lws-operator"}') == 1

    await setup.kube.delete(API, "LeaderWorkerSet", name, setup.namespace)

    async def gone() -> bool:
        return not await asyncio.to_thread(prom.query, f"lws_groups{{{labels}}}")

    await wait_for(gone, timeout=60, interval=1.0, what="the deleted LWS's series to go")


async def group_lifecycle(setup: Setup, prom: prometheus.Prometheus) -> None:
    """A group recreated after its worker was deleted, then a rolling update: the recreation
    counters by reason, the restart budget and the rollout histograms move in Prometheus."""
    name = f"life-{uuid.uuid4().hex[:6]}"
    body = lws(name, replicas=2, size=2)
    body["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] = 3
    await setup.kube.create(body, setup.namespace)
    labels = f'namespace="{setup.namespace}",name="{name}"'

    async def value_is(expr: str, expected: float) -> bool:
        return await value_of(prom, expr) == expected

    ready = f'lws_groups{{{labels},state="ready"}}'
    await wait_for(lambda: value_is(ready, 2), timeout=120, interval=1.0,
                   what="both groups Ready")
    assert await value_of(prom, f'lws_group_restart_budget_remaining{{{labels},group="0"}}') == 3

    await setup.kube.delete("v1", "Pod", f"{name}-0-1", setup.namespace)
    await wait_for(lambda: value_is(
        f'lws_group_recreations_total{{{labels},reason="pod-deleted"}}', 1), timeout=120,
        interval=1.0, what="the recreation of group 0 counted")
    await wait_for(lambda: value_is(
        f'lws_group_restart_budget_remaining{{{labels},group="0"}}', 2), timeout=60,
        interval=1.0, what="group 0's budget to go down by one")
    assert await value_of(prom, f'lws_group_restart_budget_remaining{{{labels},group="1"}}') == 3

    await wait_for(lambda: value_is(ready, 2), timeout=120, interval=1.0,
                   what="both groups Ready again")
    await setup.kube.patch(API, "LeaderWorkerSet", name, {"spec": {"leaderWorkerTemplate": {
        "workerTemplate": {"spec": {"containers": [{"name": "main", "image": "serve:2"}]}}}}},
        setup.namespace)
    await wait_for(lambda: value_is(f"lws_rollout_duration_seconds_count{{{labels}}}", 1),
                   timeout=120, interval=1.0, what="the rollout's duration observed")
    steps = await value_of(prom, f"lws_rollout_step_duration_seconds_count{{{labels}}}")
    assert steps is not None
    assert steps >= 1
    assert await value_of(prom, f'lws_group_recreations_total{{{labels},reason="rollout"}}') == 2
    await wait_for(lambda: value_is(ready, 2), timeout=60, interval=1.0,
                   what="both groups Ready after the rollout")
    await setup.kube.delete(API, "LeaderWorkerSet", name, setup.namespace)


async def test_prometheus_scrapes_plain_http_metrics(setup: Setup, operator_factory: Any,
                                                     tmp_path: Path) -> None:
    port = free_port()
    await operator_factory("--metrics-bind-address", f"127.0.0.1:{port}",
                           "--metrics-secure=false")
    with prometheus.running(tmp_path / "prometheus", {
            "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}) as prom:
        await scrape_and_check(setup, prom)
        await group_lifecycle(setup, prom)


def get_status(url: str, token: str | None) -> int:
    """The HTTP status of a GET with an optional bearer token; the certificate is not
    verified (a self-signed one, as a scraper with insecure_skip_verify sees it)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)
    except (OSError, http.client.HTTPException):
        return 0  # no HTTP answer at all (e.g. plain HTTP to the TLS port)


def get_text(url: str, token: str) -> str:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, context=context, timeout=10) as answer:
        return str(answer.read().decode())


async def grant_metrics_reader(setup: Setup, account: str) -> str:
    """A ServiceAccount bound to a ClusterRole with ``get`` on ``/metrics``, as the chart's
    ``metrics-reader`` role grants it; returns the role's name."""
    role = f"metrics-reader-{setup.namespace}"
    await setup.kube.create({"apiVersion": RBAC, "kind": "ClusterRole",
                             "metadata": {"name": role},
                             "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]})
    await setup.kube.create({
        "apiVersion": RBAC, "kind": "ClusterRoleBinding", "metadata": {"name": role},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": account,
                      "namespace": setup.namespace}]})
    return role


def token_for(setup: Setup, account: str) -> str:
    setup.cluster.kubectl("create", "serviceaccount", account, "-n", setup.namespace,
                          check=False)
    return setup.cluster.kubectl("create", "token", account, "-n", setup.namespace,
                                 "--duration=1h").strip()


async def test_prometheus_scrapes_authenticated_https_metrics(
        setup: Setup, operator_factory: Any, tmp_path: Path) -> None:
    port = free_port()
    await operator_factory("--metrics-bind-address", f"127.0.0.1:{port}")  # secure default
    role = await grant_metrics_reader(setup, "prometheus")
    try:
        token = await asyncio.to_thread(token_for, setup, "prometheus")
        outsider = await asyncio.to_thread(token_for, setup, "outsider")
        url = f"https://127.0.0.1:{port}/metrics"

        async def allowed() -> bool:  # RBAC changes reach the authorizer within moments
            return await asyncio.to_thread(get_status, url, token) == 200

        await wait_for(allowed, timeout=30, what="the metrics reader to be allowed")
        assert await asyncio.to_thread(get_status, url, None) == 401
        assert await asyncio.to_thread(get_status, url, "not-a-token") == 401
        assert await asyncio.to_thread(get_status, url, outsider) == 403
        plain = await asyncio.to_thread(get_status, f"http://127.0.0.1:{port}/metrics", token)
        assert plain != 200  # no plain-HTTP fallback on the secure port

        (tmp_path / "token").write_text(token)
        with prometheus.running(tmp_path / "prometheus", {
                "scheme": "https", "tls_config": {"insecure_skip_verify": True},
                "authorization": {"credentials_file": str(tmp_path / "token")},
                "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]}) as prom:
            await scrape_and_check(setup, prom)

            async def scraped_often() -> float | None:
                count = await value_of(prom, 'count_over_time(up{job="lws-operator"}[10m])')
                return count if count is not None and count >= 10 else None

            scrapes = await wait_for(scraped_often, timeout=60, interval=1.0,
                                     what="ten authenticated scrapes")
        # Review results are cached per token: far fewer TokenReviews than scrapes.
        text = await asyncio.to_thread(get_text, url, token)
        reviews = sum(s.value for f in text_string_to_metric_families(text) for s in f.samples
                      if s.name == "lws_operator_api_requests_total"
                      and s.labels["resource"] == "tokenreviews")
        assert scrapes is not None
        assert scrapes >= 10
        assert 1 <= reviews <= 6  # one per distinct token here, maybe a renewal
    finally:
        await setup.kube.delete(RBAC, "ClusterRoleBinding", role)
        await setup.kube.delete(RBAC, "ClusterRole", role)
