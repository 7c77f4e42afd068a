"""A dict-in, dict-out facade over ``kubernetes.aio``'s ApiClient.

The generated typed API round-trips bodies through pydantic models, which drops fields it does not
know and rejects integer quantities (``cpu: 2`` fails validation), and its PATCH silently turns a
dict body
into a strategic-merge patch. So we use only the client's transport, authentication and TLS
(``param_serialize`` + ``call_api``), send JSON we built ourselves with an explicit content type,
and decode answers with ``json``. Errors are the library's own ``ApiException``, with ``status``
and the API server's ``Status`` body.

``raw`` is the single path every call takes, so it is where the process-wide rate limiter is
awaited and where every request is counted (``ClientMetrics``), by HTTP method and status as
controller-runtime counts them and by Kubernetes verb and resource (``request_info``) so one can
tell, say, status writes of LeaderWorkerSets from pod patches.

The proxy environment (``HTTPS_PROXY``, ``HTTP_PROXY``, ``NO_PROXY``) is read once, when the
client connects (``resolve_proxy``), not by aiohttp on every request: the library's session
trusts the environment, which made every request look up proxies and ``~/.netrc`` in a thread
of the default executor (a measurable share of the operator's CPU under load). The server's
address does not change, so neither does the answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import ssl
import time
from collections.abc import AsyncIterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import parse_qs, urlsplit

import aiohttp
from aiohttp import BasicAuth
from aiohttp.helpers import get_env_proxy_for_url
from kubernetes.aio import client, config
from kubernetes.aio.client.exceptions import ApiException
from yarl import URL

from lws_operator.api.json_codec import loads  # re-exported: the watches decode with it
from lws_operator.kube.ratelimit import TokenBucket
from lws_operator.kube.tls_reads import read_records

if TYPE_CHECKING:  # annotations only: the plugin's own distribution has no prometheus_client
    from lws_operator.kube.metrics import ClientMetrics

__all__ = [
    "APPLY_PATCH",
    "MERGE_PATCH",
    "STRATEGIC_MERGE_PATCH",
    "ApiException",
    "KubeClient",
    "in_cluster",
    "is_status",
    "loads",
    "request_info",
    "resolve_proxy",
]

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster() -> bool:
    """Whether we run in a pod with a service account (the default source of credentials)."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST")) and (
        SERVICE_ACCOUNT_DIR / "token").exists()


def in_cluster_namespace() -> str | None:
    """The pod's namespace, from its service-account mount."""
    path = SERVICE_ACCOUNT_DIR / "namespace"
    return path.read_text().strip() if path.exists() else None


def is_status(exc: BaseException, *codes: int) -> bool:
    return isinstance(exc, ApiException) and exc.status in codes


def resolve_proxy(conf: client.Configuration) -> None:
    """Settle ``conf``'s proxy once, as aiohttp's ``trust_env`` would for each request to its
    server (the module docstring): a proxy the kubeconfig names (``proxy-url``) stands;
    otherwise the environment's proxy for the server's scheme, unless ``NO_PROXY`` exempts
    the server, with the credentials of the proxy's URL (or of ``~/.netrc``) sent as its
    ``Proxy-Authorization``. The session then stops consulting the environment."""
    if not conf.proxy and conf.host:
        try:
            proxy, auth = get_env_proxy_for_url(URL(conf.host))
        except LookupError:
            pass  # no proxy for this server
        else:
            conf.proxy = str(proxy)
            if isinstance(auth, BasicAuth):
                conf.proxy_headers = {**(conf.proxy_headers or {}),
                                      "Proxy-Authorization": auth.encode()}
    conf.client_session_kwargs = {**(conf.client_session_kwargs or {}), "trust_env": False}


