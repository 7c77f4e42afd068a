"""The ``/metrics`` endpoint as upstream serves it: HTTPS on ``:8443``, every scrape
authenticated and authorized through the API server (upstream's servers (cmd/main.go)), or plain
HTTP when asked.

Upstream's health port serves probes only; metrics live on a port of their own so that exposing
them to a scraper never exposes them to everyone who can reach the probes. With authentication
on, a scrape must carry a bearer token that a TokenReview accepts and whose user a
SubjectAccessReview allows ``get`` on the non-resource URL ``/metrics`` (the ``metrics-reader``
ClusterRole grants that). Answers: 401 without a token or with one the API server rejects, 403
when the user may not read metrics, 500 when the API server cannot be asked.

Review results are cached for a short time per token (a SHA-256 of it, never the token itself):
Prometheus scrapes every few seconds with the same token, and two API calls per scrape would
be noise in the API server's audit log. Denials are cached for less time than grants, so a newly
granted role works soon.

The serving certificate is either given (a directory holding ``tls.crt`` and ``tls.key``, e.g. a
mounted cert-manager Secret, reloaded when its files change) or generated at start: a throwaway
self-signed CA and a certificate for ``localhost``, the host name and 127.0.0.1, which scrapers
accept with ``insecure_skip_verify`` as they do controller-runtime's self-signed one. HTTP/2 is
not offered.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from lws_operator.admission.listener import listen
from lws_operator.kube import cert_planner
from lws_operator.kube.client import ApiException, KubeClient
from lws_operator.kube.tls_reads import read_records
from lws_operator.logic.runtime import certs

log = logging.getLogger(__name__)

METRICS_PATH = "/metrics"
TOKEN_REVIEW = "/apis/authentication.k8s.io/v1/tokenreviews"
ACCESS_REVIEW = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
DEFAULT_BIND = ":8443"


@dataclass(frozen=True)
class MetricsServerOptions:
    host: str
    port: int
    # False: plain HTTP and no authentication (``make run``, a scraper on the same host).
    secure: bool = True
    # A directory with the serving certificate; None: a self-signed one made at start.
    cert_dir: str | None = None
    cert_name: str = "tls.crt"
    key_name: str = "tls.key"
    # How long a granted / a denied review result is reused for the same token.
    allow_ttl: float = 60.0
    deny_ttl: float = 10.0
    # How often a given certificate's files are checked for a renewal (cert-manager rewrites
    # the mounted Secret): new connections then get the new certificate, no restart needed.
    cert_reload_interval: float = 30.0


@dataclass(frozen=True)
class _Verdict:
    status: int  # 200, 401 or 403
    reason: str
    until: float


class ScrapeAuthorizer:
    """TokenReview then SubjectAccessReview of a bearer token, cached per token."""

    def __init__(self, kube: KubeClient, allow_ttl: float, deny_ttl: float,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        self.allow_ttl = allow_ttl
        self.deny_ttl = deny_ttl
        self.clock = clock
        self._cache: dict[str, _Verdict] = {}
        self.reviews = 0  # API round trips made, for tests of the cache

    async def check(self, authorization: str | None) -> tuple[int, str]:
        """(200 | 401 | 403, why) for an ``Authorization`` header value; ``ApiException``
        when the API server cannot answer (nothing is cached then)."""
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            return 401, "a bearer token is required"
        digest = hashlib.sha256(token.encode()).hexdigest()
        now = self.clock()
        cached = self._cache.get(digest)
        if cached is not None and cached.until > now:
            return cached.status, cached.reason
        status, reason = await self._review(token)
        ttl = self.allow_ttl if status == 200 else self.deny_ttl
        if len(self._cache) > 1000:  # many distinct tokens: drop what has expired
            self._cache = {k: v for k, v in self._cache.items() if v.until > now}
        self._cache[digest] = _Verdict(status, reason, now + ttl)
        return status, reason

    async def _review(self, token: str) -> tuple[int, str]:
        self.reviews += 1
        review = await self.kube.request("POST", TOKEN_REVIEW, body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}})
        found = review.get("status") or {}
        if not found.get("authenticated"):
            return 401, "the token was not accepted: " + str(found.get("error") or "unknown")
        user = found.get("user") or {}
        access = await self.kube.request("POST", ACCESS_REVIEW, body={
            "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": {"user": user.get("username"), "uid": user.get("uid"),
                     "groups": user.get("groups") or [], "extra": user.get("extra") or {},
                     "nonResourceAttributes": {"path": METRICS_PATH, "verb": "get"}}})
        verdict = access.get("status") or {}
        if not verdict.get("allowed"):
            return 403, (f"user {user.get('username')!r} may not get {METRICS_PATH}"
                         + (f": {verdict['reason']}" if verdict.get("reason") else ""))
        return 200, "allowed"


def self_signed_context() -> ssl.SSLContext:
    """A server context with a fresh self-signed certificate for this host, made out of
    process so that ``cryptography`` never loads into the operator (``kube.cert_planner``)."""
    data = cert_planner.self_signed(sorted({"localhost", socket.gethostname()}), ["127.0.0.1"])
    with tempfile.TemporaryDirectory(prefix="lws-metrics-") as tmp:
        cert_path, key_path = Path(tmp, "tls.crt"), Path(tmp, "tls.key")
        cert_path.write_bytes(data[certs.TLS_CERT_KEY] + data[certs.CA_CERT_KEY])
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "wb") as out:
            out.write(data[certs.TLS_KEY_KEY])
        return _context(str(cert_path), str(key_path))


def _context(cert_file: str, key_file: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])  # no HTTP/2, as upstream (a CVE mitigation)
    context.load_cert_chain(cert_file, key_file)
    return read_records(context)  # one record's plaintext per read (kube.tls_reads)


class MetricsServer:
    """Serves ``registry`` on ``/metrics`` per ``options``."""

    def __init__(self, registry: CollectorRegistry, options: MetricsServerOptions,
                 kube: KubeClient | None = None,
                 refresh: Callable[[], Awaitable[None]] | None = None) -> None:
        """``refresh``: awaited before each scrape is answered (the admission process's
        metrics are fetched then, ``admission.process``)."""
        self.refresh = refresh
        if options.secure and kube is None:
            raise ValueError("secure metrics need an API client for the access reviews")
        self.options = options
        self.port = options.port
        self.authorizer = (ScrapeAuthorizer(kube, options.allow_ttl, options.deny_ttl)
                           if options.secure and kube is not None else None)
        self._handler = make_aiohttp_handler(registry)
        self._runner: web.AppRunner | None = None
        self._reloader: asyncio.Task[None] | None = None
        app = web.Application()
        app.router.add_get(METRICS_PATH, self._metrics)
        self.app = app

    @property
    def scheme(self) -> str:
        return "https" if self.options.secure else "http"

    def _cert_files(self) -> tuple[str, str] | None:
        if not self.options.cert_dir:
            return None
        return (os.path.join(self.options.cert_dir, self.options.cert_name),
                os.path.join(self.options.cert_dir, self.options.key_name))

    def _ssl_context(self) -> ssl.SSLContext | None:
        if not self.options.secure:
            return None
        files = self._cert_files()
        return _context(*files) if files else self_signed_context()

    @staticmethod
    def _stamp(files: tuple[str, str]) -> tuple[float, ...]:
        try:
            return tuple(os.stat(f).st_mtime_ns for f in files)
        except OSError:
            return ()

    async def _reload_certs(self, context: ssl.SSLContext, files: tuple[str, str]) -> None:
        """Load the certificate again into the live context whenever its files change (a
        half-written pair fails to load and is retried at the next check)."""
        seen = self._stamp(files)
        while True:
            await asyncio.sleep(self.options.cert_reload_interval)
            stamp = self._stamp(files)
            if not stamp or stamp == seen:
                continue
            try:
                await asyncio.to_thread(context.load_cert_chain, *files)
            except (OSError, ssl.SSLError) as exc:
                log.warning("metrics certificate not reloaded yet: %s", exc)
                continue
            seen = stamp
            log.info("metrics serving certificate reloaded from %s", files[0])

    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        if self.authorizer is not None:
            try:
                status, reason = await self.authorizer.check(request.headers.get("Authorization"))
            except (TimeoutError, ApiException, OSError) as exc:
                log.warning("metrics scrape: the access review failed: %s", exc)
                return web.Response(status=500, text="the access review failed\n")
            if status != 200:
                log.info("metrics scrape from %s refused (%d): %s", request.remote, status,
                         reason)
                return web.Response(
                    status=status, text=("Unauthorized" if status == 401 else "Forbidden") + "\n")
        if self.refresh is not None:
            await self.refresh()
        return await self._handler(request)

    async def start(self) -> None:
        context = await asyncio.to_thread(self._ssl_context)
        self._runner, self.port = await listen(self.app, self.options.host, self.options.port,
                                               ssl_context=context)
        files = self._cert_files()
        if context is not None and files is not None:
            self._reloader = asyncio.create_task(self._reload_certs(context, files),
                                                 name="metrics-cert-reload")
        log.info("Serving metrics server on %s://%s:%d%s%s", self.scheme, self.options.host,
                 self.port, METRICS_PATH,
                 " (authenticated and authorized through the API server)"
                 if self.options.secure else "")

    async def stop(self) -> None:
        if self._reloader is not None:
            self._reloader.cancel()
            await asyncio.gather(self._reloader, return_exceptions=True)
            self._reloader = None
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()


def metrics_server(registry: CollectorRegistry, kube: KubeClient | None,
                   bind: tuple[str, int] | None, secure: bool, cert_dir: str | None = None,
                   cert_name: str = "tls.crt", key_name: str = "tls.key",
                   refresh: Callable[[], Awaitable[None]] | None = None) -> MetricsServer | None:
    """The server the options ask for (``bind`` as ``api.config.parse_bind_address`` gives it,
    the host "" for every interface); None for ``--metrics-bind-address=0``."""
    if bind is None:
        return None
    return MetricsServer(registry, MetricsServerOptions(
        host=bind[0] or "0.0.0.0", port=bind[1], secure=secure, cert_dir=cert_dir,
        cert_name=cert_name, key_name=key_name), kube, refresh)
