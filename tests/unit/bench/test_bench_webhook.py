"""The webhook-at-rate run's connection figures (``e2e.bench.webhook_latency.connections``):
pure arithmetic on a scrape delta, no cluster."""

from __future__ import annotations

from e2e.bench import figures
from e2e.bench.webhook_latency import connections

BEFORE = """\
controller_runtime_webhook_requests_total{webhook="/mutate--v1-pod",code="200"} 10
controller_runtime_webhook_requests_total{webhook="/validate--v1-pod",code="200"} 10
lws_operator_webhook_connections_accepted_total 3
"""
AFTER = """\
controller_runtime_webhook_requests_total{webhook="/mutate--v1-pod",code="200"} 210
controller_runtime_webhook_requests_total{webhook="/validate--v1-pod",code="200"} 210
controller_runtime_webhook_requests_total{webhook="/validate--v1-pod",code="500"} 1
lws_operator_webhook_connections_accepted_total 44
"""


def test_connections_per_admission_counts_every_path_over_the_window() -> None:
    window = figures.delta(figures.parse(AFTER), figures.parse(BEFORE))
    assert connections(window, 0.802) == {
        "accepted": 41, "admissions": 401, "per_admission": 0.102,
        "child_cpu_ms_per_admission": 2.0}


def test_no_admissions_gives_no_ratio() -> None:
    assert connections({}, 0.0) == {"accepted": 0, "admissions": 0, "per_admission": None,
                                    "child_cpu_ms_per_admission": None}
