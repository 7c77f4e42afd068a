"""The admission side's series the on-call alerts read: the served webhook certificate's
notAfter, and each readiness check of ``/readyz`` (what puts a replica in the webhook
Service's endpoints)."""

from __future__ import annotations

import datetime as dt

from prometheus_client import CollectorRegistry

from lws_operator.admission.metrics import CertificateMetrics, ReadinessCollector
from lws_operator.kube.cert_planner import not_after
from lws_operator.logic.runtime import certs

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
EXPIRY = "lws_operator_webhook_certificate_expiry_timestamp_seconds"


def _serving_pem(validity: dt.timedelta) -> bytes:
    ca, ca_key = certs.new_ca(NOW, dt.timedelta(days=3650))
    cert, _ = certs.new_serving_cert(ca, ca_key, NOW, validity, ["lws.example"], [])
    from cryptography.hazmat.primitives import serialization

    leaf = cert.public_bytes(serialization.Encoding.PEM)
    return leaf + ca.public_bytes(serialization.Encoding.PEM)  # a chain: the leaf first


async def test_the_expiry_is_the_served_leafs_not_after() -> None:
    """Read out of process (``kube.cert_planner.not_after``), the leaf's, not the CA's."""
    registry = CollectorRegistry()
    metrics = CertificateMetrics(registry)
    assert registry.get_sample_value(EXPIRY) is None  # nothing served yet: no series
    metrics.served(await not_after(_serving_pem(dt.timedelta(days=2))))
    assert registry.get_sample_value(EXPIRY) == (NOW + dt.timedelta(days=2)).timestamp()
    metrics.served(await not_after(_serving_pem(dt.timedelta(days=90))))  # a renewal moves it
    assert registry.get_sample_value(EXPIRY) == (NOW + dt.timedelta(days=90)).timestamp()


def test_each_readiness_check_is_a_series_evaluated_at_each_scrape() -> None:
    registry = CollectorRegistry()
    state = {"synced": False}

    def broken() -> bool:
        raise RuntimeError("a check that raises")

    checks = {"caches-synced": lambda: state["synced"], "webhooks-serve": lambda: True}
    registry.register(ReadinessCollector(lambda: checks))

    def value(check: str) -> float | None:
        return registry.get_sample_value("lws_operator_readiness_check", {"check": check})

    assert (value("caches-synced"), value("webhooks-serve")) == (0, 1)
    state["synced"] = True
    checks["api"] = broken  # a check added after registration shows too
    assert (value("caches-synced"), value("webhooks-serve"), value("api")) == (1, 1, 0)


async def test_failed_admissions_are_counted_by_path_and_code_refusals_are_not() -> None:
    """400 (unreadable) and 500 (the handler raised) are failures; a refusal by policy (403, or
    the eviction budget's 429) is an answer."""
    import json
    from typing import Any

    from lws_operator.admission.metrics import WebhookMetrics
    from lws_operator.admission.review import allowed, denied, forbidden
    from lws_operator.admission.server import AdmissionServer, ServingTLS

    def crash(request: Any) -> dict[str, Any]:
        raise RuntimeError("a bug")

    async def budget(request: Any) -> dict[str, Any]:
        return denied(429, "the group budget", "TooManyRequests")

    registry = CollectorRegistry()
    server = AdmissionServer(tls=ServingTLS(), host="127.0.0.1", port=0,
                             metrics=WebhookMetrics(registry), handlers={
                                 "/crash": crash, "/refuse": lambda r: forbidden("no"),
                                 "/allow": lambda r: allowed(), "/evict": budget})

    def failures(path: str, code: str) -> float | None:
        return registry.get_sample_value("lws_operator_webhook_failures_total",
                                         {"webhook": path, "code": code})

    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "u", "operation": "CREATE"}}).encode()
    assert failures("/crash", "500") == 0  # every path's series exists from the start
    for path in ("/crash", "/refuse", "/allow"):
        server.routes[path](body)
    await server.routes["/evict"](body)  # type: ignore[misc]
    server.routes["/allow"](b"not json")
    assert (failures("/crash", "500"), failures("/crash", "400")) == (1, 0)
    assert (failures("/allow", "400"), failures("/allow", "500")) == (1, 0)
    assert failures("/refuse", "500") == failures("/refuse", "400") == 0
    assert failures("/evict", "500") == failures("/evict", "400") == 0
