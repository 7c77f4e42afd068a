"""The webhooks' HTTP/1.1 server (``admission.http_server``) on loopback TLS, spoken to byte by
byte as kube-apiserver's client speaks: kept-alive connections, the ``?timeout=`` query, and the
answers to what it should never send. No cluster; about 1 s."""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from prometheus_client import CollectorRegistry

from e2e.harness.admission import lws_pod, serving_keypair
from lws_operator.admission import http_server, review
from lws_operator.admission.metrics import WebhookMetrics
from lws_operator.admission.server import AdmissionServer, ServingTLS
from lws_operator.api.constants import MUTATE_POD_PATH, VALIDATE_POD_PATH

ACCEPTED = "lws_operator_webhook_connections_accepted_total"




def review_body(uid: str = "u-1") -> bytes:
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": uid, "operation": "CREATE", "namespace": "default",
                                   "object": lws_pod("p-1")}}).encode()


def post(path: str, body: bytes, *, method: str = "POST", extra: str = "") -> bytes:
    """A request as Go's transport writes it (kube-apiserver appends ``?timeout=``)."""
    return (f"{method} {path}?timeout=10s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n{extra}\r\n"
            ).encode() + body


async def read_answer(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.lower(): v.strip() for k, _, v in (
        line.partition(":") for line in lines[1:] if line)}
    body = await reader.readexactly(int(headers["content-length"]))
    return status, headers, body


class Served:
    def __init__(self, server: AdmissionServer, registry: CollectorRegistry) -> None:
        self.server = server
        self.registry = registry
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname = False
        self.ctx.verify_mode = ssl.CERT_NONE

    async def connect(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.server.port, ssl=self.ctx)

    def accepted(self) -> float:
        return self.registry.get_sample_value(ACCEPTED) or 0.0


@pytest_asyncio.fixture(loop_scope="session")
async def served() -> AsyncIterator[Served]:
    registry = CollectorRegistry()
    tls = ServingTLS()
    pair = serving_keypair()
    tls.load(pair["tls.crt"], pair["tls.key"])
    server = AdmissionServer(tls=tls, handlers=review.handlers(), host="127.0.0.1", port=0,
                             metrics=WebhookMetrics(registry), shutdown_timeout=2.0)
    await server.start()
    yield Served(server, registry)
    await server.stop()


async def test_one_connection_serves_many_admissions_and_is_counted_once(
        served: Served) -> None:
    before = served.accepted()
    reader, writer = await served.connect()
    try:
        for i in range(3):
            writer.write(post(MUTATE_POD_PATH, review_body(f"u-{i}")))
            status, headers, body = await read_answer(reader)
            assert status == 200
            assert headers["content-type"] == "application/json; charset=utf-8"
            answer = json.loads(body)["response"]
            assert answer["uid"] == f"u-{i}"
            assert answer["allowed"] is True
            assert answer["patchType"] == "JSONPatch"
            assert "connection" not in headers  # kept alive
    finally:
        writer.close()
    assert served.accepted() - before == 1.0
    assert served.registry.get_sample_value(
        "controller_runtime_webhook_requests_total",
        {"webhook": MUTATE_POD_PATH, "code": "200"}) == 3.0
    # A second connection is a second accept.
    reader, writer = await served.connect()
    writer.write(post(VALIDATE_POD_PATH, review_body()))
    assert (await read_answer(reader))[0] == 200
    writer.close()
    assert served.accepted() - before == 2.0


async def test_pipelined_requests_are_answered_in_order(served: Served) -> None:
    reader, writer = await served.connect()
    try:
        writer.write(post(MUTATE_POD_PATH, review_body("a")) + post(VALIDATE_POD_PATH,
                                                                    review_body("b")))
        first, second = await read_answer(reader), await read_answer(reader)
        assert json.loads(first[2])["response"]["uid"] == "a"
        assert json.loads(second[2])["response"]["uid"] == "b"
    finally:
        writer.close()


