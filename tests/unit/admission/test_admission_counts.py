"""``admission.counts``: the admission process counts without ``prometheus_client``, and the
parent exports its counts (``admission.metrics.child_families``) exactly as ``WebhookMetrics``
exports the same admissions counted in-process."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry, disable_created_metrics, generate_latest
from prometheus_client.registry import Collector

from lws_operator.admission.counts import LATENCY_BUCKETS, WebhookCounts
from lws_operator.admission.metrics import WebhookMetrics, child_families

POD, LWS = "/mutate--v1-pod", "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset"


def admissions(metrics: WebhookMetrics | WebhookCounts) -> None:
    """What ``AdmissionServer`` does to its metrics: series bound per path at start, then
    admissions answered, one in flight, connections accepted, failures counted."""
    for path in (POD, LWS):
        metrics.in_flight.labels(path)
        metrics.latency.labels(path)
        metrics.requests.labels(path, "200")
        for code in (400, 500):
            metrics.failures.labels(path, str(code))
    for seconds in (0.0001, 0.0005, 0.0007, 0.003, 0.02, 0.9, 12.0, *LATENCY_BUCKETS[:-1]):
        metrics.in_flight.labels(POD).inc()
        metrics.latency.labels(POD).observe(seconds)
        metrics.in_flight.labels(POD).dec()
        metrics.requests.labels(POD, "200").inc()
    metrics.in_flight.labels(LWS).inc()
    metrics.latency.labels(LWS).observe(0.002)
    metrics.requests.labels(LWS, "403").inc()
    metrics.failures.labels(LWS, "500").inc()
    metrics.connections.inc()
    metrics.connections.inc()


class Families(Collector):
    def __init__(self, counts: WebhookCounts) -> None:
        self.counts = counts

    def collect(self):  # type: ignore[no-untyped-def]
        return child_families(self.counts.snapshot())


@pytest.mark.parametrize("counted", [False, True])
def test_the_parent_exports_the_childs_counts_as_webhook_metrics_would(counted: bool) -> None:
    disable_created_metrics()  # as both processes do (kube.metrics.new_registry)
    in_process = CollectorRegistry()
    metrics = WebhookMetrics(in_process)
    counts = WebhookCounts()
    if counted:
        admissions(metrics)
        admissions(counts)
    served = CollectorRegistry()
    served.register(Families(counts))
    assert generate_latest(served).decode() == generate_latest(in_process).decode()

