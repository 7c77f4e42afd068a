"""``--cert-management=external`` (the chart's ``webhook.certificates=cert-manager``): the operator
serves whatever certificate another tool keeps in the Secret, follows its renewals, and writes
nothing: not the Secret, not the webhook configurations. Run in-process against the full-tier
cluster's API server, with the Secret written here the way cert-manager writes it."""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import ssl
import uuid
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from conftest import Clusters
from e2e.kube import Kube, wait_for
from lws_operator.admission.runtime import WebhookOptions, WebhookRuntime
from lws_operator.kube.client import KubeClient
from lws_operator.logic import certs

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
