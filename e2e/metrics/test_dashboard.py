"""The chart's dashboard and alert rules against a real Prometheus scraping the operator.

The chart is rendered with both optional parts on (and every ``for`` short); the PrometheusRule's
groups are loaded into the real Prometheus as a rule file, and the dashboard is read from the
rendered ConfigMap, so what is checked is exactly what the chart ships. Three LeaderWorkerSets
on the full tier give every query something to show:

* ``steady``: Ready, with a restart budget and a group disruption budget (the budget's gauge
  and eviction counters), rolled to a new image (rollout durations);
* ``budget``: ``maxGroupRestarts: 0``, one of its pods restarts: the group is stopped for good
  (``exhausted``) and LeaderWorkerSetRestartBudgetExhausted fires;
* ``stall``: rolled to a template no node can hold (64 GPUs a pod): the new revision's pods stay
  unschedulable, the controller reports the rollout stalled after its grace (3 s here), and
  LeaderWorkerSetRolloutStalled and LeaderWorkerSetGroupNotReady fire.

Then every dashboard query (template variables substituted) and every alert expression (its
final comparison made a ``bool`` one, so it answers whether or not the alert fires) must return
series, every rule must evaluate without error, and no alert may fire for ``steady``.

``LWS_DASHBOARD_PNG=docs/dashboard.png`` (``make dashboard-png``) also recovers both broken sets,
lets the series run on, and draws the dashboard's panels from this Prometheus into that file.
"""

from __future__ import annotations

import asyncio
import os
import re
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from e2e import dashboard, prometheus
from e2e.cluster.faults import restart_container
from e2e.cluster.launcher import free_port
from e2e.harness.builder import API, LeaderWorkerSet
from e2e.harness.chart import objects, render
from e2e.harness.clusters import Clusters
from e2e.harness.launcher import OperatorProcess
from e2e.kube import MERGE_PATCH, Kube, wait_for

pytestmark = pytest.mark.full

P = "leaderworkerset.sigs.k8s.io/"
OURS = "lws-operator.dev/"
# Short enough for a test: each alert's condition holds for seconds, not minutes.
VALUES: dict[str, Any] = {
    "dashboard": {"enabled": True},
    # The job this test's Prometheus scrapes the operator as.
    "prometheusRule": {"enabled": True, "job": "lws-operator", "alerts": {
        "rolloutStalled": {"for": "2s"},
        "progressDeadlineExceeded": {"for": "2s"},
        "restartBudgetExhausted": {"for": "2s"},
        "groupNotReady": {"for": "10s"},
        "webhookSlow": {"for": "5s", "window": "1m"},
        "reconcileErrors": {"for": "5s", "window": "1m"},
    }},
}
EXPECTED_ALERTS = {"LeaderWorkerSetRolloutStalled", "LeaderWorkerSetRestartBudgetExhausted",
                   "LeaderWorkerSetProgressDeadlineExceeded",
                   "LeaderWorkerSetGroupNotReady", "LeaderWorkerSetWebhookSlow",
                   "LeaderWorkerSetReconcileErrors", "LeaderWorkerSetOperatorDown",
                   "LeaderWorkerSetOperatorNoLeader", "LeaderWorkerSetPodWebhookUnavailable",
                   "LeaderWorkerSetWebhookFailing",
                   "LeaderWorkerSetWebhookCertificateExpiry", "LeaderWorkerSetDrainBlocked",
                   "DisaggregatedSetNotProgressing"}
# Alerts with no series here: no DisaggregatedSet in this scenario (e2e/metrics/test_alerts.py
# makes it fire on one).
NO_SERIES_HERE = {"DisaggregatedSetNotProgressing"}
# The final comparison of a rule expression: `<signal> > <threshold>`.
COMPARISON = re.compile(r"\s(>|<|>=|<=|==|!=)\s+([0-9.eE+-]+)\s*$")


