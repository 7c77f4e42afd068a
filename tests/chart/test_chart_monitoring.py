"""The chart's optional Grafana dashboard ConfigMap and PrometheusRule, without a cluster: off
by default, their values, and every series they query being one the operator exports.
``e2e/metrics/test_dashboard.py`` runs the same rendered queries and rules in a real
Prometheus."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from e2e.harness.chart import CHART, helm, objects, render
from lws_operator.admission.metrics import (
    CertificateMetrics,
    ReadinessCollector,
    WebhookMetrics,
)
from lws_operator.kube.disaggregated_metrics import DisaggregatedSetMetrics
from lws_operator.kube.group_metrics import GroupMetrics
from lws_operator.kube.metrics import (
    ClientMetrics,
    LeaderElectionMetrics,
    ReconcileMetrics,
    WatchMetrics,
    WorkqueueMetrics,
)

DASHBOARD_FILE = CHART / "dashboards" / "lws-operator.json"
ALERTS = {"rolloutStalled": "LeaderWorkerSetRolloutStalled",
          "progressDeadlineExceeded": "LeaderWorkerSetProgressDeadlineExceeded",
          "restartBudgetExhausted": "LeaderWorkerSetRestartBudgetExhausted",
          "groupNotReady": "LeaderWorkerSetGroupNotReady",
          "webhookSlow": "LeaderWorkerSetWebhookSlow",
          "reconcileErrors": "LeaderWorkerSetReconcileErrors",
          "operatorDown": "LeaderWorkerSetOperatorDown",
          "noLeader": "LeaderWorkerSetOperatorNoLeader",
          "podWebhookUnavailable": "LeaderWorkerSetPodWebhookUnavailable",
          "webhookFailing": "LeaderWorkerSetWebhookFailing",
          "webhookCertificateExpiry": "LeaderWorkerSetWebhookCertificateExpiry",
          "drainBlocked": "LeaderWorkerSetDrainBlocked",
          "disaggregatedSetNotProgressing": "DisaggregatedSetNotProgressing"}
# Words of PromQL that are not series names.
PROMQL = {"sum", "by", "max", "min", "count", "rate", "increase", "histogram_quantile", "bool",
          "le", "and", "or", "unless", "without", "on", "label_values", "absent", "time",
          "changes"}
# Prometheus' own series (the scrape's health), which the alerts on the operator itself read.
PROMETHEUS_SERIES = {"up"}


def dashboard_map(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "ConfigMap" and o["metadata"]["name"].endswith(
        "-dashboard")]


def exported_series() -> set[str]:
    """Every series name the operator's metric families can produce."""
    registry = CollectorRegistry()
    for family in (ClientMetrics, WorkqueueMetrics, ReconcileMetrics, LeaderElectionMetrics,
                   WatchMetrics, GroupMetrics, DisaggregatedSetMetrics):
        family.for_registry(registry)
    WebhookMetrics(registry)
    CertificateMetrics(registry).not_after = 0.0
    registry.register(ReadinessCollector(lambda: {"webhooks-serve": lambda: True}))
    names: set[str] = set()
    for metric in registry.collect():
        suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"],
                    "gauge": [""]}[metric.type]
        names.update(metric.name + suffix for suffix in suffixes)
    return names


def series_in(expr: str) -> set[str]:
    """The series names an expression reads: identifiers outside braces and brackets, less
    PromQL's own words, label names of ``by (...)`` and ``on (...)`` and ``offset`` durations."""
    bare = re.sub(r"\{[^}]*\}|\[[^]]*\]|\"[^\"]*\"|(by|on) \([^)]*\)|offset \w+", " ", expr)
    return {w for w in re.findall(r"[a-zA-Z_][a-zA-Z0-9_]*", bare)
            if w not in PROMQL and not w.startswith("__")} - {"e"}


