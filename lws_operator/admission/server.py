"""The HTTPS admission server: upstream's webhook paths (LeaderWorkerSet, pod, DisaggregatedSet)
on one aiohttp listener.

Why our own aiohttp application rather than kopf's ``@kopf.on.mutate/validate`` handlers:

* Answers must match controller-runtime's exactly (``review``): a refusal is a 403 with reason
  ``Forbidden`` and the error text as message, a malformed request a 400, warnings ride on an
  allowed answer. kopf's ``AdmissionError`` carries only a message and a code.
* Latency: kopf routes each review through resource lookup, memo recall, a full-object diff and
  its handler-execution machinery (measured p99 9 ms at concurrency 4 on an idle loop,
  in kopf 1.45); the pod webhook's budget is p99 5 ms at 200/s. Here a request is one dict
  lookup and one pure function.
* Certificates: kopf's server restarts its listener when certificate files change. Here the
  certificate is replaced inside the live ``SSLContext`` (:class:`ServingTLS`): connections made
  after the swap get the new certificate, open ones finish undisturbed, nothing is refused.
* Readiness does not wait for kopf's resource scan.

It is an ordinary coroutine-driven aiohttp site, so it shares the event loop of the kopf-based
controllers. aiohttp speaks HTTP/1.1 only, and ALPN offers nothing else (upstream's servers
(cmd/main.go)).
"""

from __future__ import annotations

import inspect
import logging
import os
import socket
import ssl
import tempfile
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import cast

from aiohttp import web

from lws_operator.admission.listener import bind, close, listen
from lws_operator.admission.metrics import WebhookMetrics
from lws_operator.admission.review import AsyncHandler, Handler, dump, review, review_async

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
        # on each new connection: two ticket encryptions and their bytes on the wire, a fifth
        # of a handshake's CPU here. A resuming client still connects, with a full handshake.
        ctx.num_tickets = 0
        self.context = ctx
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
        metrics: WebhookMetrics | None = None,
        observer: Observer | None = None,
        shutdown_timeout: float = 10.0,
    ) -> None:
        self.tls = tls
        self.handlers = dict(handlers)
        self.host = host
        self.port = port
        self.metrics = metrics
        self.observer = observer
        self._runner: web.AppRunner | None = None
        self._reserved: list[socket.socket] = []
        self._shutdown_timeout = shutdown_timeout
        app = web.Application()
        for path, handler in self.handlers.items():
            app.router.add_post(path, self._endpoint(path, handler))
        self.app = app

    @property
    def listening(self) -> bool:
        return self._runner is not None

    def _endpoint(
        self, path: str, handler: Handler | AsyncHandler,
    ) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        metrics = self.metrics
        in_flight = metrics.in_flight.labels(path) if metrics else None
        latency = metrics.latency.labels(path) if metrics else None
        ok = metrics.requests.labels(path, "200") if metrics else None
        # Every webhook but the eviction one answers from a pure function, on the spot.
        awaits = inspect.iscoroutinefunction(handler)

        async def serve(request: web.Request) -> web.Response:
            start = time.perf_counter()
            if in_flight is not None:
                in_flight.inc()
            try:
                body = await request.read()
                answer = (await review_async(body, cast(AsyncHandler, handler)) if awaits
                          else review(body, cast(Handler, handler)))
                # web.json_response's header, with orjson's encoding (``review.dump``)
                response = web.Response(body=dump(answer), content_type="application/json",
                                        charset="utf-8")
            finally:
                if in_flight is not None:
                    in_flight.dec()
            elapsed = time.perf_counter() - start
            if latency is not None and ok is not None:
                latency.observe(elapsed)
                ok.inc()
            if self.observer is not None:
                self.observer(path, elapsed)
            return response

        return serve

    def reserve(self) -> None:
        """Bind the port now, listen on it in ``start``: a port in use (or an address not on
        this host) is then an ``OSError`` at startup, not a failure once the first certificate
        arrives, which may be much later. Until ``start`` connections are refused, as if
        nothing were bound."""
        if self._runner is None and not self._reserved:
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
        if self._runner is not None:
            return
        reserved, self._reserved = self._reserved, []
        self._runner, self.port = await listen(self.app, self.host, self.port,
                                               ssl_context=self.tls.context,
                                               shutdown_timeout=self._shutdown_timeout,
                                               sockets=reserved)
        log.info("admission webhooks listening on https://%s:%d", self.host, self.port)

    async def stop(self) -> None:
        """Stop accepting, let in-flight reviews finish (up to the shutdown timeout)."""
        reserved, self._reserved = self._reserved, []
        close(reserved)
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