def rendered() -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The PrometheusRule's rule groups and the dashboard, as the chart renders them."""
    import json

    objs = objects(render(values=VALUES))
    [rule] = [o for o in objs if o["kind"] == "PrometheusRule"]
    [config_map] = [o for o in objs if o["kind"] == "ConfigMap"
                    and o["metadata"]["name"].endswith("-dashboard")]
    [text] = config_map["data"].values()
    groups: list[dict[str, Any]] = rule["spec"]["groups"]
    return groups, json.loads(text)


def as_bool(expr: str) -> str:
    """``expr``'s final comparison as a ``bool`` one: 0 or 1 for every series of the signal."""
    found = COMPARISON.search(expr)
    assert found, f"the rule's expression does not end in a comparison: {expr}"
    return f"{expr[:found.start()]} {found.group(1)} bool {found.group(2)}"


def lws(name: str, replicas: int, size: int, annotations: dict[str, str] | None = None,
        **template: Any) -> dict[str, Any]:
    built = LeaderWorkerSet(name).replicas(replicas).size(size).template(**template)
    if annotations:
        built.annotations(annotations)
    return built.image("serve:1", name="main").build()


def firing(alerts: list[dict[str, Any]], alert: str, name: str) -> bool:
    return any(a["labels"].get("alertname") == alert and a["labels"].get("name") == name
               and a["state"] == "firing" for a in alerts)


