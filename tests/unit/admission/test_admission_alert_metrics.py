"""The admission side's series the on-call alerts read: the served webhook certificate's
notAfter, and each readiness check of ``/readyz`` (what puts a replica in the webhook
Service's endpoints)."""

from __future__ import annotations

import datetime as dt

from prometheus_client import CollectorRegistry

from lws_operator.admission.metrics import CertificateMetrics, ReadinessCollector
from lws_operator.logic.runtime import certs

NOW = dt.datetime(2026, 3, 1, tzinfo=dt.UTC)
EXPIRY = "lws_operator_webhook_certificate_expiry_timestamp_seconds"


def _serving_pem(validity: dt.timedelta) -> bytes:
    ca, ca_key = certs.new_ca(NOW, dt.timedelta(days=3650))
    cert, _ = certs.new_serving_cert(ca, ca_key, NOW, validity, ["lws.example"], [])
    from cryptography.hazmat.primitives import serialization

    leaf = cert.public_bytes(serialization.Encoding.PEM)
    return leaf + ca.public_bytes(serialization.Encoding.PEM)  # a chain: the leaf first


def test_the_expiry_is_the_served_leafs_not_after() -> None:
    registry = CollectorRegistry()
    metrics = CertificateMetrics(registry)
    assert registry.get_sample_value(EXPIRY) is None  # nothing served yet: no series
    metrics.served(_serving_pem(dt.timedelta(days=2)))
    assert registry.get_sample_value(EXPIRY) == (NOW + dt.timedelta(days=2)).timestamp()
    metrics.served(_serving_pem(dt.timedelta(days=90)))  # a renewal moves it
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
