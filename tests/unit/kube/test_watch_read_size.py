"""A watch's connection reads more at once than the process's other TLS connections
(``kube.client.set_read_size``, ``KubeClient.stream(read_size=...)``): asyncio reads a readable
socket once per turn of the loop, so the read size caps how much of a busy watch one turn takes
in. The larger buffer stays with the watch: its connection is closed when the stream ends, not
handed back to the pool, while a stream without ``read_size`` keeps its connection pooled. A
local HTTPS server streams the lines; no API server is involved."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import ssl
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from kubernetes.aio import client

from lws_operator.kube.client import (
    TLS_READ_BUFFER,
    WATCH_READ_BUFFER,
    KubeClient,
    limit_tls_read_buffer,
    set_read_size,
)
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


async def read_all(kube: KubeClient, served: Served, read_size: int | None) -> list[bytes]:
    """Every line of one stream; its end is let come once every line arrived."""
    served.more.clear()
    got: list[bytes] = []
    async with kube.stream("/lines", read_size=read_size) as lines:
        async for line in lines:
            got.append(line)
            if len(got) == LINES:
                served.more.set()
    return got


@pytest.mark.parametrize(("read_size", "new_connections"), [
    (WATCH_READ_BUFFER, 2),  # each watch closes its connection at its end
    (None, 1),  # the second stream reuses the first one's pooled connection
])
async def test_a_resized_stream_reads_every_line_and_keeps_its_connection_out_of_the_pool(
        served: Served, read_size: int | None, new_connections: int) -> None:
    kube = kube_for(served.url)
    try:
        for _ in range(2):
            assert await read_all(kube, served, read_size) == [
                b'{"line": %d}' % i for i in range(LINES)]
    finally:
        await kube.close()
    assert len(set(served.ports)) == new_connections


async def test_set_read_size_changes_that_connection_only(served: Served) -> None:
    url = served.url
    limit_tls_read_buffer()
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    try:
        async with aiohttp.ClientSession() as session, \
                session.get(f"{url}/lines", ssl=context) as watch, \
                session.get(f"{url}/lines", ssl=context) as other:
            assert set_read_size(watch, WATCH_READ_BUFFER)
            protocol = watch.connection.transport._ssl_protocol  # type: ignore[union-attr]
            assert protocol.max_size == WATCH_READ_BUFFER
            untouched = other.connection.transport._ssl_protocol  # type: ignore[union-attr]
            assert untouched.max_size == TLS_READ_BUFFER
            served.more.set()
            await watch.read()
            await other.read()
    finally:
        asyncio.sslproto.SSLProtocol.max_size = 256 * 1024  # asyncio's default again


async def test_set_read_size_leaves_a_plain_connection_alone() -> None:
    async def hello(_: web.Request) -> web.Response:
        return web.Response(text="hi")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        async with aiohttp.ClientSession() as session, \
                session.get(f"http://127.0.0.1:{port}/") as response:
            assert not set_read_size(response, WATCH_READ_BUFFER)
            assert await response.text() == "hi"
    finally:
        await runner.cleanup()


# In a process with glibc's thresholds fixed as ``lws-operator run`` fixes them: allocate a
# buffer of the given size, write the start of it as OpenSSL writes a read's plaintext, free it,
# 200 times; print the page faults taken.
_FAULTS = """
import ctypes, resource, sys
from lws_operator.kube.arenas import trim_freed_memory
trim_freed_memory()
libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.free.argtypes = [ctypes.c_void_p]
size = int(sys.argv[1])
for warm in (True, False):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(200):
        buffer = libc.malloc(size)
        ctypes.memset(buffer, 1, 16 * 1024)
        libc.free(buffer)
print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


def _faults(size: int) -> int:
    out = subprocess.run([sys.executable, "-c", _FAULTS, str(size)], check=True,
                         capture_output=True, text=True).stdout
    return int(out)


@pytest.mark.skipif(not os.confstr("CS_GNU_LIBC_VERSION"), reason="glibc only")
def test_a_watch_read_buffer_comes_from_the_heap_not_a_mapping_of_its_own() -> None:
    """asyncio's TLS layer asks OpenSSL for ``max_size`` bytes of plaintext per call, a new
    buffer each time; above glibc's mmap threshold every one was mapped, faulted in and
    unmapped (the client module's comment). The comparison shows the test can tell: a 256 KiB
    buffer, asyncio's default, takes page faults on every use."""
    assert _faults(256 * 1024) >= 200
    assert _faults(WATCH_READ_BUFFER) < 20
