"""The API server calls admission webhooks on loopback and issues working service-account tokens.

Both run on the api tier: a webhook is the operator's pod and LeaderWorkerSet admission path, and
tokens are how the operator authenticates in a cluster.
"""

from __future__ import annotations

import base64
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
from aiohttp import web
from kubernetes.aio.dynamic.exceptions import DynamicApiError

from e2e.cluster.pki import issue_serving_cert
from e2e.kube import Kube

pytestmark = pytest.mark.api


async def _deny_labelled(request: web.Request) -> web.Response:
    review = await request.json()
    req = review["request"]
    labels = req["object"]["metadata"].get("labels") or {}
    allowed = labels.get("deny") != "true"
    response: dict[str, Any] = {"uid": req["uid"], "allowed": allowed}
    if not allowed:
        response["status"] = {"code": 403, "message": "denied by the loopback test webhook"}
    return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                              "response": response})


@pytest_asyncio.fixture(loop_scope="session")
async def webhook(tmp_path: Path) -> AsyncIterator[tuple[str, bytes]]:
    """An HTTPS admission webhook on 127.0.0.1; yields its URL and CA bundle."""
    ca, cert, key = issue_serving_cert(tmp_path, ["127.0.0.1", "localhost"])
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert, key)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    app = web.Application()
    app.router.add_post("/validate", _deny_labelled)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", port, ssl_context=ctx)
    await site.start()
    yield f"https://127.0.0.1:{port}/validate", ca
    await runner.cleanup()


async def test_loopback_webhook_with_ca_bundle(
    kube: Kube, namespace: str, webhook: tuple[str, bytes]
) -> None:
    url, ca = webhook
    name = f"deny-{namespace}"
    await kube.create({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [{
            "name": "deny.e2e.lws-operator.dev",
            "clientConfig": {"url": url, "caBundle": base64.b64encode(ca).decode()},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 5,
        }],
    })
    try:
        def cm(cm_name: str, deny: str) -> dict[str, Any]:
            return {"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": cm_name, "labels": {"deny": deny}}}

        assert (await kube.create(cm("allowed", "false"), namespace))["metadata"]["uid"]
        with pytest.raises(DynamicApiError) as exc:
            await kube.create(cm("denied", "true"), namespace)
        assert exc.value.status == 403
        assert "denied by the loopback test webhook" in str(exc.value.body)
        assert await kube.get("v1", "ConfigMap", "denied", namespace) is None
    finally:
        await kube.delete("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration",
                          name)


async def test_service_account_token_authenticates(kube: Kube, namespace: str) -> None:
    await kube.create({"apiVersion": "v1", "kind": "ServiceAccount",
                       "metadata": {"name": "operator"}}, namespace)
    res = await kube.dyn.resources.get(api_version="v1", kind="ServiceAccount")
    token_review = await kube.dyn.request(
        "post", res.path(name="operator", namespace=namespace) + "/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 600}})
    token = token_review.to_dict()["status"]["token"]

    conf = kube.api.configuration
    ctx = ssl.create_default_context(cafile=conf.ssl_ca_cert)
    async with aiohttp.ClientSession() as http, http.post(
        f"{conf.host}/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        headers={"Authorization": f"Bearer {token}"}, ssl=ctx,
    ) as resp:
        assert resp.status == 201, await resp.text()
        review = await resp.json()
    user = review["status"]["userInfo"]
    assert user["username"] == f"system:serviceaccount:{namespace}:operator"
    assert "system:serviceaccounts" in user["groups"]