@pytest.mark.parametrize(("request_bytes", "status"), [
    (post("/mutate-something-else", b"{}"), 404),
    (post(MUTATE_POD_PATH, b"", method="GET"), 405),
])
async def test_unknown_paths_and_other_methods_are_refused_and_the_connection_kept(
        served: Served, request_bytes: bytes, status: int) -> None:
    reader, writer = await served.connect()
    try:
        writer.write(request_bytes)
        assert (await read_answer(reader))[0] == status
        writer.write(post(MUTATE_POD_PATH, review_body()))
        assert (await read_answer(reader))[0] == 200
    finally:
        writer.close()


async def test_a_body_over_the_limit_is_413_and_closes(served: Served) -> None:
    reader, writer = await served.connect()
    big = b"x" * (http_server.MAX_BODY + 1)
    writer.write(post(MUTATE_POD_PATH, big))
    status, headers, _ = await read_answer(reader)
    assert status == 413
    assert headers["connection"] == "close"
    assert await reader.read() == b""
    writer.close()


async def test_an_update_review_of_a_large_object_is_admitted(served: Served) -> None:
    """An UPDATE's review carries the object twice: one of 2 MiB (under the API server's 3 MiB
    request limit) makes a 4 MiB review, which controller-runtime's 7 MiB limit admits and
    aiohttp's old 1 MiB default refused with 413."""
    pod = lws_pod("p-1")
    pod["metadata"]["annotations"] = {"big": "x" * (2 * 1024 * 1024)}
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "u-big", "operation": "UPDATE",
                                   "namespace": "default", "object": pod,
                                   "oldObject": pod}}).encode()
    assert len(body) > 4 * 1024 * 1024
    reader, writer = await served.connect()
    try:
        writer.write(post(VALIDATE_POD_PATH, body))
        status, _, answer = await read_answer(reader)
        assert status == 200
        assert json.loads(answer)["response"]["uid"] == "u-big"
    finally:
        writer.close()


async def test_garbage_is_400_and_closes(served: Served) -> None:
    reader, writer = await served.connect()
    writer.write(b"NOT HTTP AT ALL\r\n\r\n")
    status, headers, _ = await read_answer(reader)
    assert status == 400
    assert headers["connection"] == "close"
    assert await reader.read() == b""
    writer.close()


async def test_a_malformed_review_is_answered_400_inside_the_review(served: Served) -> None:
    """Not an HTTP error: the API server reads the AdmissionReview's status (``review``)."""
    reader, writer = await served.connect()
    try:
        writer.write(post(MUTATE_POD_PATH, b"[]"))
        status, _, body = await read_answer(reader)
        assert status == 200
        assert json.loads(body)["response"]["status"]["code"] == 400
    finally:
        writer.close()


async def test_stop_finishes_the_answer_under_way_and_closes_idle_connections() -> None:
    """An eviction review waits for its (slow) answer while the server stops: it is answered,
    with ``Connection: close``; an idle kept-alive connection is closed at once."""
    release = asyncio.Event()

    async def slow(request: object) -> dict[str, object]:
        await release.wait()
        return review.allowed()

    tls = ServingTLS()
    pair = serving_keypair()
    tls.load(pair["tls.crt"], pair["tls.key"])
    server = AdmissionServer(tls=tls, handlers={"/slow": slow}, host="127.0.0.1", port=0,
                             shutdown_timeout=5.0)
    await server.start()
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    busy_r, busy_w = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx)
    idle_r, idle_w = await asyncio.open_connection("127.0.0.1", server.port, ssl=ctx)
    busy_w.write(post("/slow", review_body("slow")))
    await asyncio.sleep(0.2)
    stopping = asyncio.create_task(server.stop())
    assert await asyncio.wait_for(idle_r.read(), 5) == b""  # closed without an answer
    assert not stopping.done()
    release.set()
    status, headers, body = await asyncio.wait_for(read_answer(busy_r), 5)
    assert (status, headers["connection"]) == (200, "close")
    assert json.loads(body)["response"]["uid"] == "slow"
    await asyncio.wait_for(stopping, 5)
    busy_w.close()
    idle_w.close()
