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
)


def test_zero_serves_no_metrics() -> None:
    assert metrics_server(CollectorRegistry(), None, None, secure=True) is None


def test_secure_needs_an_api_client() -> None:
    with pytest.raises(ValueError, match="API client"):
        metrics_server(CollectorRegistry(), None, ("127.0.0.1", 0), secure=True)


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


def write_pair(directory: Any, common_name: str) -> None:
    import datetime as dt

    from lws_operator.logic.runtime import certs

    now = dt.datetime.now(dt.UTC)
    ca, ca_key = certs.new_ca(now, dt.timedelta(days=1))
    cert, key = certs.new_serving_cert(ca, ca_key, now, dt.timedelta(days=1),
                                       dns_names=[common_name], ip_addresses=["127.0.0.1"])
    data = certs.encode(certs.CertState(cas=(ca,), ca_key=ca_key, cert=cert, key=key))
    (directory / "tls.key").write_bytes(data[certs.TLS_KEY_KEY])
    (directory / "tls.crt").write_bytes(data[certs.TLS_CERT_KEY])


async def served_name(port: int) -> str:
    import asyncio

    from cryptography import x509

    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    cert = x509.load_der_x509_certificate(der)
    return str(cert.subject.get_attributes_for_oid(x509.NameOID.COMMON_NAME)[0].value)


async def test_a_given_certificate_is_served_and_reloaded_when_renewed(tmp_path: Any) -> None:
    import asyncio

    write_pair(tmp_path, "first.example")
    server = MetricsServer(registry_with_a_counter(), MetricsServerOptions(
        "127.0.0.1", 0, secure=True, cert_dir=str(tmp_path), cert_reload_interval=0.05),
        kube=_NoApi())  # type: ignore[arg-type]
    await server.start()
    try:
        assert await served_name(server.port) == "first.example"
        write_pair(tmp_path, "second.example")

        for _ in range(200):  # new connections get the new certificate within moments
            if await served_name(server.port) == "second.example":
                break
            await asyncio.sleep(0.05)
        assert await served_name(server.port) == "second.example"
    finally:
        await server.stop()


def test_run_rejects_a_bad_metrics_secure_value(capsys: pytest.CaptureFixture[str]) -> None:
    from lws_operator.__main__ import main

    with pytest.raises(SystemExit) as exc:
        main(["run", "--metrics-secure=maybe"])
    assert exc.value.code == 2
    assert "not a boolean" in capsys.readouterr().err
