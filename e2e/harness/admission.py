"""Our admission side in this process, confined to a test namespace, and the leader pods that
go through it.

Tests that need admission (most of them: a LeaderWorkerSet is defaulted and validated, its pods
are mutated) start the real ``WebhookRuntime`` here, registered by URL on 127.0.0.1 under
configuration names of the test namespace and confined to it, so nothing reaches the other
namespaces of a shared cluster. ``drive`` is the open-loop pod load that the certificate
rotation tests and the webhook benchmark (``e2e/bench/webhook_latency.py``) put through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import ssl
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from e2e.cluster import LocalCluster
from e2e.kube import Kube
from lws_operator.admission.runtime import WebhookOptions, WebhookRuntime
from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    NAME_LABEL,
    SIZE_ANNOTATION,
    WORKER_INDEX_LABEL,
)
from lws_operator.kube.client import ApiException, KubeClient, status_message
from lws_operator.logic.runtime import certs


def lws_pod(name: str, group: str = "bench", size: int = 2) -> dict[str, Any]:
    """A leader pod as a LeaderWorkerSet's leader StatefulSet would create it."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {NAME_LABEL: group, WORKER_INDEX_LABEL: "0"},
                     "annotations": {SIZE_ANNOTATION: str(size)}},
        "spec": {"subdomain": group,
                 "containers": [{"name": "main", "image": "busybox"}]},
    }


def is_mutated(pod: dict[str, Any]) -> bool:
    """Whether the pod webhook ran on ``pod`` (group labels and LWS env were added)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    env = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("env") or []
    return GROUP_INDEX_LABEL in labels and any(e.get("name") == "LWS_LEADER_ADDRESS" for e in env)


@dataclass
class LoadResult:
    scheduled: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds, successful admissions
    failures: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    started: float = 0.0  # wall clock
    ended: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies) / max(self.ended - self.started, 1e-9)


async def create_pod(kube: KubeClient, namespace: str, pod: dict[str, Any], *,
                     dry_run: bool) -> dict[str, Any]:
    return await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod,
                              query={"dryRun": "All"} if dry_run else None, timeout=30.0)


async def drive(kube: KubeClient, namespace: str, *, rate: float, duration: float,
                dry_run: bool, prefix: str, max_in_flight: int = 256,
                until: asyncio.Event | None = None) -> LoadResult:
    """Create ``rate`` labelled pods per second for ``duration`` seconds, or until ``until``
    is set (open loop)."""
    result = LoadResult(started=time.time())
    loop = asyncio.get_running_loop()
    limit = asyncio.Semaphore(max_in_flight)

    async def one(i: int) -> None:
        name = f"{prefix}-{i}"
        async with limit:
            t0 = time.perf_counter()
            try:
                pod = await create_pod(kube, namespace, lws_pod(name), dry_run=dry_run)
            except ApiException as exc:
                result.failures.append(f"{name}: {exc.status} {status_message(exc)}")
                return
            except Exception as exc:
                result.failures.append(f"{name}: {type(exc).__name__}: {exc}")
                return
            elapsed = time.perf_counter() - t0
        if not is_mutated(pod):
            result.failures.append(f"{name}: admitted without mutation")
            return
        result.latencies.append(elapsed)
        if not dry_run:
            result.created.append(name)

    tasks: list[asyncio.Task[None]] = []
    start = loop.time()
    i = 0
    while (due := start + i / rate) < start + duration and not (until and until.is_set()):
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
        i += 1
    await asyncio.gather(*tasks)
    result.scheduled = i
    result.ended = time.time()
    return result


async def wait_until_admitting(kube: KubeClient, namespace: str, timeout: float = 60.0,  # noqa: ASYNC109
                               ) -> None:
    """Dry-run creates until one comes back mutated: the API server has picked up the
    registration and reaches the webhook."""
    deadline = time.monotonic() + timeout
    last = "no attempt"
    while time.monotonic() < deadline:
        try:
            pod = await create_pod(kube, namespace, lws_pod("probe-1"), dry_run=True)
            if is_mutated(pod):
                return
            last = "admitted without mutation"
        except ApiException as exc:
            last = f"{exc.status} {status_message(exc)}"
        await asyncio.sleep(0.1)
    raise TimeoutError(f"webhook not admitting after {timeout}s: {last}")


def serving_keypair() -> dict[str, bytes]:
    """A day's CA and a serving certificate for 127.0.0.1 and localhost, as the Secret holds
    them (``ca.crt``, ``tls.crt``, ``tls.key``)."""
    now = dt.datetime.now(dt.UTC)
    ca, ca_key = certs.new_ca(now, dt.timedelta(days=1))
    cert, key = certs.new_serving_cert(ca, ca_key, now, dt.timedelta(days=1), ["localhost"],
                                       ["127.0.0.1"])
    return certs.encode(certs.CertState((ca,), ca_key, cert, key))


async def served_certificate(port: int) -> bytes:
    """The DER certificate a new TLS connection to a webhook listener on 127.0.0.1 gets."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        der: bytes = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return der
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()

