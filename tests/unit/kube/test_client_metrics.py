"""Request accounting in ``KubeClient`` (lws_operator.kube.client): the verb and resource parsed
from a request (table-driven), and what one request adds to the metrics and the limiter.

The transport here is a stand-in that answers with a fixed status: what is under test is our
bookkeeping around it. tests/integration/test_client_limits.py checks the same counts against
a real API server.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from lws_operator.kube.client import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    ApiException,
    KubeClient,
    request_info,
)
from lws_operator.kube.metrics import ClientMetrics, new_registry
from lws_operator.kube.ratelimit import TokenBucket

NS = "/api/v1/namespaces/team"
APPS = "/apis/apps/v1/namespaces/team"
LWS = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/team"


@pytest.mark.parametrize(("method", "path", "query", "content_type", "expected"), [
    # core group, namespaced
    ("GET", f"{NS}/pods", None, "", ("list", "pods")),
    ("GET", f"{NS}/pods", {"watch": "true"}, "", ("watch", "pods")),
    ("GET", f"{NS}/pods?watch=1&resourceVersion=5", None, "", ("watch", "pods")),
    ("GET", f"{NS}/pods", {"watch": "false"}, "", ("list", "pods")),
    ("GET", f"{NS}/pods/p-0", None, "", ("get", "pods")),
    ("GET", f"{NS}/pods/p-0/log", None, "", ("get", "pods/log")),
    ("POST", f"{NS}/pods", None, "application/json", ("create", "pods")),
    ("PUT", f"{NS}/pods/p-0", None, "application/json", ("update", "pods")),
    ("PUT", f"{NS}/pods/p-0/status", None, "application/json", ("update", "pods/status")),
    ("PATCH", f"{NS}/pods/p-0/status", None, MERGE_PATCH, ("patch", "pods/status")),
    ("PATCH", f"{NS}/pods/p-0", None, JSON_PATCH, ("patch", "pods")),
    ("DELETE", f"{NS}/pods/p-0", None, "", ("delete", "pods")),
    ("DELETE", f"{NS}/pods", {"labelSelector": "a=b"}, "", ("deletecollection", "pods")),
    ("POST", f"{NS}/pods/p-0/eviction", None, "application/json", ("create", "pods/eviction")),
    ("GET", f"{NS}/services/s", None, "", ("get", "services")),
    ("POST", f"{NS}/events", None, "application/json", ("create", "events")),
    ("GET", f"{NS}/secrets/webhook-cert", None, "", ("get", "secrets")),
    # cluster-wide collections and cluster-scoped resources
    ("GET", "/api/v1/pods", None, "", ("list", "pods")),
    ("GET", "/api/v1/pods", {"watch": "true"}, "", ("watch", "pods")),
    ("GET", "/api/v1/nodes/n1", None, "", ("get", "nodes")),
    ("PATCH", "/api/v1/nodes/n1/status", None, MERGE_PATCH, ("patch", "nodes/status")),
    # namespaces themselves, and their own subresources
    ("GET", "/api/v1/namespaces", None, "", ("list", "namespaces")),
    ("POST", "/api/v1/namespaces", None, "application/json", ("create", "namespaces")),
    ("GET", "/api/v1/namespaces/team", None, "", ("get", "namespaces")),
    ("DELETE", "/api/v1/namespaces/team", None, "", ("delete", "namespaces")),
    ("PUT", "/api/v1/namespaces/team/status", None, "", ("update", "namespaces/status")),
    ("PUT", "/api/v1/namespaces/team/finalize", None, "", ("update", "namespaces/finalize")),
    # named groups
    ("GET", f"{APPS}/statefulsets", None, "", ("list", "statefulsets")),
    ("PATCH", f"{APPS}/statefulsets/lws-0", None, APPLY_PATCH, ("apply", "statefulsets")),
    ("PATCH", f"{APPS}/statefulsets/lws-0", None, f"{APPLY_PATCH}; charset=utf-8",
     ("apply", "statefulsets")),
    ("PATCH", f"{APPS}/statefulsets/lws-0/scale", None, MERGE_PATCH,
     ("patch", "statefulsets/scale")),
    ("POST", f"{APPS}/controllerrevisions", None, "application/json",
     ("create", "controllerrevisions")),
    ("GET", f"{LWS}/leaderworkersets/lws", None, "", ("get", "leaderworkersets")),
    ("PUT", f"{LWS}/leaderworkersets/lws/status", None, "application/json",
     ("update", "leaderworkersets/status")),
    ("PATCH", f"{LWS}/leaderworkersets/lws/status", None, APPLY_PATCH,
     ("apply", "leaderworkersets/status")),
    ("GET", "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets", {"watch": "true"}, "",
     ("watch", "leaderworkersets")),
    ("GET", "/apis/coordination.k8s.io/v1/namespaces/lws-system/leases/lws", None, "",
     ("get", "leases")),
    ("PUT", "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/lws", None,
     "application/json", ("update", "mutatingwebhookconfigurations")),
    # the deprecated /watch/ prefix
    ("GET", "/apis/apps/v1/watch/namespaces/team/statefulsets", None, "",
     ("watch", "statefulsets")),
    ("GET", "/api/v1/watch/pods", None, "", ("watch", "pods")),
    # lower-case methods and trailing slashes
    ("get", f"{NS}/pods/", None, "", ("list", "pods")),
    # non-resource paths: method only, empty resource
    ("GET", "/metrics", None, "", ("get", "")),
    ("GET", "/healthz", None, "", ("get", "")),
    ("GET", "/version", None, "", ("get", "")),
    ("GET", "/api", None, "", ("get", "")),
    ("GET", "/api/v1", None, "", ("get", "")),
    ("GET", "/apis/apps/v1", None, "", ("get", "")),
    ("GET", "/openapi/v3", None, "", ("get", "")),
    ("POST", "/apis/authentication.k8s.io/v1/tokenreviews", None, "application/json",
     ("create", "tokenreviews")),
])
def test_request_info(method: str, path: str, query: dict[str, str] | None, content_type: str,
                      expected: tuple[str, str]) -> None:
    assert request_info(method, path, query, content_type) == expected


# --- one KubeClient request, on a stand-in transport ----------------------------------------

@dataclass
class Response:
    status: int
    reason: str = "OK"
    data: bytes = b"{}"

    async def read(self) -> bytes:
        return self.data


@dataclass
class Configuration:
    host: str = "https://127.0.0.1:6443"


@dataclass
class Transport:
    """``ApiClient``'s two methods ``KubeClient`` uses, answering from a script."""

    answers: list[int | BaseException]
    configuration: Configuration = field(default_factory=Configuration)
    sent: list[tuple[str, str]] = field(default_factory=list)
    before_send: list[float] = field(default_factory=list)
    limiter: TokenBucket | None = None

    async def param_serialize(self, *, method: str, resource_path: str, query_params: Any,
                              header_params: dict[str, str], body: Any,
                              auth_settings: list[str]) -> tuple[Any, ...]:
        return (method, resource_path, header_params, body, [])

    async def call_api(self, method: str, url: str, headers: Any, body: Any, post: Any,
                       _request_timeout: float) -> Response:
        self.sent.append((method, url))
        if self.limiter is not None:
            self.before_send.append(self.limiter.tokens())
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return Response(answer, data=b"{}" if answer < 400 else b'{"message": "no"}')


