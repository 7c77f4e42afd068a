"""The admission webhooks behind a real kube-apiserver, registered by URL as ``make run`` does.

Each test runs the operator's admission side in-process (``WebhookRuntime``: certificates in a
Secret, caBundle injected, configurations registered) with the webhooks confined to the test's
namespace, and talks to it only through the API server, as users do.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import signal
import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from kubernetes.aio.dynamic.exceptions import DynamicApiError

from e2e.cluster import LocalCluster
from e2e.cluster.launcher import free_port
from e2e.harness.admission import (
    Webhooks,
    is_mutated,
    lws_pod,
    options_for,
    start_webhooks,
    stop_webhooks,
    wait_until_admitting,
)
from e2e.kube import Kube, wait_for
from lws_operator.admission import registration
from lws_operator.api import disaggregated
from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    MUTATE_LWS_PATH,
    MUTATE_POD_PATH,
    NAME_LABEL,
    VALIDATE_EVICTION_PATH,
    VALIDATE_LWS_PATH,
    VALIDATE_POD_PATH,
)
from lws_operator.kube.certs import GENERATION_ANNOTATION
from tests.harness.api_answers import status

pytestmark = pytest.mark.api

REPO = Path(__file__).resolve().parents[2]
ADMISSION = "admissionregistration.k8s.io/v1"


@pytest_asyncio.fixture(loop_scope="session")
async def webhooks(cluster: LocalCluster, namespace: str) -> AsyncIterator[Webhooks]:
    hooks = await start_webhooks(str(cluster.kubeconfig), options_for(namespace))
    yield hooks
    await stop_webhooks(hooks)


def message(exc: DynamicApiError) -> str:
    return str(status(exc)["message"])


def pod(name: str, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}


async def test_registration_and_certificate_secret(kube: Kube, namespace: str,
                                                   webhooks: Webhooks) -> None:
    secret = await kube.get("v1", "Secret", "lws-webhook-server-cert", f"{namespace}-op")
    assert secret is not None
    assert set(secret["data"]) >= {"ca.crt", "ca.key", "tls.crt", "tls.key"}
    mutating = await kube.get(ADMISSION, "MutatingWebhookConfiguration",
                              webhooks.options.mutating_configuration)
    validating = await kube.get(ADMISSION, "ValidatingWebhookConfiguration",
                                webhooks.options.validating_configuration)
    assert mutating is not None
    assert validating is not None
    hooks = {h["name"]: h for h in mutating["webhooks"] + validating["webhooks"]}
    base = f"https://127.0.0.1:{webhooks.runtime.server.port}"
    assert {n: h["clientConfig"]["url"] for n, h in hooks.items()} == {
        "mleaderworkerset.kb.io": base + MUTATE_LWS_PATH,
        "mpod.kb.io": base + MUTATE_POD_PATH,
        "vleaderworkerset.kb.io": base + VALIDATE_LWS_PATH,
        "vdisaggregatedset.kb.io": base + disaggregated.VALIDATE_PATH,
        registration.EVICTION_WEBHOOK: base + VALIDATE_EVICTION_PATH,
    }
    for hook in hooks.values():
        assert base64.b64decode(hook["clientConfig"]["caBundle"]) == base64.b64decode(
            secret["data"]["ca.crt"])


async def test_lws_pod_is_mutated(kube: Kube, namespace: str, webhooks: Webhooks) -> None:
    created = await kube.create(lws_pod("sample-3", group="sample", size=3), namespace)
    stored = await kube.get("v1", "Pod", "sample-3", namespace)
    for obj in (created, stored):
        assert obj is not None
        assert is_mutated(obj)
        labels = obj["metadata"]["labels"]
        assert labels[GROUP_INDEX_LABEL] == "3"
        assert len(labels[GROUP_KEY_LABEL]) == 40
        env = {e["name"]: e.get("value") for e in obj["spec"]["containers"][0]["env"]}
        assert env["LWS_LEADER_ADDRESS"] == f"sample-3.sample.{namespace}"
        assert env["LWS_GROUP_SIZE"] == "3"
    assert MUTATE_POD_PATH in webhooks.calls
    # Upstream's no-op vpod.kb.io is served but not registered (admission.registration).
    assert VALIDATE_POD_PATH not in webhooks.calls


async def test_pod_without_the_label_never_reaches_the_webhook(
        kube: Kube, namespace: str, webhooks: Webhooks) -> None:
    before = len(webhooks.calls)
    plain = pod("plain", labels={"app": "x"}, annotations={"a": "b"})
    created = await kube.create(plain, namespace)
    assert created["metadata"]["labels"] == {"app": "x"}
    assert created["metadata"]["annotations"] == {"a": "b"}
    assert "env" not in created["spec"]["containers"][0]
    # The create returned after admission, so a call would already be recorded.
    assert webhooks.calls[before:] == []
    # The same pod with the label does reach it (the count can move at all).
    await kube.create(lws_pod("labelled-1"), namespace)
    assert webhooks.calls[before:].count(MUTATE_POD_PATH) == 1


async def test_malformed_lws_pod_is_rejected_with_the_mutation_message(
        kube: Kube, namespace: str, webhooks: Webhooks) -> None:
    bad = pod("broken-1", labels={NAME_LABEL: "broken"})  # no size annotation
    with pytest.raises(DynamicApiError) as exc:
        await kube.create(bad, namespace)
    assert exc.value.status == 403
    assert message(exc.value) == ('admission webhook "mpod.kb.io" denied the request: '
                                  "size annotation is unexpectedly missing for pod broken-1")
    assert status(exc.value)["reason"] == "Forbidden"
    assert await kube.get("v1", "Pod", "broken-1", namespace) is None


async def test_webhook_down_fails_closed_for_lws_pods_only(
        cluster: LocalCluster, kube: Kube, namespace: str) -> None:
    hooks = await start_webhooks(str(cluster.kubeconfig), options_for(namespace))
    try:
        await hooks.runtime.server.stop()  # the listener dies; the registration stays
        with pytest.raises(DynamicApiError) as exc:
            await kube.create(lws_pod("orphan-1"), namespace)
        assert exc.value.status == 500
        text = message(exc.value)
        assert 'failed calling webhook "mpod.kb.io"' in text
        assert "connection refused" in text
        assert await kube.get("v1", "Pod", "orphan-1", namespace) is None
        created = await kube.create(pod("unrelated"), namespace)
        assert created["metadata"]["name"] == "unrelated"
    finally:
        await stop_webhooks(hooks)
    # A stopped local-mode operator removes its registrations.
    assert await kube.get(ADMISSION, "MutatingWebhookConfiguration",
                          hooks.options.mutating_configuration) is None
    assert await kube.get(ADMISSION, "ValidatingWebhookConfiguration",
                          hooks.options.validating_configuration) is None


async def test_lws_webhooks_are_wired(lws_crd: LocalCluster, kube: Kube, namespace: str,
                                      webhooks: Webhooks) -> None:
    """Smoke test only (the LWS admission tests proper are elsewhere): a field only the
    defaulting webhook sets, and one validation error, through the API server."""
    lws: dict[str, Any] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "smoke"},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {
            "spec": {"containers": [{"name": "main", "image": "busybox"}]}}}},
    }

    async def create_lws() -> dict[str, Any] | None:
        try:
            return await kube.create(lws, namespace)
        except Exception as exc:  # the API may need a moment to serve the new kind
            if "404" in str(exc) or "not find" in str(exc).lower():
                return None
            raise

    created = await wait_for(create_lws, timeout=30, what="LeaderWorkerSet creation")
    assert created is not None
    assert created["spec"]["networkConfig"] == {"subdomainPolicy": "Shared"}
    assert MUTATE_LWS_PATH in webhooks.calls
    assert VALIDATE_LWS_PATH in webhooks.calls

    bad = {**lws, "metadata": {"name": "too-big"}}
    bad["spec"] = {**lws["spec"], "replicas": 1_000_000,
                   "leaderWorkerTemplate": {**lws["spec"]["leaderWorkerTemplate"],
                                            "size": 1_000_000}}
    with pytest.raises(DynamicApiError) as exc:
        await kube.create(bad, namespace)
    assert exc.value.status == 403
    assert status(exc.value)["reason"] == "Forbidden"
    assert message(exc.value) == (
        'admission webhook "vleaderworkerset.kb.io" denied the request: spec.replicas: '
        "Invalid value: 1000000: the product of replicas and worker replicas must not exceed "
        "2147483647")


async def test_local_mode_takes_over_service_registrations(
        cluster: LocalCluster, kube: Kube, namespace: str) -> None:
    """``make run`` on a cluster where ``webhooks/*.yaml`` were applied: the URL registration
    replaces the Service-based one instead of failing on it."""
    options = options_for(namespace)
    for obj in registration.render(
            registration.ServiceTarget(namespace=options.namespace),
            mutating_name=options.mutating_configuration,
            validating_name=options.validating_configuration,
            only_namespaces=[namespace]):
        await kube.create(obj)
    hooks = await start_webhooks(str(cluster.kubeconfig), options)  # waits until admitting
    try:
        mutating = await kube.get(ADMISSION, "MutatingWebhookConfiguration",
                                  options.mutating_configuration)
        assert mutating is not None
        for hook in mutating["webhooks"]:
            assert "service" not in hook["clientConfig"]
            assert hook["clientConfig"]["url"].startswith("https://127.0.0.1:")
    finally:
        await stop_webhooks(hooks)


async def test_lws_operator_run_command(lws_crd: LocalCluster, kube: Kube,
                                        namespace: str) -> None:
    """``lws-operator run`` in local mode as ``make run`` starts it (its namespace and the CRD
    exist first, as an install creates them): ready once it has a certificate, then admitting,
    and on SIGTERM it unregisters and exits 0."""
    cluster = lws_crd
    operator_ns = f"{namespace}-run"
    await kube.create({"apiVersion": "v1", "kind": "Namespace",
                       "metadata": {"name": operator_ns}})
    webhook_port, health_port = free_port(), free_port()
    names = [f"lws-mutating-{namespace}", f"lws-validating-{namespace}"]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "lws_operator", "run", "--kubeconfig", str(cluster.kubeconfig),
        "--namespace", operator_ns, "--webhook-host", "127.0.0.1",
        "--webhook-port", str(webhook_port), "--health-port", str(health_port),
        "--metrics-bind-address", "0",
        "--mutating-webhook-configuration", names[0],
        "--validating-webhook-configuration", names[1], "--cert-sync-interval", "0.5s",
        stderr=asyncio.subprocess.PIPE)
    health = f"http://127.0.0.1:{health_port}"
    try:
        async with aiohttp.ClientSession() as http:
            async def probe(path: str) -> int | None:
                try:
                    async with http.get(health + path) as resp:
                        return resp.status
                except aiohttp.ClientError:
                    return None

            await wait_for(lambda: probe("/healthz"), what="/healthz to answer")

            async def ready() -> bool:
                return await probe("/readyz") == 200

            await wait_for(ready, what="/readyz to turn 200")

        async def mutated() -> dict[str, Any] | None:
            try:
                created = await kube.create(lws_pod(f"cli-{uuid.uuid4().hex[:6]}-1"), namespace)
            except DynamicApiError:
                return None  # the API server may not have seen the registration yet
            return created if is_mutated(created) else None

        await wait_for(mutated, what="a pod mutated through `lws-operator run`")
    finally:
        proc.send_signal(signal.SIGTERM)
        _, stderr = await asyncio.wait_for(proc.communicate(), 30)
        with contextlib.suppress(DynamicApiError):
            await kube.delete("v1", "Namespace", operator_ns)
    assert proc.returncode == 0, stderr.decode()[-2000:]
    assert b"stopped" in stderr
    assert await kube.get(ADMISSION, "MutatingWebhookConfiguration", names[0]) is None
    assert await kube.get(ADMISSION, "ValidatingWebhookConfiguration", names[1]) is None


async def test_deleted_secret_is_recreated_and_trusted_again(
        cluster: LocalCluster, kube: Kube, namespace: str) -> None:
    """Deleting the Secret (to force new certificates, or by an uninstall) yields a new CA
    that is injected despite the configurations carrying a later bundle generation."""
    options = options_for(namespace)
    hooks = await start_webhooks(str(cluster.kubeconfig), options)
    try:
        old = await kube.get("v1", "Secret", options.secret_name, options.namespace)
        assert old is not None
        # As after several CA rotations: the configurations carry a later generation.
        for kind, name in (("MutatingWebhookConfiguration", options.mutating_configuration),
                           ("ValidatingWebhookConfiguration", options.validating_configuration)):
            await kube.patch(ADMISSION, kind, name, {"metadata": {"annotations": {
                GENERATION_ANNOTATION: "7"}}})
        await kube.delete("v1", "Secret", options.secret_name, options.namespace)

        async def replaced() -> bool:
            new = await kube.get("v1", "Secret", options.secret_name, options.namespace)
            return new is not None and new["data"]["ca.crt"] != old["data"]["ca.crt"]

        await wait_for(replaced, what="a new Secret with a new CA")
        new = await kube.get("v1", "Secret", options.secret_name, options.namespace)
        assert new is not None

        async def injected() -> bool:
            config = await kube.get(ADMISSION, "MutatingWebhookConfiguration",
                                    options.mutating_configuration)
            return config is not None and all(
                h["clientConfig"]["caBundle"] == new["data"]["ca.crt"]
                for h in config["webhooks"])

        await wait_for(injected, what="the new CA in the configuration")
        await wait_until_admitting(hooks.client, namespace)
        created = await kube.create(lws_pod("after-1"), namespace)
        assert is_mutated(created)
    finally:
        await stop_webhooks(hooks)