async def ensure_namespace(kube: KubeClient, name: str) -> None:
    if await kube.get(f"/api/v1/namespaces/{name}") is None:
        await kube.request("POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


@dataclass
class Webhooks:
    """An in-process admission side (tests): the runtime, its task and the paths it served."""

    runtime: WebhookRuntime
    stop: asyncio.Event
    task: asyncio.Task[None]
    client: KubeClient
    calls: list[str] = field(default_factory=list)  # paths served, in order

    @property
    def options(self) -> WebhookOptions:
        return self.runtime.options


def options_for(namespace: str, **overrides: Any) -> WebhookOptions:
    """Local mode on 127.0.0.1, a free port, configurations named after and confined to the
    test namespace. The operator's own namespace (home of the certificate Secret, outside that
    confinement unless ``only_namespaces`` names it too) is a second one, ``<namespace>-op``."""
    values: dict[str, Any] = {
        "namespace": f"{namespace}-op", "bind_address": "127.0.0.1", "port": 0,
        "webhook_host": "127.0.0.1",
        "mutating_configuration": f"lws-mutating-{namespace}",
        "validating_configuration": f"lws-validating-{namespace}",
        "only_namespaces": (namespace,), "sync_interval": 0.5,
    }
    values.update(overrides)
    return WebhookOptions(**values)


async def start_webhooks(kubeconfig: str, options: WebhookOptions) -> Webhooks:
    """The admission side in-process, ready: serving, registered and reached by the API
    server."""
    client = await KubeClient.connect(kubeconfig)
    await ensure_namespace(client, options.namespace)
    calls: list[str] = []
    runtime = WebhookRuntime(client, options, observer=lambda path, _: calls.append(path))
    stop = asyncio.Event()
    hooks = Webhooks(runtime, stop, asyncio.create_task(runtime.run(stop)), client, calls)
    await asyncio.wait_for(runtime.serving.wait(), 30)
    await wait_until_admitting(client, options.only_namespaces[0])
    return hooks


async def stop_webhooks(hooks: Webhooks) -> None:
    hooks.stop.set()
    try:
        await asyncio.wait_for(hooks.task, 30)
    finally:
        with contextlib.suppress(ApiException):
            await hooks.client.request("DELETE", f"/api/v1/namespaces/{hooks.options.namespace}")
        await hooks.client.close()


@contextlib.asynccontextmanager
async def confined_namespaces(cluster: LocalCluster,
                              operators_suffix: str
                              ) -> AsyncIterator[tuple[Kube, str, str, Webhooks]]:
    """For tests that run operator processes next to in-process webhooks: the CRD installed, a
    fresh namespace ``t-…`` whose LeaderWorkerSets and pods go through our webhooks (confined
    to it), and a second one, ``t-…-<operators_suffix>``, for the processes. Yields a client,
    both names and the webhooks; on the way out (after the caller's own cleanup) the webhooks
    stop and both namespaces are deleted."""
    await asyncio.to_thread(cluster.install_crd)
    kube = await Kube.connect(str(cluster.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    operators = f"{namespace}-{operators_suffix}"
    for name in (namespace, operators):
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    hooks = await start_webhooks(str(cluster.kubeconfig), options_for(namespace))
    try:
        yield kube, namespace, operators, hooks
    finally:
        await stop_webhooks(hooks)
        for name in (namespace, operators):
            await kube.delete("v1", "Namespace", name)
        await kube.close()