def client_with(answers: list[int | BaseException], *, limiter: TokenBucket | None = None,
                ) -> tuple[KubeClient, Transport, CollectorRegistry]:
    registry = CollectorRegistry()
    transport = Transport(answers, limiter=limiter)
    kube = KubeClient(transport, limiter=limiter,  # type: ignore[arg-type]
                      metrics=ClientMetrics.for_registry(registry))
    return kube, transport, registry


def rest(registry: CollectorRegistry, code: str, method: str) -> float | None:
    return registry.get_sample_value(
        "rest_client_requests_total", {"code": code, "method": method, "host": "127.0.0.1:6443"})


def api(registry: CollectorRegistry, verb: str, resource: str, code: str) -> float | None:
    return registry.get_sample_value(
        "lws_operator_api_requests_total", {"verb": verb, "resource": resource, "code": code})


async def test_every_request_is_counted_by_code_method_host_and_by_verb_resource() -> None:
    kube, _, registry = client_with([200, 201, 404, 409, 200])
    await kube.request("GET", f"{APPS}/statefulsets/lws-0")
    await kube.request("POST", f"{NS}/pods", body={})
    assert await kube.get(f"{NS}/pods/gone") is None
    with pytest.raises(ApiException):
        await kube.request("PATCH", f"{LWS}/leaderworkersets/lws/status", body={},
                           content_type=APPLY_PATCH)
    await kube.raw("GET", "/metrics")
    assert rest(registry, "200", "GET") == 2
    assert rest(registry, "201", "POST") == 1
    assert rest(registry, "404", "GET") == 1
    assert rest(registry, "409", "PATCH") == 1
    assert api(registry, "get", "statefulsets", "200") == 1
    assert api(registry, "create", "pods", "201") == 1
    assert api(registry, "get", "pods", "404") == 1
    assert api(registry, "apply", "leaderworkersets/status", "409") == 1
    assert api(registry, "get", "", "200") == 1


