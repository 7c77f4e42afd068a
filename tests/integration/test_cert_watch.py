"""The webhook certificates are watched, not polled: at rest the admission side makes no request,
and a change of the Secret or of a webhook configuration is acted on through the watch.

The polling interval (``sync_interval``) is set so that a poll would show: short in the test of
the quiet operator (a poller would have read the Secret a dozen times), an hour in the tests of
changes (only a watch can explain a reaction within the test).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import dataclasses
import datetime as dt
from collections.abc import AsyncIterator

import pytest
from cryptography import x509
from prometheus_client import CollectorRegistry

from e2e.cluster import LocalCluster
from e2e.harness.admission import (
    ensure_namespace,
    options_for,
    served_certificate,
    wait_until_admitting,
)
from e2e.kube import Kube, wait_for
from lws_operator.admission.runtime import WebhookOptions, WebhookRuntime
from lws_operator.kube.certs import GENERATION_ANNOTATION
from lws_operator.kube.client import ApiException, KubeClient
from lws_operator.kube.metrics import ClientMetrics
from lws_operator.logic.runtime import certs

pytestmark = pytest.mark.api

ADMISSION = "admissionregistration.k8s.io/v1"
HOUR = 3600.0


@contextlib.asynccontextmanager
async def running(cluster: LocalCluster, options: WebhookOptions, *, admitting: str | None,
                  ) -> AsyncIterator[tuple[WebhookRuntime, CollectorRegistry]]:
    """The admission side in-process, its requests counted on a registry of its own."""
    registry = CollectorRegistry()
    client = await KubeClient.connect(str(cluster.kubeconfig),
                                      metrics=ClientMetrics.for_registry(registry))
    await ensure_namespace(client, options.namespace)
    runtime = WebhookRuntime(client, options)
    stop = asyncio.Event()
    task = asyncio.create_task(runtime.run(stop))
    try:
        await asyncio.wait_for(runtime.serving.wait(), 30)
        if admitting is not None:
            # Both configurations registered as the runtime's watches see them (``serves``),
            # not only the mutating one the API server already calls: at rest means after it.
            await asyncio.wait_for(runtime.serves.wait(), 30)
            await wait_until_admitting(client, admitting)
        yield runtime, registry
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        with contextlib.suppress(ApiException):
            await client.request("DELETE", f"/api/v1/namespaces/{options.namespace}")
        await client.close()


def requests(registry: CollectorRegistry) -> dict[tuple[str, str], float]:
    """Requests made so far, by (verb, resource)."""
    out: dict[tuple[str, str], float] = {}
    for family in registry.collect():
        if family.name == "lws_operator_api_requests":
            for sample in family.samples:
                if sample.name.endswith("_total"):
                    key = (sample.labels["verb"], sample.labels["resource"])
                    out[key] = out.get(key, 0.0) + sample.value
    return out


def fresh_secret_data(options: WebhookOptions) -> dict[str, bytes]:
    """Certificates another replica (or an installer) might write: a new CA and certificate."""
    plan = certs.plan(None, now=dt.datetime.now(dt.UTC), policy=options.policy(),
                      bundle_injected=False)
    assert plan.data is not None
    return plan.data


def der(pem: bytes) -> bytes:
    from cryptography.hazmat.primitives.serialization import Encoding

    return x509.load_pem_x509_certificate(pem).public_bytes(Encoding.DER)


async def test_at_rest_no_request_is_made(cluster: LocalCluster, namespace: str) -> None:
    # A poller with this interval would read the Secret and both configurations ~15 times
    # in the window below.
    options = options_for(namespace, sync_interval=0.2)
    async with running(cluster, options, admitting=namespace) as (_, registry):
        before = requests(registry)
        await asyncio.sleep(3.0)
        after = requests(registry)
    made = {k: after[k] - before.get(k, 0.0) for k in after if after[k] != before.get(k, 0.0)}
    assert made == {}


async def test_an_edited_ca_bundle_is_repaired_through_the_watch(
        cluster: LocalCluster, kube: Kube, namespace: str) -> None:
    options = options_for(namespace, sync_interval=HOUR)
    async with running(cluster, options, admitting=namespace):
        secret = await kube.get("v1", "Secret", options.secret_name, options.namespace)
        assert secret is not None
        stray = base64.b64encode(fresh_secret_data(options)[certs.CA_CERT_KEY]).decode()
        config = await kube.get(ADMISSION, "MutatingWebhookConfiguration",
                                options.mutating_configuration)
        assert config is not None
        for hook in config["webhooks"]:
            hook["clientConfig"]["caBundle"] = stray
        await kube.patch(ADMISSION, "MutatingWebhookConfiguration",
                         options.mutating_configuration, {"webhooks": config["webhooks"]})

        async def repaired() -> bool:
            live = await kube.get(ADMISSION, "MutatingWebhookConfiguration",
                                  options.mutating_configuration)
            return live is not None and all(
                h["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
                for h in live["webhooks"])

        await wait_for(repaired, what="the Secret's CA back in the configuration")


async def test_a_deleted_configuration_is_registered_again_through_the_watch(
        cluster: LocalCluster, kube: Kube, namespace: str) -> None:
    options = options_for(namespace, sync_interval=HOUR)
    async with running(cluster, options, admitting=namespace):
        await kube.delete(ADMISSION, "ValidatingWebhookConfiguration",
                          options.validating_configuration)

        async def registered() -> bool:
            return await kube.get(ADMISSION, "ValidatingWebhookConfiguration",
                                  options.validating_configuration) is not None

        await wait_for(registered, what="the validating configuration registered again")


async def test_a_secret_written_elsewhere_is_served_and_injected_through_the_watch(
        cluster: LocalCluster, kube: Kube, namespace: str) -> None:
    """Another replica (or an installer) writes new certificates: this one serves them and
    injects their CA without reading the Secret again on its own."""
    options = options_for(namespace, sync_interval=HOUR)
    async with running(cluster, options, admitting=namespace) as (runtime, _):
        secret = await kube.get("v1", "Secret", options.secret_name, options.namespace)
        assert secret is not None
        data = fresh_secret_data(options)
        generation = int(secret["metadata"]["annotations"][GENERATION_ANNOTATION]) + 1
        await kube.patch("v1", "Secret", options.secret_name, {
            "metadata": {"annotations": {GENERATION_ANNOTATION: str(generation)}},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}},
            options.namespace)

        async def served() -> bool:
            return await served_certificate(runtime.server.port) == der(
                data[certs.TLS_CERT_KEY])

        await wait_for(served, what="the written certificate on the wire")
        want = base64.b64encode(data[certs.CA_CERT_KEY]).decode()

        async def injected() -> bool:
            live = await kube.get(ADMISSION, "MutatingWebhookConfiguration",
                                  options.mutating_configuration)
            return live is not None and all(
                h["clientConfig"]["caBundle"] == want for h in live["webhooks"])

        await wait_for(injected, what="the written CA in the configuration")
        await wait_until_admitting(runtime.certs.kube, namespace)


async def test_external_certificates_are_served_through_the_watch(
        cluster: LocalCluster, kube: Kube, namespace: str) -> None:
    """``--cert-management=external``: the Secret is another tool's; a renewal it writes is
    served without a poll."""
    options = dataclasses.replace(options_for(namespace, sync_interval=HOUR),
                                  cert_management="external", register_webhooks=False)
    first, second = fresh_secret_data(options), fresh_secret_data(options)
    await kube.create({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": options.namespace}})
    await kube.create({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                       "metadata": {"name": options.secret_name},
                       "data": {k: base64.b64encode(v).decode() for k, v in first.items()}},
                      options.namespace)
    async with running(cluster, options, admitting=None) as (runtime, _):
        assert await served_certificate(runtime.server.port) == der(first[certs.TLS_CERT_KEY])
        await kube.patch("v1", "Secret", options.secret_name, {"data": {
            k: base64.b64encode(v).decode() for k, v in second.items()}}, options.namespace)

        async def renewed() -> bool:
            return await served_certificate(runtime.server.port) == der(
                second[certs.TLS_CERT_KEY])

        await wait_for(renewed, what="the renewed certificate on the wire")
