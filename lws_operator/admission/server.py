"""The HTTPS admission server: upstream's webhook paths (LeaderWorkerSet, pod, DisaggregatedSet)
on one HTTP/1.1 listener (``http_server``: httptools on an asyncio protocol).

Why our own server rather than kopf's ``@kopf.on.mutate/validate`` handlers:

* Answers must match controller-runtime's exactly (``review``): a refusal is a 403 with reason
  ``Forbidden`` and the error text as message, a malformed request a 400, warnings ride on an
  allowed answer. kopf's ``AdmissionError`` carries only a message and a code.
* Latency: kopf routes each review through resource lookup, memo recall, a full-object diff and
  its handler-execution machinery, which alone took more than the pod webhook's latency budget
  (docs/performance.md). Here a request is one dict lookup and one pure function.
* Certificates: kopf's server restarts its listener when certificate files change. Here the
  certificate is replaced inside the live ``SSLContext`` (:class:`ServingTLS`): connections made
  after the swap get the new certificate, open ones finish undisturbed, nothing is refused.
* Readiness does not wait for kopf's resource scan.

It runs on whatever event loop starts it: the admission process's own (``admission.child``), or
the caller's in tests. It speaks HTTP/1.1 only, and ALPN offers nothing else (upstream's servers
(cmd/main.go) disable HTTP/2; ``http_server`` says why we do not offer it either).
"""

from __future__ import annotations

import inspect
import logging
import os
import socket
import ssl
import tempfile
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from lws_operator.admission.counts import FAILURE_CODES, WebhookCounts
from lws_operator.admission.http_server import HttpServer, Respond
from lws_operator.admission.listener import bind, close
from lws_operator.admission.review import AsyncHandler, Handler, review, review_async
from lws_operator.api.json_codec import dumps as dump
from lws_operator.kube.tls_reads import read_records

if TYPE_CHECKING:  # the admission process counts without prometheus_client (admission.counts)
    from lws_operator.admission.metrics import WebhookMetrics

log = logging.getLogger(__name__)

# Called after every admission with the path and the seconds spent serving it.
Observer = Callable[[str, float], None]


class ServingTLS:
    """A server ``SSLContext`` whose certificate can be swapped while it is in use.

    OpenSSL copies the certificate into each connection when the handshake starts, so loading a
    new chain into the shared context affects only later connections. Loading and handshakes
    both run on the event loop thread, so no handshake ever sees half a swap.
    """

    def __init__(self, min_version: str | None = None, ciphers: str | None = None) -> None:
        """``min_version``: ``VersionTLS12`` (the default) or ``VersionTLS13``; ``ciphers``:
        an OpenSSL cipher list for TLS 1.2 (the configuration's ``tls`` section)."""
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = (ssl.TLSVersion.TLSv1_3 if min_version == "VersionTLS13"
                               else ssl.TLSVersion.TLSv1_2)
        if ciphers:
            ctx.set_ciphers(ciphers)
        ctx.set_alpn_protocols(["http/1.1"])
        # No TLS 1.3 session tickets: the API server's webhook client (client-go's transport)
        # keeps no session cache, so it never resumes and every ticket would be wasted work
        # on each new connection: two ticket encryptions and their bytes on the wire.
        # A resuming client still connects, with a full handshake.
        ctx.num_tickets = 0
        self.context = read_records(ctx)  # one record's plaintext per read (kube.tls_reads)
        self.cert_pem: bytes | None = None

    @property
    def loaded(self) -> bool:
        return self.cert_pem is not None

    def load(self, cert_pem: bytes, key_pem: bytes) -> bool:
        """Serve ``cert_pem`` from now on; False if it is already served."""
        if cert_pem == self.cert_pem:
            return False
        _load_chain(self.context, cert_pem + b"\n" + key_pem)
        self.cert_pem = cert_pem
        return True


