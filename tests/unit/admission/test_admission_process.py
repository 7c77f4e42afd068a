"""The admission process (``admission.process``) without a cluster: it serves admissions on the
port its parent bound, with the certificates its parent sends; its metrics reach the parent's
registry; it asks its parent about evictions; it stops when told, and when its parent dies.
About 10 s (four child processes).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import ssl
import sys
import textwrap
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import aiohttp
from prometheus_client import CollectorRegistry, generate_latest

from e2e.harness.admission import lws_pod, served_certificate, serving_keypair
from lws_operator.admission.process import (
    EVICTION_FORWARD_TIMEOUT,
    AdmissionProcess,
    ChildSettings,
)
from lws_operator.api.constants import MUTATE_POD_PATH, VALIDATE_EVICTION_PATH
from lws_operator.kube.tls_reads import RECORD


def der(pem: bytes) -> bytes:
    return ssl.PEM_cert_to_DER_cert(pem.decode())


async def admit(port: int, pod: dict[str, Any] | None = None) -> dict[str, Any]:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "operation": "CREATE", "namespace": "default",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "object": pod or lws_pod("p-1")}}
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    async with aiohttp.ClientSession() as session, session.post(
            f"https://127.0.0.1:{port}{MUTATE_POD_PATH}", json=review, ssl=ctx) as answer:
        assert answer.status == 200
        body: dict[str, Any] = await answer.json()
        return body


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie (exited, not yet reaped by a parent that is gone too) counts as gone.
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] != "Z"


async def test_serves_rotates_reports_metrics_and_stops() -> None:
    registry = CollectorRegistry()
    process = AdmissionProcess(ChildSettings(host="127.0.0.1", port=0), registry)
    process.reserve()
    first, second = serving_keypair(), serving_keypair()
    try:
        assert not process.listening
        await process.serve(first["tls.crt"], first["tls.key"])
        assert process.listening
        assert process.pid != os.getpid()
        assert await served_certificate(process.port) == der(first["tls.crt"])
        answer = await admit(process.port)
        assert answer["response"]["allowed"] is True
        assert answer["response"]["patchType"] == "JSONPatch"
        await process.serve(second["tls.crt"], second["tls.key"])
        assert await served_certificate(process.port) == der(second["tls.crt"])

        await process.refresh()
        text = generate_latest(registry).decode()
        assert ('controller_runtime_webhook_requests_total{code="200",webhook="'
                f'{MUTATE_POD_PATH}"}} 1.0') in text
        assert (f'controller_runtime_webhook_latency_seconds_count{{webhook="{MUTATE_POD_PATH}"'
                '} 1.0') in text
    finally:
        pid = process.pid
        await process.stop()
    assert pid is not None
    assert not alive(pid)


async def test_a_review_of_many_tls_records_is_answered() -> None:
    """The child reads TLS one record's plaintext at a time (``kube.tls_reads``): a body of
    many records, larger than one read of the socket, still arrives whole."""
    pod = lws_pod("big-1")
    pod["metadata"]["annotations"]["example.com/big"] = "x" * (20 * RECORD)
    process = AdmissionProcess(ChildSettings(host="127.0.0.1", port=0))
    pair = serving_keypair()
    try:
        await process.serve(pair["tls.crt"], pair["tls.key"])
        answer = await admit(process.port, pod)
    finally:
        await process.stop()
    assert answer["response"]["allowed"] is True
    patch = json.loads(base64.b64decode(answer["response"]["patch"]))
    assert any(op["path"].startswith("/spec/containers/0/env") for op in patch)
async def evict(port: int, pod: str) -> dict[str, Any]:
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "operation": "CREATE", "subResource": "eviction",
        "namespace": "default", "name": pod,
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "object": {"apiVersion": "policy/v1", "kind": "Eviction",
                   "metadata": {"name": pod, "namespace": "default"}}}}
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    async with aiohttp.ClientSession() as session, session.post(
            f"https://127.0.0.1:{port}{VALIDATE_EVICTION_PATH}", json=review,
            ssl=ctx) as answer:
        assert answer.status == 200
        body: dict[str, Any] = await answer.json()
        return body


async def test_evictions_are_decided_by_the_parent() -> None:
    """The child has no caches: it forwards each eviction review to its parent and serves the
    parent's answer; a parent that does not answer in time lets the eviction through, as the
    webhook's failurePolicy Ignore would."""
    process = AdmissionProcess(ChildSettings(host="127.0.0.1", port=0))
    process.reserve()
    asked: list[str] = []

    async def decide(request: Mapping[str, Any]) -> dict[str, Any]:
        asked.append(str(request["name"]))
        if request["name"] == "slow":
            await asyncio.sleep(EVICTION_FORWARD_TIMEOUT + 1)
        return {"allowed": False, "status": {"code": 429, "reason": "TooManyRequests",
                                             "message": f"not {request['name']}"}}

    pair = serving_keypair()
    try:
        await process.serve(pair["tls.crt"], pair["tls.key"])
        assert (await evict(process.port, "p-0"))["response"]["allowed"] is True  # no decider
        process.on_eviction = decide
        answers = await asyncio.gather(evict(process.port, "p-1"), evict(process.port, "p-2"))
        assert [a["response"]["status"]["message"] for a in answers] == ["not p-1", "not p-2"]
        assert [a["response"]["status"]["code"] for a in answers] == [429, 429]
        assert (await evict(process.port, "slow"))["response"]["allowed"] is True
        assert sorted(asked) == ["p-1", "p-2", "slow"]
    finally:
        await process.stop()