def rule_of(values: dict[str, Any] | None = None, namespace: str = "lws-system"
            ) -> dict[str, Any]:
    objs = objects(render(namespace=namespace, values={"prometheusRule": {"enabled": True},
                                                       **(values or {})}))
    [rule] = [o for o in objs if o["kind"] == "PrometheusRule"]
    return rule


def alerts_of(rule: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}


def test_both_are_off_by_default() -> None:
    objs = objects(render())
    assert not dashboard_map(objs)
    assert not [o for o in objs if o["kind"] == "PrometheusRule"]


def test_the_dashboard_configmap_carries_the_file_for_the_sidecar() -> None:
    [default] = dashboard_map(objects(render(values={"dashboard": {"enabled": True}})))
    assert default["metadata"]["namespace"] == "lws-system"
    assert default["metadata"]["labels"]["grafana_dashboard"] == "1"
    assert "annotations" not in default["metadata"]
    assert default["data"] == {"lws-operator.json": DASHBOARD_FILE.read_text().rstrip("\n")}

    [custom] = dashboard_map(objects(render(values={"dashboard": {
        "enabled": True, "namespace": "monitoring",
        "labels": {"grafana_dashboard": None, "dashboards": "lws"},
        "annotations": {"grafana_folder": "LeaderWorkerSet"}}})))
    assert custom["metadata"]["namespace"] == "monitoring"
    assert "grafana_dashboard" not in custom["metadata"]["labels"]
    assert custom["metadata"]["labels"]["dashboards"] == "lws"
    assert custom["metadata"]["annotations"] == {"grafana_folder": "LeaderWorkerSet"}


