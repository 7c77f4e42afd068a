"""``--cert-management=external`` (the chart's ``webhook.certificates=cert-manager``): the operator
serves whatever certificate another tool keeps in the Secret, follows its renewals, and writes
nothing: not the Secret, not the webhook configurations. Run in-process against the full-tier
cluster's API server, with the Secret written here the way cert-manager writes it."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import os
import ssl
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from e2e.cluster.launcher import free_port
from e2e.harness.chart import http_get, start, stop
from e2e.harness.clusters import Clusters
from e2e.kube import Kube, wait_for
from lws_operator.admission.runtime import WebhookOptions, WebhookRuntime
from lws_operator.kube.client import KubeClient
from lws_operator.logic.runtime import certs

pytestmark = pytest.mark.full


def cert_manager_secret(name: str, options: WebhookOptions) -> dict[str, Any]:
    """A kubernetes.io/tls Secret as a cert-manager Certificate leaves it."""
    data = certs.plan(None, now=dt.datetime.now(dt.UTC), policy=options.policy(),
                      bundle_injected=False).data
    assert data is not None
    keys = (certs.TLS_CERT_KEY, certs.TLS_KEY_KEY, certs.CA_CERT_KEY)
    return {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name},
            "data": {k: base64.b64encode(data[k]).decode() for k in keys}}


def served_certificate(port: int) -> bytes:
    """The DER certificate the listener on 127.0.0.1:``port`` presents."""
    return ssl.PEM_cert_to_DER_cert(ssl.get_server_certificate(("127.0.0.1", port)))


def der(secret: dict[str, Any]) -> bytes:
    pem = base64.b64decode(secret["data"][certs.TLS_CERT_KEY])
    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


async def test_serves_the_secret_and_writes_nothing(clusters: Clusters) -> None:
    cluster = clusters.get("full")
    kube = await Kube.connect(str(cluster.kubeconfig))
    client = await KubeClient.connect(str(cluster.kubeconfig))
    suffix = uuid.uuid4().hex[:8]
    namespace, secret_name = f"certs-{suffix}", "lws-webhook-server-cert"
    options = WebhookOptions(
        namespace=namespace, bind_address="127.0.0.1", port=0, webhook_host="127.0.0.1",
        secret_name=secret_name, mutating_configuration=f"lws-mutating-{suffix}",
        validating_configuration=f"lws-validating-{suffix}", sync_interval=0.5,
        cert_management="external")
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    runtime = WebhookRuntime(client, options)
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    try:
        # No Secret yet (cert-manager has not issued): not ready, and nothing is created.
        await asyncio.sleep(1.5)
        assert not runtime.ready
        assert await kube.get("v1", "Secret", secret_name, namespace) is None

        first = await kube.create(cert_manager_secret(secret_name, options), namespace)
        await asyncio.wait_for(runtime.serving.wait(), 30)
        assert runtime.ready
        port = runtime.server.port
        assert await asyncio.to_thread(served_certificate, port) == der(first)

        # A renewal (cert-manager replaces the data) is served within a sync interval.
        renewed = cert_manager_secret(secret_name, options)
        renewed["metadata"]["resourceVersion"] = first["metadata"]["resourceVersion"]
        second = await kube.patch("v1", "Secret", secret_name, {"data": renewed["data"]},
                                  namespace)
        assert der(second) != der(first)

        async def follows() -> bool:
            return await asyncio.to_thread(served_certificate, port) == der(second)

        await wait_for(follows, timeout=10, what="the renewed certificate to be served")
        await asyncio.sleep(1.5)  # a few more passes: still nothing written
        live = await kube.get("v1", "Secret", secret_name, namespace)
        assert live is not None
        assert live["metadata"]["resourceVersion"] == second["metadata"]["resourceVersion"]
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            name = options.mutating_configuration if kind.startswith("M") else (
                options.validating_configuration)
            assert await kube.get("admissionregistration.k8s.io/v1", kind, name) is None
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        await client.close()
        await kube.delete("v1", "Namespace", namespace)
        await kube.close()


async def test_the_flag_reaches_the_process(clusters: Clusters, tmp_path: Path) -> None:
    """``lws-operator run --cert-management=external`` (what the chart renders for
    cert-manager): not ready and writing nothing until the Secret holds a certificate."""
    cluster = clusters.get("full")
    kube = await Kube.connect(str(cluster.kubeconfig))
    namespace = f"certs-{uuid.uuid4().hex[:8]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    health, log_path = free_port(), tmp_path / "operator.log"
    proc = start([str(Path(sys.executable).parent / "lws-operator"), "run",
                  f"--kubeconfig={cluster.kubeconfig}", f"--namespace={namespace}",
                  "--webhook-host=127.0.0.1", "--disable-controllers",
                  "--cert-management=external", "--cert-sync-interval=0.5s",
                  f"--webhook-port={free_port()}", f"--health-port={health}",
                  "--metrics-bind-address=0"],
                 {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}, log_path)
    try:
        async def alive() -> bool:
            assert proc.poll() is None, log_path.read_text()
            return http_get(f"http://127.0.0.1:{health}/healthz")[0] == 200

        await wait_for(alive, timeout=30, what="/healthz")
        await asyncio.sleep(2)  # several certificate passes
        assert http_get(f"http://127.0.0.1:{health}/readyz")[0] == 503
        assert await kube.get("v1", "Secret", "lws-webhook-server-cert", namespace) is None
        options = WebhookOptions(namespace=namespace, webhook_host="127.0.0.1")
        await kube.create(cert_manager_secret("lws-webhook-server-cert", options), namespace)

        async def ready() -> bool:
            assert proc.poll() is None, log_path.read_text()
            return http_get(f"http://127.0.0.1:{health}/readyz")[0] == 200

        await wait_for(ready, timeout=30, what="/readyz once the Secret holds a certificate")
        # Local mode without the flag would have registered the configurations.
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
            default = f"lws-{kind[:-len('WebhookConfiguration')].lower()}-webhook-configuration"
            live = await kube.get("admissionregistration.k8s.io/v1", kind, default)
            assert live is None or "url" not in live["webhooks"][0]["clientConfig"]
    finally:
        code = stop(proc)
        await kube.delete("v1", "Namespace", namespace)
        await kube.close()
    assert code == 0, log_path.read_text()