async def test_a_killed_child_is_started_again_with_the_certificate() -> None:
    process = AdmissionProcess(ChildSettings(host="127.0.0.1", port=0))
    process.reserve()
    pair = serving_keypair()
    try:
        await process.serve(pair["tls.crt"], pair["tls.key"])
        first = process.pid
        assert first is not None
        os.kill(first, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while not (process.listening and process.pid != first):
            assert time.monotonic() < deadline, "no new admission process"
            await asyncio.sleep(0.1)
        assert await served_certificate(process.port) == der(pair["tls.crt"])
        assert process.restarts == 1
    finally:
        await process.stop()


PARENT = textwrap.dedent("""
    import asyncio, json, sys
    from lws_operator.admission.process import AdmissionProcess, ChildSettings

    async def main():
        process = AdmissionProcess(ChildSettings(host="127.0.0.1", port=0))
        pair = json.loads(sys.argv[1])
        await process.serve(pair["cert"].encode(), pair["key"].encode())
        print(process.pid, process.port, flush=True)
        await asyncio.Event().wait()

    asyncio.run(main())
""")


async def test_the_child_dies_with_its_killed_parent(tmp_path: Path) -> None:
    pair = serving_keypair()
    # A file, not a pipe, for the parent's output: the child inherits it, and a pipe would
    # keep the parent's exit from being waited for.
    out = tmp_path / "parent.out"
    with out.open("w") as sink:
        parent = await asyncio.create_subprocess_exec(
            sys.executable, "-c", PARENT, json.dumps({"cert": pair["tls.crt"].decode(),
                                                      "key": pair["tls.key"].decode()}),
            stdout=sink)
    try:
        deadline = time.monotonic() + 60
        while not out.read_text().endswith("\n"):
            assert time.monotonic() < deadline, "the parent did not start its child"
            await asyncio.sleep(0.1)
        child, port = map(int, out.read_text().split())
        assert await served_certificate(port) == der(pair["tls.crt"])
        parent.kill()
        await parent.wait()
        deadline = time.monotonic() + 30
        while alive(child):
            assert time.monotonic() < deadline, "the admission process outlived its parent"
            await asyncio.sleep(0.1)
    finally:
        if parent.returncode is None:
            parent.kill()
            await parent.wait()
