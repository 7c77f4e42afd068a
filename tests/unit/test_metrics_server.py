"""The metrics server without a cluster: addresses, plain HTTP, TLS, and refusals that need no
API call. Token and access reviews (and their cache) against a real API server:
e2e/metrics/test_prometheus.py."""

from __future__ import annotations

import ssl
from typing import Any

import aiohttp
import pytest
from prometheus_client import CollectorRegistry, Counter

from lws_operator.admission.metrics_server import (
    MetricsServer,
    MetricsServerOptions,
    metrics_server,
    parse_bind_address,
)


@pytest.mark.parametrize(("text", "expected"), [
    (":8443", ("0.0.0.0", 8443)),
    ("127.0.0.1:8080", ("127.0.0.1", 8080)),
    ("[::1]:9000", ("::1", 9000)),
    ("0", None),
])
def test_bind_addresses(text: str, expected: tuple[str, int] | None) -> None:
    assert parse_bind_address(text) == expected


@pytest.mark.parametrize("text", ["8443", "host:", "host:port", ""])
def test_bad_bind_addresses(text: str) -> None:
    with pytest.raises(ValueError, match="not a bind address"):
        parse_bind_address(text)


def test_zero_serves_no_metrics() -> None:
    assert metrics_server(CollectorRegistry(), None, "0", secure=True) is None


def test_secure_needs_an_api_client() -> None:
    with pytest.raises(ValueError, match="API client"):
        metrics_server(CollectorRegistry(), None, "127.0.0.1:0", secure=True)


def registry_with_a_counter() -> CollectorRegistry:
    registry = CollectorRegistry()
    Counter("demo_events_total", "Events", registry=registry).inc(3)
    return registry


async def test_plain_http_serves_the_registry() -> None:
    server = MetricsServer(registry_with_a_counter(),
                           MetricsServerOptions("127.0.0.1", 0, secure=False))
    await server.start()
    try:
        async with aiohttp.ClientSession() as http, \
                http.get(f"http://127.0.0.1:{server.port}/metrics") as resp:
            assert resp.status == 200
            assert "demo_events_total 3.0" in await resp.text()
    finally:
        await server.stop()


class _NoApi:
    """Stands where the API client would: any review attempt fails the test."""

    async def request(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise AssertionError("no access review is needed to refuse a scrape without a token")


async def test_https_with_a_self_signed_certificate_refuses_scrapes_without_a_token() -> None:
    server = MetricsServer(registry_with_a_counter(),
                           MetricsServerOptions("127.0.0.1", 0, secure=True),
                           kube=_NoApi())  # type: ignore[arg-type]
    await server.start()
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        async with aiohttp.ClientSession() as http:
            for headers in ({}, {"Authorization": "Basic dXNlcjpwdw=="},
                            {"Authorization": "Bearer "}):
                async with http.get(f"https://127.0.0.1:{server.port}/metrics",
                                    headers=headers, ssl=context) as resp:
                    assert resp.status == 401
                    assert "demo_events_total" not in await resp.text()
    finally:
        await server.stop()