@pytest_asyncio.fixture(loop_scope="session")
async def kube(clusters: Clusters) -> AsyncIterator[tuple[Kube, str, str]]:
    """A client, a namespace for the workloads, and the cluster's kubeconfig."""
    cluster = clusters.get("full")
    cluster.install_crd()
    client = await Kube.connect(str(cluster.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    await client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": namespace}})
    yield client, namespace, str(cluster.kubeconfig)
    await client.delete("v1", "Namespace", namespace)
    await client.close()


async def test_dashboard_queries_and_alerts_on_live_data(
        kube: tuple[Kube, str, str], tmp_path: Path) -> None:
    client, ns, kubeconfig = kube
    groups, board = await asyncio.to_thread(rendered)
    rules = [r for g in groups for r in g["rules"]]
    assert {r["alert"] for r in rules} == EXPECTED_ALERTS

    port = free_port()
    op = OperatorProcess.local(kubeconfig, uuid.uuid4().hex[:8], tmp_path / "operator.log",
                               extra_args=["--metrics-bind-address", f"127.0.0.1:{port}",
                                           "--metrics-secure=false",
                                           "--rollout-stall-grace=3s"])
    await client.create({"apiVersion": "v1", "kind": "Namespace",
                         "metadata": {"name": op.namespace}})
    await op.start()
    started = time.time()
    try:
        with prometheus.running(tmp_path / "prometheus", {
                "static_configs": [{"targets": [f"127.0.0.1:{port}"]}]},
                rule_groups=groups) as prom:
            await scenario(client, ns, prom, board, rules)
            png = os.environ.get("LWS_DASHBOARD_PNG")
            if png:
                await recover_and_draw(client, ns, prom, board, started, Path(png))
    finally:
        for name in ("steady", "budget", "stall"):
            await client.delete(API, "LeaderWorkerSet", name, ns)
        code = await op.stop()
        await client.delete("v1", "Namespace", op.namespace)
    assert code == 0, op.log_tail()


async def scenario(client: Kube, ns: str, prom: prometheus.Prometheus,
                   board: dict[str, Any], rules: list[dict[str, Any]]) -> None:
    await client.create(lws("steady", 2, 2, {OURS + "max-disrupted-groups": "1"},
                            maxGroupRestarts=2), ns)
    await client.create(lws("budget", 1, 2, maxGroupRestarts=0), ns)
    await client.create(lws("stall", 2, 2), ns)

    async def value(expr: str) -> float | None:
        result = await asyncio.to_thread(prom.query, expr)
        return float(result[0]["value"][1]) if result else None

    async def all_ready() -> bool:
        ready = await value(f'sum(lws_groups{{namespace="{ns}",state="ready"}})')
        return ready == 5

    await wait_for(all_ready, timeout=120, interval=1.0, what="5 groups Ready in Prometheus")

    # A rollout that completes, a group spending a zero budget, a rollout no node can hold.
    await client.patch(API, "LeaderWorkerSet", "steady", {"spec": {"leaderWorkerTemplate": {
        "workerTemplate": {"spec": {"containers": [{"name": "main", "image": "serve:2"}]}}}}},
        ns, content_type=MERGE_PATCH)
    await restart_container(client, ns, "budget-0-1")
    await client.patch(API, "LeaderWorkerSet", "stall", {"spec": {"leaderWorkerTemplate": {
        "workerTemplate": {"spec": {"containers": [{"name": "main", "image": "serve:2",
                                                    "resources": {"limits": {
                                                        "nvidia.com/gpu": "64"}}}]}}}}},
        ns, content_type=MERGE_PATCH)

    async def alerts_fire() -> list[str]:
        alerts = await asyncio.to_thread(prom.alerts)
        wanted = {"LeaderWorkerSetRolloutStalled": "stall",
                  "LeaderWorkerSetRestartBudgetExhausted": "budget",
                  "LeaderWorkerSetGroupNotReady": "stall"}
        missing = [f"{a}{{name={n}}}" for a, n in wanted.items() if not firing(alerts, a, n)]
        return [] if missing else ["all"]

    await wait_for(alerts_fire, timeout=180, interval=1.0,
                   what="the stalled-rollout, budget and group-not-ready alerts firing")

    async def steady_rolled() -> bool:
        return await value(
            f'lws_rollout_duration_seconds_count{{namespace="{ns}",name="steady"}}') == 1

    await wait_for(steady_rolled, timeout=120, interval=1.0, what="steady's rollout observed")

    # Every rule loaded and evaluated without error; none fires for the healthy set.
    loaded = await asyncio.to_thread(prom.rules)
    assert {r["name"] for r in loaded} == EXPECTED_ALERTS
    for rule in loaded:
        assert rule["health"] == "ok", rule
    alerts = await asyncio.to_thread(prom.alerts)
    assert not [a for a in alerts if a["labels"].get("name") == "steady"], alerts

    # Every alert expression and every dashboard query returns series on this data.
    empty = []
    for rule in rules:
        if rule["alert"] in NO_SERIES_HERE:
            continue
        if not await asyncio.to_thread(prom.query, as_bool(rule["expr"])):
            empty.append(rule["alert"])
    assert set(dashboard.variables(board)) == {"datasource", "namespace", "name"}
    values = {"namespace": ns, "name": ".*"}
    queries = [(p.title, t.expr) for p in dashboard.panels(board) for t in p.targets]
    assert len(queries) >= 20
    for title, expr in queries:
        if not await asyncio.to_thread(prom.query, dashboard.substitute(expr, values)):
            empty.append(f"{title}: {expr}")
    assert not empty, "no series for:\n" + "\n".join(empty)


async def recover_and_draw(client: Kube, ns: str, prom: prometheus.Prometheus,
                           board: dict[str, Any], started: float, path: Path) -> None:
    """Recover the exhausted group and unblock the stalled rollout, let the series run on, and
    draw the dashboard (``make dashboard-png``)."""
    await asyncio.sleep(40)
    await client.patch("v1", "Pod", "budget-0", {"metadata": {"annotations": {
        P + "recover": "true"}}}, ns, content_type=MERGE_PATCH)
    await client.patch(API, "LeaderWorkerSet", "stall", {"spec": {"leaderWorkerTemplate": {
        "workerTemplate": {"spec": {"containers": [{"name": "main", "image": "serve:2"}]}}}}},
        ns, content_type=MERGE_PATCH)

    async def all_ready() -> bool:
        result = await asyncio.to_thread(
            prom.query, f'sum(lws_groups{{namespace="{ns}",state="ready"}})')
        return bool(result) and float(result[0]["value"][1]) == 5

    await wait_for(all_ready, timeout=180, interval=1.0, what="every group Ready again")
    await asyncio.sleep(60)
    await asyncio.to_thread(dashboard.plot, prom, board, {"namespace": ns, "name": ".*"},
                            started, time.time(), path,
                            "lws-operator dashboard (panels drawn from a live run's Prometheus)")
