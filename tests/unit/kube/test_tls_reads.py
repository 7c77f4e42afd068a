"""TLS plaintext read one record at a time (``kube.tls_reads``): the reads ask for no more than
a record, lose nothing, and uvloop's TLS layer, which the operator and the admission process run
on, does use the class every TLS context of ours names. No cluster."""

from __future__ import annotations

import asyncio
import contextlib
import ssl

import uvloop
from kubernetes.aio import client

from e2e.harness.admission import serving_keypair
from lws_operator.admission.server import ServingTLS
from lws_operator.kube.client import KubeClient
from lws_operator.kube.tls_reads import RECORD, RecordReads, read_records

PAYLOAD = bytes(range(256)) * 400  # 100 KiB: several records


def serving() -> ssl.SSLContext:
    tls = ServingTLS()
    pair = serving_keypair()
    tls.load(pair["tls.crt"], pair["tls.key"])
    return tls.context


def trusting() -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


def test_a_read_asks_for_one_record_and_loses_nothing() -> None:
    server_in, server_out, client_in, client_out = (ssl.MemoryBIO() for _ in range(4))
    server = serving().wrap_bio(server_in, server_out, server_side=True)
    peer = trusting().wrap_bio(client_in, client_out)
    assert isinstance(server, RecordReads)
    for _ in range(5):  # the handshake, pumped by hand
        for end in (peer, server):
            with contextlib.suppress(ssl.SSLWantReadError):
                end.do_handshake()
        server_in.write(client_out.read())
        client_in.write(server_out.read())
    peer.write(PAYLOAD)
    server_in.write(client_out.read())
    chunks = []
    while server.pending() or server_in.pending:
        try:
            chunks.append(server.read(256 * 1024))
        except ssl.SSLWantReadError:
            break
    assert b"".join(chunks) == PAYLOAD
    assert max(map(len, chunks)) == RECORD
    assert len(chunks) == -(-len(PAYLOAD) // RECORD)

    peer.write(PAYLOAD[:1000])
    server_in.write(client_out.read())
    buffer = bytearray(64 * 1024)  # a caller's buffer: read as asked
    assert server.read(len(buffer), buffer) == 1000
    assert bytes(buffer[:1000]) == PAYLOAD[:1000]


def test_every_context_of_ours_reads_records() -> None:
    assert ServingTLS().context.sslobject_class is RecordReads
    kube = KubeClient(client.ApiClient(configuration=client.Configuration()))
    assert kube.api.rest_client.ssl_context.sslobject_class is RecordReads
    assert read_records(ssl.create_default_context()).sslobject_class is RecordReads


class _Collect(asyncio.Protocol):
    def __init__(self, done: asyncio.Future[bytes]) -> None:
        self.data = bytearray()
        self.done = done
        self.transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.data += data
        if len(self.data) >= len(PAYLOAD):
            ssl_object = self.transport.get_extra_info("ssl_object") if self.transport else None
            self.done.set_result(bytes(self.data) if isinstance(ssl_object, RecordReads)
                                 else b"not read through RecordReads")


def test_uvloop_reads_a_plain_protocols_plaintext_through_our_class() -> None:
    async def exchange() -> bytes:
        loop = asyncio.get_running_loop()
        done: asyncio.Future[bytes] = loop.create_future()
        server = await loop.create_server(lambda: _Collect(done), "127.0.0.1", 0,
                                          ssl=serving())
        port = server.sockets[0].getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=trusting())
        writer.write(PAYLOAD)
        try:
            return await asyncio.wait_for(done, 10)
        finally:
            writer.close()
            server.close()

    assert uvloop.run(exchange()) == PAYLOAD