async def test_a_failed_connection_is_counted_as_an_error() -> None:
    kube, _, registry = client_with([ConnectionRefusedError("refused"),
                                     ApiException(status=429, reason="Too Many Requests")])
    with pytest.raises(ConnectionRefusedError):
        await kube.request("GET", f"{NS}/pods")
    with pytest.raises(ApiException):
        await kube.request("GET", f"{NS}/pods")
    assert rest(registry, "<error>", "GET") == 1
    assert api(registry, "list", "pods", "<error>") == 1
    assert rest(registry, "429", "GET") == 1


async def test_no_metrics_and_no_limiter_keep_the_old_behaviour() -> None:
    kube = KubeClient(Transport([200]))  # type: ignore[arg-type]
    assert await kube.request("GET", f"{NS}/pods") == {}


async def test_the_limiter_is_awaited_before_every_request() -> None:
    limiter = TokenBucket(1, 3)
    kube, transport, registry = client_with([200, 200, 200], limiter=limiter)
    for _ in range(3):
        await kube.request("GET", f"{NS}/pods")
    # Each request had taken its token before it was sent: 2, 1, 0 left (give or take refill).
    assert [round(t) for t in transport.before_send] == [2, 1, 0]
    waits = registry.get_sample_value(
        "rest_client_rate_limiter_duration_seconds_count",
        {"verb": "GET", "host": "127.0.0.1:6443"})
    assert waits == 3


async def test_a_request_waits_for_a_token_when_the_bucket_is_empty() -> None:
    """With a manual clock: the request is not sent until its token is due."""
    now = [0.0]
    release = asyncio.Event()

    async def sleep(delay: float) -> None:
        await release.wait()
        now[0] += delay

    limiter = TokenBucket(5, 1, clock=lambda: now[0], sleep=sleep)
    kube, transport, _ = client_with([200, 200], limiter=limiter)
    await kube.request("GET", f"{NS}/pods")
    second = asyncio.create_task(kube.request("GET", f"{NS}/pods"))
    for _ in range(10):
        await asyncio.sleep(0)
    assert len(transport.sent) == 1
    release.set()
    await second
    assert len(transport.sent) == 2


def test_new_registry_has_process_metrics_and_no_created_series() -> None:
    registry = new_registry()
    metrics = ClientMetrics.for_registry(registry)
    metrics.requests.labels("200", "GET", "h").inc()
    names = {s.name for family in registry.collect() for s in family.samples}
    assert "rest_client_requests_total" in names
    assert not any(name.endswith("_created") for name in names)
    assert any(name.startswith("python_gc_") for name in names)
    assert any(name.startswith("python_info") for name in names)
    # one family set per registry, however many clients ask for it
    assert ClientMetrics.for_registry(registry) is metrics
