"""When the webhooks "serve" (``admission.runtime``): the configurations in place as the watched
objects say, and the listener answering over TLS to a client that trusts only the configured CA
and checks the name the API server checks. The controllers reconcile only then."""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from lws_operator.admission import registration
from lws_operator.admission.runtime import WebhookOptions, WebhookRuntime
from lws_operator.kube.certs import MUTATING, SECRET, VALIDATING
from lws_operator.logic.runtime import certs
from tests.harness.quiet_kube import QuietKube


def _data(options: WebhookOptions) -> dict[str, bytes]:
    data = certs.plan(None, now=dt.datetime.now(dt.UTC), policy=options.policy(),
                      bundle_injected=False).data
    assert data is not None
    return data


def _secret(data: dict[str, bytes]) -> dict[str, Any]:
    return {"metadata": {"name": "s", "resourceVersion": "1"},
            "data": {k: base64.b64encode(v).decode() for k, v in data.items()}}


def _configs(runtime: WebhookRuntime, bundle: bytes | None) -> dict[str, dict[str, Any]]:
    o = runtime.options
    objs = registration.render(registration.UrlTarget(o.base_url(runtime.server.port)),
                               ca_bundle=bundle, mutating_name=o.mutating_configuration,
                               validating_name=o.validating_configuration)
    for obj in objs:
        obj["metadata"]["resourceVersion"] = "1"
    return {obj["kind"]: obj for obj in objs}


@pytest_asyncio.fixture
async def runtime(request: pytest.FixtureRequest) -> AsyncIterator[WebhookRuntime]:
    register = getattr(request, "param", True)
    options = WebhookOptions(namespace="lws-system", bind_address="127.0.0.1", port=0,
                             webhook_host="127.0.0.1", register_webhooks=register)
    out = WebhookRuntime(QuietKube(), options)  # type: ignore[arg-type]
    out.reserve_port()
    yield out
    await out.server.stop()


async def _serve(runtime: WebhookRuntime, data: dict[str, bytes]) -> None:
    """As a certificate pass leaves it: the Secret watched, its certificate served."""
    runtime.certs.watched[SECRET].store(_secret(data))
    await runtime._serve_certificate(data[certs.TLS_CERT_KEY], data[certs.TLS_KEY_KEY])
    runtime.certs.served = data[certs.TLS_CERT_KEY]


async def test_nothing_serves_before_a_certificate(runtime: WebhookRuntime) -> None:
    assert await runtime.in_place() == "the admission listener does not serve a certificate yet"


async def test_registration_mode_waits_for_both_configurations(
        runtime: WebhookRuntime) -> None:
    data = _data(runtime.options)
    await _serve(runtime, data)
    assert await runtime.in_place() == (
        "MutatingWebhookConfiguration lws-mutating-webhook-configuration is not registered yet")
    configs = _configs(runtime, data[certs.CA_CERT_KEY])
    runtime.certs.watched[MUTATING].store(configs[MUTATING])
    assert await runtime.in_place() == ("ValidatingWebhookConfiguration "
                                        "lws-validating-webhook-configuration is not "
                                        "registered yet")
    runtime.certs.watched[VALIDATING].store(configs[VALIDATING])
    assert await runtime.in_place() is None


async def test_a_configuration_with_another_ca_is_not_in_place(
        runtime: WebhookRuntime) -> None:
    data = _data(runtime.options)
    await _serve(runtime, data)
    for obj in _configs(runtime, _data(runtime.options)[certs.CA_CERT_KEY]).values():
        runtime.certs.watched[obj["kind"]].store(obj)
    problem = await runtime.in_place()
    assert problem is not None
    assert "not registered with the current CA yet" in problem


@pytest.mark.parametrize("runtime", [False], indirect=True)
async def test_injection_mode_checks_the_handshake_with_the_configured_ca(
        runtime: WebhookRuntime) -> None:
    """Configurations someone else installed (``--no-register-webhooks``, the chart's Service
    mode): absent ones are not waited for; present ones must carry a caBundle, and the served
    certificate must verify with it for the name the API server checks."""
    data = _data(runtime.options)
    await _serve(runtime, data)
    assert await runtime.in_place() is None  # none installed: the Secret's CA is checked
    configs = _configs(runtime, None)
    runtime.certs.watched[MUTATING].store(configs[MUTATING])
    problem = await runtime.in_place()
    assert problem is not None
    assert "has no caBundle yet" in problem
    other = _configs(runtime, _data(runtime.options)[certs.CA_CERT_KEY])[MUTATING]
    other["metadata"]["resourceVersion"] = "2"
    runtime.certs.watched[MUTATING].store(other)
    problem = await runtime.in_place()
    assert problem is not None
    assert "does not verify for 127.0.0.1 with the configured caBundle" in problem
    right = _configs(runtime, data[certs.CA_CERT_KEY])[MUTATING]
    right["metadata"]["resourceVersion"] = "3"
    runtime.certs.watched[MUTATING].store(right)
    assert await runtime.in_place() is None


@pytest.mark.parametrize("runtime", [False], indirect=True)
async def test_a_certificate_for_another_name_is_not_in_place(
        runtime: WebhookRuntime) -> None:
    """The API server checks the URL's host (local mode) against the certificate."""
    elsewhere = WebhookOptions(namespace="lws-system", webhook_host="10.0.0.7")
    data = _data(elsewhere)
    await _serve(runtime, data)
    problem = await runtime.in_place()
    assert problem is not None
    assert "does not verify for 127.0.0.1" in problem
