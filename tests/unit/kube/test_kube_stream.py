"""``KubeClient.stream``, a watch's GET: every line arrives as it is written, and the
connection goes back to the client's pool when the answer ends, for the next request to reuse.
A local HTTPS server streams the lines; no API server is involved."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web
from kubernetes.aio import client

from lws_operator.kube.client import KubeClient
from lws_operator.logic.runtime import certs

LINES = 3


def server_context(directory: Path) -> ssl.SSLContext:
    now = dt.datetime.now(dt.UTC)
    ca, ca_key = certs.new_ca(now, dt.timedelta(days=1))
    cert, key = certs.new_serving_cert(ca, ca_key, now, dt.timedelta(days=1),
                                       "localhost", ["127.0.0.1"])
    data = certs.encode(certs.CertState(cas=(ca,), ca_key=ca_key, cert=cert, key=key))
    (directory / "tls.key").write_bytes(data[certs.TLS_KEY_KEY])
    (directory / "tls.crt").write_bytes(data[certs.TLS_CERT_KEY])
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    return context


class Served:
    """The server's URL, the client ports it saw, and ``more``: set to let each answer end
    (until then the stream stays open, as a watch's does)."""

    def __init__(self, url: str, ports: list[int], more: asyncio.Event) -> None:
        self.url = url
        self.ports = ports
        self.more = more


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """An HTTPS server streaming a few lines, ending each answer once ``more`` is set."""
    ports: list[int] = []
    more = asyncio.Event()

    async def lines(request: web.Request) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peername") if request.transport else None
        ports.append(peer[1] if peer else 0)
        response = web.StreamResponse()
        await response.prepare(request)
        for i in range(LINES):
            await response.write(b'{"line": %d}\n' % i)
        await more.wait()
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/lines", lines)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context(tmp_path))
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield Served(f"https://127.0.0.1:{port}", ports, more)
    finally:
        await runner.cleanup()


def kube_for(url: str) -> KubeClient:
    conf = client.Configuration(host=url)
    conf.verify_ssl = False
    return KubeClient(client.ApiClient(configuration=conf))


async def read_all(kube: KubeClient, served: Served) -> list[bytes]:
    """Every line of one stream; its end is let come once every line arrived."""
    served.more.clear()
    got: list[bytes] = []
    async with kube.stream("/lines") as lines:
        async for line in lines:
            got.append(line)
            if len(got) == LINES:
                served.more.set()
    return got


async def test_a_stream_reads_every_line_and_hands_its_connection_back(
        served: Served) -> None:
    kube = kube_for(served.url)
    try:
        for _ in range(2):
            assert await read_all(kube, served) == [b'{"line": %d}' % i for i in range(LINES)]
    finally:
        await kube.close()
    assert len(set(served.ports)) == 1  # the second stream reused the first one's connection