def test_the_dashboard_queries_the_operators_series_through_its_variables() -> None:
    board = json.loads(DASHBOARD_FILE.read_text())
    variables = {v["name"]: v for v in board["templating"]["list"]}
    assert set(variables) == {"datasource", "namespace", "name"}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    exported = exported_series()
    panels = [p for p in board["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in board["panels"]}) == len(board["panels"])
    titles = " ".join(p["title"] for p in panels)
    for topic in ("Groups by state", "time to Ready", "recreations", "Restart budget",
                  "Rollout progress", "stalled", "Reconcile latency", "Reconcile errors",
                  "Webhook latency", "API requests", "Groups disrupted", "Evictions",
                  "Progress deadline", "rollbacks"):
        assert topic in titles, topic
    queried = set().union(*(series_in(t["expr"]) for p in panels for t in p["targets"]))
    # The group disruption budget's and the progress deadline's series.
    assert {"lws_disrupted_groups", "lws_evictions_total", "lws_rollout_deadline_exceeded",
            "lws_rollout_rollbacks_total"} <= queried
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["gridPos"]["x"] >= 0
        assert panel["gridPos"]["x"] + panel["gridPos"]["w"] <= 24  # Grafana's 24 columns
        for target in panel["targets"]:
            expr = target["expr"]
            assert target["datasource"]["uid"] == "${datasource}"
            names = series_in(expr)
            assert names, expr
            assert names <= exported, f"{panel['title']}: {names - exported} not exported"
            # The LeaderWorkerSet series follow the namespace and name variables.
            for _, selector in re.findall(r"\b(lws_(?!operator_)\w+)(\{[^}]*\})?", expr):
                assert 'namespace=~"$namespace"' in selector, expr
                assert 'name=~"$name"' in selector, expr


def test_the_rules_follow_their_values() -> None:
    rule = rule_of({"prometheusRule": {
        "enabled": True, "namespace": "monitoring", "labels": {"release": "prom"},
        "alertLabels": {"team": "ml"},
        "alerts": {"rolloutStalled": {"for": "7m", "severity": "critical"},
                   "webhookSlow": {"latencySeconds": 2.5, "window": "3m"},
                   "reconcileErrors": {"ratio": 0.25, "window": "20m"}}}})
    assert rule["metadata"]["namespace"] == "monitoring"
    assert rule["metadata"]["labels"]["release"] == "prom"
    alerts = alerts_of(rule)
    assert set(alerts) == set(ALERTS.values())
    stalled = alerts[ALERTS["rolloutStalled"]]
    assert stalled["for"] == "7m"
    assert stalled["labels"] == {"severity": "critical", "team": "ml"}
    assert alerts[ALERTS["groupNotReady"]]["for"] == "15m"
    assert alerts[ALERTS["webhookSlow"]]["expr"].endswith("[3m]))) > 2.5")
    assert alerts[ALERTS["reconcileErrors"]]["expr"].endswith("[20m])) > 0.25")
    exported = exported_series() | PROMETHEUS_SERIES
    for alert in alerts.values():
        assert set(alert["annotations"]) == {"summary", "description"}
        assert series_in(alert["expr"]) <= exported, alert["expr"]


def test_the_alerts_on_the_operator_select_its_job_and_lease() -> None:
    job = "lws-operator-controller-manager-metrics-service"
    alerts = alerts_of(rule_of({"leaderElection": {"leaseName": "mine.example"}}))
    for name in ("operatorDown", "noLeader", "podWebhookUnavailable",
                 "webhookCertificateExpiry"):
        assert f'{{job="{job}"' in alerts[ALERTS[name]]["expr"], name
    assert 'name="mine.example"' in alerts[ALERTS["noLeader"]]["expr"]
    assert alerts[ALERTS["webhookCertificateExpiry"]]["expr"].endswith("< 604800")
    custom = alerts_of(rule_of({"prometheusRule": {"enabled": True, "job": "lws", "alerts": {
        "webhookCertificateExpiry": {"days": 14}, "drainBlocked": {"window": "2m"},
        "disaggregatedSetNotProgressing": {"window": "30m", "for": "1m"}}}}))
    assert 'up{job="lws"}' in custom[ALERTS["operatorDown"]]["expr"]
    assert custom[ALERTS["webhookCertificateExpiry"]]["expr"].endswith("< 1209600")
    assert "[2m]" in custom[ALERTS["drainBlocked"]]["expr"]
    ds = custom[ALERTS["disaggregatedSetNotProgressing"]]
    assert "[30m]" in ds["expr"]
    assert ds["for"] == "1m"


@pytest.mark.parametrize("key", sorted(ALERTS))
def test_each_alert_can_be_switched_off(key: str) -> None:
    alerts = alerts_of(rule_of({"prometheusRule": {"enabled": True, "alerts": {
        key: {"enabled": False}}}}))
    assert set(alerts) == set(ALERTS.values()) - {ALERTS[key]}


@pytest.mark.parametrize(("setting", "message"), [
    ("prometheusRule.alerts.groupNotReady.for=15 minutes", "does not match"),
    ("prometheusRule.alerts.reconcileErrors.ratio=2", "maximum"),
    ("prometheusRule.alerts.unknownAlert.for=1m", "additional properties 'unknownAlert'"),
    ("dashboard.enable=true", "additional properties 'enable' not allowed"),
])
def test_values_schema_refuses_monitoring_mistakes(setting: str, message: str) -> None:
    done = helm("template", "x", str(CHART), "--set", setting, check=False)
    assert done.returncode != 0
    assert message in done.stderr


def test_the_service_monitor_keeps_the_series_own_namespace() -> None:
    """The alerts and the dashboard group the lws_* series by their LeaderWorkerSet's
    namespace: the scrape must not replace it with the target's (the operator's)."""
    objs = objects(render(values={"metrics": {"serviceMonitor": {"enabled": True}}}))
    [monitor] = [o for o in objs if o["kind"] == "ServiceMonitor"]
    assert [e.get("honorLabels") for e in monitor["spec"]["endpoints"]] == [True]


def test_without_metrics_the_alerts_on_absent_targets_are_not_rendered() -> None:
    """They would fire for good: nothing is scraped."""
    alerts = alerts_of(rule_of({"metrics": {"enabled": False}}))
    assert set(alerts) == set(ALERTS.values()) - {ALERTS["operatorDown"],
                                                   ALERTS["podWebhookUnavailable"]}