# The code a request is counted with when no HTTP answer came.
NO_ANSWER = "<error>"
class KubeClient:
    """Raw REST calls with the credentials of a kubeconfig or of the pod's service account."""

    def __init__(self, api: client.ApiClient, *, limiter: TokenBucket | None = None,
                 metrics: ClientMetrics | None = None) -> None:
        """``limiter``: awaited before every request (shared by every client of the process
        to make it a global budget). ``metrics``: where requests are counted."""
        self.api = api
        context = getattr(getattr(api, "rest_client", None), "ssl_context", None)
        if isinstance(context, ssl.SSLContext):  # aiohttp wraps each connection with it
            read_records(context)  # (kube.tls_reads)
        self.limiter = limiter
        self.metrics = metrics
        self.host = urlsplit(api.configuration.host or "").netloc

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, context: str | None = None, *,
                      limiter: TokenBucket | None = None, metrics: ClientMetrics | None = None,
                      ) -> KubeClient:
        """``kubeconfig`` if given; else in-cluster credentials inside a pod; else
        ``$KUBECONFIG`` or ``~/.kube/config``."""
        conf = client.Configuration()
        if kubeconfig is None and in_cluster():
            config.load_incluster_config(client_configuration=conf, try_refresh_token=True)
        else:
            from lws_operator.kube.connection import load_configuration

            # CredentialsError: one line naming the kubeconfig or context
            await load_configuration(kubeconfig or os.environ.get("KUBECONFIG") or None,
                                     context, conf)
        resolve_proxy(conf)
        return cls(client.ApiClient(configuration=conf), limiter=limiter, metrics=metrics)

    async def close(self) -> None:
        await self.api.close()

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        content_type: str = JSON,
        timeout: float = 30.0,  # noqa: ASYNC109 - passed down to the HTTP client
    ) -> dict[str, Any]:
        """One call; the decoded JSON answer, or ``ApiException`` for a non-2xx status."""
        data = await self.raw(method, path, body=body, query=query, content_type=content_type,
                              accept=JSON, timeout=timeout)
        decoded: dict[str, Any] = loads(data) if data else {}
        return decoded

    async def _token(self, method: str) -> None:
        """Wait for the global limiter's token (every request does, watches included) and
        observe the wait (``rest_client_rate_limiter_duration_seconds``: its count is the
        number of requests started)."""
        if self.limiter is None:
            return
        waited_from = time.monotonic()
        await self.limiter.acquire()
        if self.metrics is not None:
            self.metrics.rate_limiter_duration.labels(method, self.host).observe(
                time.monotonic() - waited_from)

    async def raw(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        query: Mapping[str, str] | None = None,
        content_type: str = JSON,
        accept: str = "*/*",
        timeout: float = 30.0,  # noqa: ASYNC109 - passed down to the HTTP client
    ) -> bytes:
        """One call; the answer's bytes (for non-JSON endpoints such as ``/metrics``)."""
        method = method.upper()
        await self._token(method)
        params = await self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=list((query or {}).items()) or None,
            header_params={"Content-Type": content_type, "Accept": accept},
            body=body,
            auth_settings=["BearerToken"],
        )
        code = NO_ANSWER
        try:
            response = await self.api.call_api(*params, _request_timeout=timeout)
            code = str(response.status)
            data: bytes = await response.read()
        except ApiException as exc:  # raised by the library itself, e.g. a retried 429
            code = str(exc.status)
            raise
        finally:
            if self.metrics is not None:
                self._count(method, path, query, content_type, code)
        if not 200 <= response.status < 300:
            raise ApiException(status=response.status, reason=response.reason,
                               body=data.decode(errors="replace"))
        return data

    def _count(self, method: str, path: str, query: Mapping[str, str] | None,
               content_type: str, code: str) -> None:
        assert self.metrics is not None
        self.metrics.requests.labels(code, method, self.host).inc()
        verb, resource = request_info(method, path, query, content_type)
        self.metrics.api_requests.labels(verb, resource, code).inc()

    @contextlib.asynccontextmanager
    async def stream(self, path: str, *, query: Mapping[str, str] | None = None,
                     read_timeout: float | None = None) -> AsyncIterator[AsyncIterator[bytes]]:
        """A GET whose answer is read line by line as it arrives (a watch): yields an iterator
        of the lines (``lines_of``), which ends when the server ends the answer. Counted,
        rate-limited like :meth:`raw` (one request, however long it lasts), as
        far as this client counts and limits; ``ApiException`` for a non-2xx
        status. ``read_timeout``: the longest silence tolerated (``TimeoutError``)."""
        await self._token("GET")
        params = await self.api.param_serialize(
            method="GET", resource_path=path, query_params=list((query or {}).items()) or None,
            header_params={"Accept": JSON}, auth_settings=["BearerToken"])
        code = NO_ANSWER
        try:
            response = await self.api.call_api(*params, _request_timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=30.0, sock_read=read_timeout))
            code = str(response.status)
        finally:
            if self.metrics is not None:
                self._count("GET", path, query, JSON, code)
        try:
            if not 200 <= response.status < 300:
                data = await response.read()
                raise ApiException(status=response.status, reason=response.reason,
                                   body=data.decode(errors="replace"))
            yield lines_of(response.response.content)
        finally:
            response.response.release()

    async def get(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``, or None if it does not exist."""
        try:
            return await self.request("GET", path)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise


# Bytes read from a streamed answer at a time, at most.
STREAM_READ_SIZE = 1 << 20


class Readable(Protocol):
    """What ``lines_of`` reads: an aiohttp response's ``content``."""

    async def read(self, n: int = -1) -> bytes: ...


async def lines_of(content: Readable) -> AsyncIterator[bytes]:
    """The lines of a streamed answer as they arrive, without their newlines. Split from the
    chunks read, not read with ``readline``, whose longest line is aiohttp's buffer limit
    (128 KiB), less than one watch event can hold (a ControllerRevision holds a set's whole
    templates); and one read brings every line that has arrived."""
    parts: list[bytes] = []  # the start of a line not complete yet
    while chunk := await content.read(STREAM_READ_SIZE):
        if b"\n" not in chunk:
            parts.append(chunk)
            continue
        first, *others = chunk.split(b"\n")
        parts.append(first)
        yield b"".join(parts)
        *complete, last = others
        for line in complete:
            yield line
        parts = [last] if last else []
    if parts:
        yield b"".join(parts)


def status_message(exc: ApiException) -> str:
    """The API server's message inside an error, else the HTTP reason."""
    try:
        body = json.loads(exc.body or "")
        return str(body.get("message") or exc.reason)
    except (ValueError, AttributeError):
        return str(exc.reason)


# After a namespace's name, these segments are subresources of the namespace itself, not a
# resource inside it (``/api/v1/namespaces/foo/status``, not a resource called "status").
_NAMESPACE_SUBRESOURCES = frozenset({"status", "finalize"})


def request_info(method: str, path: str, query: Mapping[str, str] | None = None,
                 content_type: str = JSON) -> tuple[str, str]:
    """The Kubernetes verb and resource (``pods``, ``pods/status``) of a request, as the API
    server's authorizer would see them. Non-resource paths (``/metrics``, discovery) give the
    lower-case HTTP method and an empty resource, which keeps the label set small."""
    method = method.upper()
    split = urlsplit(path)
    located = _resource_segments(split.path)
    if located is None:
        return method.lower(), ""
    parts, watch = located
    params = {k: v[-1] for k, v in parse_qs(split.query).items()}
    params.update(query or {})
    watch = watch or params.get("watch", "").lower() in ("true", "1")
    resource = parts[0] if len(parts) < 3 else f"{parts[0]}/{parts[2]}"
    return _verb(method, len(parts) == 1, watch, content_type), resource


def _resource_segments(path: str) -> tuple[list[str], bool] | None:
    """The segments of ``path`` from the resource on (after ``/api/v1``, ``/apis/GROUP/VERSION``
    and a namespace), and whether the deprecated ``/watch/`` prefix came before them; None for
    a path that names no resource."""
    parts = [p for p in path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        parts = parts[2:]  # /api/v1/...
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        parts = parts[3:]  # /apis/group/version/...
    else:
        return None
    watch = parts[:1] == ["watch"]
    if watch:
        parts = parts[1:]
    if parts[:1] == ["namespaces"] and len(parts) >= 3 \
            and parts[2] not in _NAMESPACE_SUBRESOURCES:
        parts = parts[2:]
    return (parts, watch) if parts else None


# The verbs of the methods whose verb depends on nothing else.
_VERBS = {"POST": "create", "PUT": "update"}


def _verb(method: str, collection: bool, watch: bool, content_type: str) -> str:
    """The authorizer's verb of an upper-case HTTP ``method`` on a resource or a collection."""
    if method == "GET":
        return "watch" if watch else "list" if collection else "get"
    if method == "PATCH":
        return "apply" if content_type.split(";")[0].strip() == APPLY_PATCH else "patch"
    if method == "DELETE":
        return "deletecollection" if collection else "delete"
    return _VERBS.get(method, method.lower())