def _load_chain(ctx: ssl.SSLContext, pem: bytes) -> None:
    """``load_cert_chain`` reads only files: hand it an anonymous in-memory file where Linux
    offers one (nothing touches disk, and a read-only root filesystem is fine), else a private
    temporary file removed at once."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("lws-webhook-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, pem)
            ctx.load_cert_chain(f"/proc/self/fd/{fd}")
            return
        except FileNotFoundError:  # no /proc: fall through to a temporary file
            pass
        finally:
            os.close(fd)
    with tempfile.NamedTemporaryFile(prefix="lws-webhook-", suffix=".pem") as f:
        f.write(pem)
        f.flush()
        ctx.load_cert_chain(f.name)


class AdmissionServer:
    """Serves ``handlers`` (path -> handler) over HTTPS on ``host:port``."""

    def __init__(
        self,
        *,
        tls: ServingTLS,
        handlers: Mapping[str, Handler | AsyncHandler],
        host: str,
        port: int = 9443,
        metrics: WebhookMetrics | WebhookCounts | None = None,
        observer: Observer | None = None,
        shutdown_timeout: float = 10.0,
    ) -> None:
        self.tls = tls
        self.handlers = dict(handlers)
        self.host = host
        self.port = port
        self.metrics = metrics
        self.observer = observer
        self._http: HttpServer | None = None
        self._reserved: list[socket.socket] = []
        self._shutdown_timeout = shutdown_timeout
        self.routes = {path: _respond(handler, _failures(metrics, path))
                       for path, handler in self.handlers.items()}

    @property
    def listening(self) -> bool:
        return self._http is not None

    def _server(self) -> HttpServer:
        metrics = self.metrics
        observer = self.observer
        if metrics is None:
            def observed(path: str, seconds: float, status: int) -> None:
                if observer is not None:
                    observer(path, seconds)

            return HttpServer(self.routes, finished=observed)
        # Bound per path once: a labelled child's lookup is a lock and a dict per call.
        in_flight = {p: metrics.in_flight.labels(p) for p in self.routes}
        latency = {p: metrics.latency.labels(p) for p in self.routes}
        ok = {p: metrics.requests.labels(p, "200") for p in self.routes}

        def started(path: str) -> None:
            in_flight[path].inc()

        def finished(path: str, seconds: float, status: int) -> None:
            in_flight[path].dec()
            latency[path].observe(seconds)
            (ok[path] if status == 200 else metrics.requests.labels(path, str(status))).inc()
            if observer is not None:
                observer(path, seconds)

        return HttpServer(self.routes, started=started, finished=finished,
                          accepted=metrics.connections.inc)

    def reserve(self) -> None:
        """Bind the port now, listen on it in ``start``: a port in use (or an address not on
        this host) is then an ``OSError`` at startup, not a failure once the first certificate
        arrives, which may be much later. Until ``start`` connections are refused, as if
        nothing were bound."""
        if self._http is None and not self._reserved:
            self._reserved = bind(self.host, self.port)
            self.port = int(self._reserved[0].getsockname()[1])

    def adopt(self, sockets: list[socket.socket]) -> None:
        """Listen, in ``start``, on sockets bound elsewhere (by the parent of the admission
        process, ``admission.process``)."""
        close(self._reserved)
        self._reserved = list(sockets)
        if sockets:
            self.port = int(sockets[0].getsockname()[1])

    async def serve(self, cert: bytes, key: bytes) -> None:
        """Serve ``cert`` from now on, listening if not yet."""
        self.tls.load(cert, key)
        if not self.listening:
            await self.start()

    async def start(self) -> None:
        """Listen; the certificate must be loaded first (a listener without one fails every
        handshake, which is worse than not listening)."""
        if not self.tls.loaded:
            raise RuntimeError("no serving certificate loaded")
        if self._http is not None:
            return
        self.reserve()
        reserved, self._reserved = self._reserved, []
        http = self._server()
        try:
            await http.start(list(reserved), self.tls.context)
        except BaseException:
            await http.stop(0)
            close(reserved)
            raise
        self._http = http
        self.port = http.ports[0]
        log.info("admission webhooks listening on https://%s:%d", self.host, self.port)

    async def stop(self) -> None:
        """Stop accepting, let in-flight reviews finish (up to the shutdown timeout)."""
        reserved, self._reserved = self._reserved, []
        close(reserved)
        http, self._http = self._http, None
        if http is not None:
            await http.stop(self._shutdown_timeout)


Failed = Callable[[dict[str, Any]], None]


def _failures(metrics: WebhookMetrics | WebhookCounts | None, path: str) -> Failed | None:
    """What counts a path's failed answers (``WebhookMetrics.failures``), its series created
    at 0 so that the first failure is an increase."""
    if metrics is None:
        return None
    counters = {code: metrics.failures.labels(path, str(code)) for code in FAILURE_CODES}

    def count(answer: dict[str, Any]) -> None:
        response = answer.get("response") or {}
        code = (response.get("status") or {}).get("code")
        if response.get("allowed") is False and code in counters:
            counters[code].inc()
    return count


def _respond(handler: Handler | AsyncHandler, failed: Failed | None = None) -> Respond:
    """A path's answer to a request body: the AdmissionReview answer, encoded. Every webhook
    but the eviction one answers from a pure function, on the spot. ``failed`` sees each
    answer (the failures among them are counted)."""
    if inspect.iscoroutinefunction(handler):
        async_handler = cast(AsyncHandler, handler)

        async def answer_async(body: bytes) -> bytes:
            answer = await review_async(body, async_handler)
            if failed is not None:
                failed(answer)
            return dump(answer)

        return answer_async
    sync_handler = cast(Handler, handler)

    def answer(body: bytes) -> bytes:
        out = review(body, sync_handler)
        if failed is not None:
            failed(out)
        return dump(out)

    return answer
