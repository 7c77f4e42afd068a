"""The HTTPS admission listener and the health endpoint, in-process on loopback (no cluster).

What the API server relies on: TLS with a certificate chaining to the bundle, HTTP/1.1 only, one
route per upstream path, and a certificate swap that neither refuses nor breaks connections.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import ssl
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry

from lws_operator.admission import review
from lws_operator.admission.health import HealthServer
from lws_operator.admission.metrics import WebhookMetrics
from lws_operator.admission.server import AdmissionServer, ServingTLS
from lws_operator.api.constants import MUTATE_POD_PATH, VALIDATE_POD_PATH
from lws_operator.logic.runtime import certs

POLICY = certs.CertPolicy(dns_names=("lws-webhook-service.lws-system.svc",),
                          ip_addresses=("127.0.0.1",))


def issue() -> dict[str, bytes]:
    plan = certs.plan(None, now=dt.datetime.now(dt.UTC), policy=POLICY, bundle_injected=False)
    assert plan.data is not None
    return plan.data


def client_ctx(ca: bytes) -> ssl.SSLContext:
    ctx = ssl.create_default_context(cadata=ca.decode())
    ctx.set_alpn_protocols(["h2", "http/1.1"])
    return ctx


REVIEW = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                     "request": {"uid": "x", "operation": "CREATE",
                                 "object": {"metadata": {"name": "p"}}}})


class Served:
    def __init__(self, server: AdmissionServer, registry: CollectorRegistry,
                 timings: list[tuple[str, float]], first: dict[str, bytes]) -> None:
        self.server = server
        self.registry = registry
        self.timings = timings
        self.first = first

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.port}"


@pytest_asyncio.fixture(loop_scope="session")
async def served() -> AsyncIterator[Served]:
    registry = CollectorRegistry()
    timings: list[tuple[str, float]] = []
    tls = ServingTLS()
    first = issue()
    server = AdmissionServer(tls=tls, handlers=review.handlers(), host="127.0.0.1", port=0,
                             metrics=WebhookMetrics(registry),
                             observer=lambda p, s: timings.append((p, s)))
    with pytest.raises(RuntimeError, match="no serving certificate"):
        await server.start()
    assert tls.load(first["tls.crt"], first["tls.key"])
    assert not tls.load(first["tls.crt"], first["tls.key"])  # same certificate: no reload
    await server.start()
    yield Served(server, registry, timings, first)
    await server.stop()
    assert not server.listening


async def peer_certificate(url: str, ca: bytes) -> tuple[Any, str | None]:
    host, port = url.removeprefix("https://").split(":")
    _, writer = await asyncio.open_connection(host, int(port), ssl=client_ctx(ca))
    ssl_object = writer.get_extra_info("ssl_object")
    cert, alpn = writer.get_extra_info("peercert"), ssl_object.selected_alpn_protocol()
    writer.close()
    await writer.wait_closed()
    return cert, alpn


async def test_serves_reviews_over_http11_only(served: Served) -> None:
    cert, alpn = await peer_certificate(served.url, served.first["ca.crt"])
    assert alpn == "http/1.1"
    assert ("IP Address", "127.0.0.1") in cert["subjectAltName"]
    async with aiohttp.ClientSession() as http, http.post(
            served.url + VALIDATE_POD_PATH, data=REVIEW,
            ssl=client_ctx(served.first["ca.crt"])) as resp:
        assert resp.status == 200
        assert resp.version == aiohttp.HttpVersion11
        body = await resp.json()
    assert body["response"] == {"allowed": True, "uid": "x"}
    assert [p for p, seconds in served.timings if seconds > 0] == [VALIDATE_POD_PATH]
    assert served.registry.get_sample_value(
        "controller_runtime_webhook_requests_total",
        {"webhook": VALIDATE_POD_PATH, "code": "200"}) == 1.0
    assert served.registry.get_sample_value(
        "controller_runtime_webhook_latency_seconds_count", {"webhook": VALIDATE_POD_PATH}) == 1.0
    assert served.registry.get_sample_value(
        "controller_runtime_webhook_requests_in_flight", {"webhook": VALIDATE_POD_PATH}) == 0.0


async def test_unknown_paths_are_404(served: Served) -> None:
    async with aiohttp.ClientSession() as http, http.post(
            served.url + "/mutate-something-else", data=REVIEW,
            ssl=client_ctx(served.first["ca.crt"])) as resp:
        assert resp.status == 404


async def test_certificate_swap_keeps_open_connections_and_serves_new_ones(
        served: Served) -> None:
    second = issue()
    both = served.first["ca.crt"] + second["ca.crt"]
    connector = aiohttp.TCPConnector(ssl=client_ctx(both), limit=1)
    async with aiohttp.ClientSession(connector=connector) as http:
        async with http.post(served.url + MUTATE_POD_PATH, data=REVIEW) as resp:
            assert resp.status == 200
        assert served.server.tls.load(second["tls.crt"], second["tls.key"])
        # The kept-alive connection, made with the old certificate, still works.
        async with http.post(served.url + MUTATE_POD_PATH, data=REVIEW) as resp:
            assert resp.status == 200
    # New connections get the new certificate: only the second CA is needed now.
    cert, _ = await peer_certificate(served.url, second["ca.crt"])
    assert cert is not None
    with pytest.raises(ssl.SSLCertVerificationError):
        await peer_certificate(served.url, served.first["ca.crt"])
    served.server.tls.load(served.first["tls.crt"], served.first["tls.key"])


async def test_health_endpoints_follow_their_checks() -> None:
    registry = CollectorRegistry()
    WebhookMetrics(registry)
    health = HealthServer("127.0.0.1", 0, registry)
    ready = {"certs": False}
    health.add_readiness_check("webhook-certificates", lambda: ready["certs"])
    await health.start()
    base = f"http://127.0.0.1:{health.port}"
    try:
        async with aiohttp.ClientSession() as http:
            async with http.get(base + "/healthz") as resp:
                assert resp.status == 200
            async with http.get(base + "/readyz") as resp:
                assert resp.status == 503
                assert "webhook-certificates" in await resp.text()
            ready["certs"] = True
            async with http.get(base + "/readyz") as resp:
                assert resp.status == 200
            async with http.get(base + "/metrics") as resp:
                assert "controller_runtime_webhook_requests_in_flight" in await resp.text()
    finally:
        await health.stop()


async def test_a_port_in_use_is_found_at_reserve_and_start_uses_the_reserved_port() -> None:
    """The webhook port is bound at startup, before any certificate exists: a port in use is
    a ``ListenError`` then, naming address and reason, and once the certificate is loaded the
    server listens on exactly the socket it reserved."""
    import socket

    from lws_operator.admission.listener import ListenError

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    taken = AdmissionServer(tls=ServingTLS(), handlers=review.handlers(), host="127.0.0.1",
                            port=port)
    try:
        with pytest.raises(ListenError) as exc:
            taken.reserve()
        assert str(exc.value) == f"cannot listen on 127.0.0.1:{port}: address already in use"
        assert exc.value.port == port
        health = HealthServer("127.0.0.1", port)
        with pytest.raises(ListenError, match="address already in use"):
            await health.start()
    finally:
        busy.close()

    first = issue()
    tls = ServingTLS()
    server = AdmissionServer(tls=tls, handlers=review.handlers(), host="127.0.0.1", port=0)
    server.reserve()
    reserved = server.port
    assert reserved != 0
    assert not server.listening
    with pytest.raises(ConnectionRefusedError):  # bound, not listening: as if closed
        await asyncio.open_connection("127.0.0.1", reserved)
    tls.load(first["tls.crt"], first["tls.key"])
    await server.start()
    try:
        assert server.port == reserved
        cert, _ = await peer_certificate(f"https://127.0.0.1:{reserved}", first["ca.crt"])
        assert cert is not None
    finally:
        await server.stop()
    # Stopping closed the socket: the port can be bound again.
    again = socket.socket()
    again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    again.bind(("127.0.0.1", reserved))
    again.close()
