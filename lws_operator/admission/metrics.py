"""Webhook metrics under controller-runtime's names, so dashboards built for the Go controller
keep working (controller-runtime's metrics package).

They are created on a registry the caller owns: the process has one registry for everything it
exports, and tests get a fresh one each.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.metrics import Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry
from prometheus_client.utils import floatToGoString

from lws_operator.admission.counts import FAILURE_CODES, LATENCY_BUCKETS, Snapshot

__all__ = ["FAILURE_CODES", "LATENCY_BUCKETS", "CertificateMetrics", "ReadinessCollector",
           "WebhookMetrics", "child_families"]

# Name and help of each webhook metric, shared by ``WebhookMetrics`` and ``child_families``.
REQUESTS = ("controller_runtime_webhook_requests_total",
            "Total number of admission requests by HTTP status code.")
LATENCY = ("controller_runtime_webhook_latency_seconds",
           "Histogram of the latency of processing admission requests")
IN_FLIGHT = ("controller_runtime_webhook_requests_in_flight",
             "Current number of admission requests being served.")
CONNECTIONS = ("lws_operator_webhook_connections_accepted_total",
               "TCP connections accepted by the admission webhook server (each one a TLS "
               "handshake).")
FAILURES = ("lws_operator_webhook_failures_total",
            "Admission requests answered with a failure (400: unreadable, 500: the webhook "
            "raised), by webhook path and code.")


class WebhookMetrics:
    """``controller_runtime_webhook_{requests_total,latency_seconds,requests_in_flight}``, and
    ours: ``lws_operator_webhook_connections_accepted_total`` (no labels), the TCP connections
    the webhook server accepted. Each costs a TLS handshake (about a millisecond of the
    admission process's CPU here), so connections per admission, near 0 when the API server
    reuses its connections, tells whether it does. And
    ``lws_operator_webhook_failures_total{webhook,code}``: admissions that failed
    (``FAILURE_CODES``). Their HTTP status is 200 like every answer's, so
    ``controller_runtime_webhook_requests_total`` cannot tell them; with ``failurePolicy:
    Fail`` each one refused a LeaderWorkerSet write or pod."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(*REQUESTS, ["webhook", "code"], registry=registry)
        self.latency = Histogram(*LATENCY, ["webhook"], registry=registry,
                                 buckets=LATENCY_BUCKETS)
        self.in_flight = Gauge(*IN_FLIGHT, ["webhook"], registry=registry)
        self.connections = Counter(*CONNECTIONS, registry=registry)
        self.failures = Counter(*FAILURES, ["webhook", "code"], registry=registry)


def child_families(snapshot: Snapshot) -> list[Metric]:
    """The families ``WebhookMetrics`` would export for the admission process's counts
    (``admission.counts.WebhookCounts.snapshot``), in the same order: the parent serves them."""
    requests = CounterMetricFamily(*REQUESTS, labels=["webhook", "code"])
    for key, value in snapshot["requests"]:
        requests.add_metric(key, value)
    latency = HistogramMetricFamily(*LATENCY, labels=["webhook"])
    bounds = [floatToGoString(b) for b in LATENCY_BUCKETS]
    for key, counts, total in snapshot["latency"]:
        cumulative, running = [], 0.0
        for bound, count in zip(bounds, counts, strict=True):
            running += count
            cumulative.append((bound, running))
        latency.add_metric(key, cumulative, total)
    in_flight = GaugeMetricFamily(*IN_FLIGHT, labels=["webhook"])
    for key, value in snapshot["in_flight"]:
        in_flight.add_metric(key, value)
    connections = CounterMetricFamily(*CONNECTIONS, value=snapshot["connections"])
    failures = CounterMetricFamily(*FAILURES, labels=["webhook", "code"])
    for key, value in snapshot["failures"]:
        failures.add_metric(key, value)
    return [requests, latency, in_flight, connections, failures]


class CertificateMetrics(Collector):
    """``lws_operator_webhook_certificate_expiry_timestamp_seconds`` (no labels): the notAfter
    of the webhook serving certificate this process serves now, as Unix seconds. Set wherever
    the certificate comes from (issued and rotated by the operator, or written by cert-manager
    into the Secret), so one alert covers both: a rotation or a renewal that stopped shows as
    the value coming close to ``time()``. Absent until a certificate is served (a 0 would read
    as a certificate long expired)."""

    NAME = "lws_operator_webhook_certificate_expiry_timestamp_seconds"

    def __init__(self, registry: CollectorRegistry) -> None:
        self.not_after: float | None = None
        registry.register(self)

    def served(self, not_after: float) -> None:
        """Record the notAfter of the leaf certificate served now (read out of process,
        ``kube.cert_planner.not_after``: neither process imports ``cryptography``)."""
        self.not_after = not_after

    def collect(self) -> Iterator[GaugeMetricFamily]:
        if self.not_after is not None:
            yield GaugeMetricFamily(
                self.NAME, "The notAfter of the webhook serving certificate served now, in "
                "Unix seconds.", value=self.not_after)

    def describe(self) -> Iterator[GaugeMetricFamily]:
        return iter(())  # registered before a value exists: nothing to check for clashes


class ReadinessCollector(Collector):
    """``lws_operator_readiness_check{check}``: 1 while the readiness check passes, else 0,
    one series per check of ``/readyz``, evaluated at each scrape. A replica is in the webhook
    Service's endpoints only while every check passes, so "no scraped replica has all checks
    at 1" is "the webhook Service has no endpoints", which the operator's own metrics can tell
    without kube-state-metrics (and which, with ``failurePolicy: Fail``, blocks every pod of a
    LeaderWorkerSet)."""

    def __init__(self, checks: Callable[[], Mapping[str, Callable[[], bool]]]) -> None:
        self.checks = checks

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "lws_operator_readiness_check",
            "1 while the readiness check passes (the replica is ready when all do), else 0.",
            labels=["check"])
        for name, check in self.checks().items():
            try:
                ok = bool(check())
            except Exception:  # a failing check is not ready, as /readyz answers it
                ok = False
            family.add_metric([name], 1.0 if ok else 0.0)
        yield family
