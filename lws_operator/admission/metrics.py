"""Webhook metrics under controller-runtime's names, so dashboards built for the Go controller
keep working (controller-runtime's metrics package).

They are created on a registry the caller owns: the process has one registry for everything it
exports, and tests get a fresh one each.
"""

from __future__ import annotations

from prometheus_client.metrics import Counter, Gauge, Histogram
from prometheus_client.registry import CollectorRegistry

# controller-runtime's buckets (Prometheus' defaults) and three below 5 ms, where admissions
# are answered: without them every answer falls in one bucket and a p99 says nothing.
LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, *Histogram.DEFAULT_BUCKETS)


class WebhookMetrics:
    """``controller_runtime_webhook_{requests_total,latency_seconds,requests_in_flight}``, and
    ours: ``lws_operator_webhook_connections_accepted_total`` (no labels), the TCP connections
    the webhook server accepted. Each costs a TLS handshake (about a millisecond of the
    admission process's CPU here), so connections per admission, near 0 when the API server
    reuses its connections, tells whether it does."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "controller_runtime_webhook_requests_total",
            "Total number of admission requests by HTTP status code.",
            ["webhook", "code"], registry=registry)
        self.latency = Histogram(
            "controller_runtime_webhook_latency_seconds",
            "Histogram of the latency of processing admission requests",
            ["webhook"], registry=registry, buckets=LATENCY_BUCKETS)
        self.in_flight = Gauge(
            "controller_runtime_webhook_requests_in_flight",
            "Current number of admission requests being served.",
            ["webhook"], registry=registry)
        self.connections = Counter(
            "lws_operator_webhook_connections_accepted_total",
            "TCP connections accepted by the admission webhook server (each one a TLS "
            "handshake).", registry=registry)
