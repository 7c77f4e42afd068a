"""HTTP/1.1 for the admission webhooks: h11's state machine on an ``asyncio.Protocol``.

Why not aiohttp, which the operator's other servers (probes, ``/metrics``) use: the webhook
server answers one kind of request, a POST of a JSON body to a fixed path, thousands of times a
second under load, in a process of its own that should be small. aiohttp's server builds a
request object, a router match, a response object and a payload writer per request, and its
import brings multidict, yarl, attrs, the HTTP client half's helpers and more: measured, the
admission process imports in 7 MiB less anonymous memory without it. h11 (python-hyper's
sans-IO HTTP/1.1, pure Python, 0.4 MiB imported) parses and frames; everything here is the I/O
around it.

What the API server relies on is kept: keep-alive (client-go keeps up to 25 idle connections
per host and reuses them), the query string it appends (``?timeout=10s``) is ignored for
routing, unknown paths are 404, other methods 405, a body over :data:`MAX_BODY` 413 (aiohttp's
default limit, which the webhooks had until now), a malformed request 400 and closed.

HTTP/2 is not offered. kube-apiserver speaks HTTP/1.1 to every webhook behind a Service and to
every URL webhook whose host is not loopback (``NextProtos = ["http/1.1"]`` in its webhook
client, ``k8s.io/apiserver/pkg/util/webhook/client.go``: HTTP/2 would pin all calls to one
backend); only a webhook registered by URL on 127.0.0.1 or localhost, as ``make run`` and the
benchmark do, would get HTTP/2. Offering it would make the local figures differ from what the
chart's Service deployment gets, and upstream disables HTTP/2 on its webhook server too.

Idle connections are kept for :data:`IDLE_TIMEOUT`, longer than client-go's 90 s idle timeout:
the client then always closes first. A server that closes an idle connection the client is
just reusing makes that POST fail (Go retries only replayable requests), and the webhooks fail
closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import socket
import ssl
import time
from collections.abc import Awaitable, Callable, Mapping

import h11

log = logging.getLogger(__name__)

# The answer to one request body: synchronous (answered on the spot) or awaitable.
Respond = Callable[[bytes], bytes | Awaitable[bytes]]
# Called with the path, the seconds from the request's head to its answer, and the status.
Done = Callable[[str, float, int], None]

# aiohttp's ``client_max_size``, the limit the webhooks had under aiohttp.
MAX_BODY = 1024 * 1024
# Longer than client-go's idle timeout (90 s, Go's http.DefaultTransport): the client closes
# an idle connection before we would (module docstring).
IDLE_TIMEOUT = 120.0
_SWEEP_INTERVAL = 15.0
_JSON = b"application/json; charset=utf-8"
_TEXT = b"text/plain; charset=utf-8"


class Connection(asyncio.Protocol):
    """One client connection: requests in, answers out, one at a time (HTTP/1.1 has no
    multiplexing; a pipelining client's next request waits in h11's buffer)."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.h11 = h11.Connection(h11.SERVER)
        self.transport: asyncio.Transport | None = None
        self.path = ""
        self.respond: Respond | None = None
        self.status = 0  # non-zero: the answer is decided before the body is read (404, 405)
        self.body: list[bytes] = []
        self.size = 0
        self.started = 0.0
        self.pending: asyncio.Task[None] | None = None
        self.last_activity = time.monotonic()

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.last_activity = time.monotonic()
        self.h11.receive_data(data)
        if self.pending is None:
            self._events()

    def eof_received(self) -> bool | None:
        with contextlib.suppress(h11.RemoteProtocolError):
            self.h11.receive_data(b"")
        if self.pending is None:
            self._events()
        return None  # close our side too

    # requests

    @property
    def idle(self) -> bool:
        """No request under way: closing now loses nothing."""
        return self.pending is None and self.h11.their_state is h11.IDLE

    def _events(self) -> None:
        while self.transport is not None:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                self._fail(exc.error_status_hint, str(exc))
                return
            kind = type(event)
            if kind is h11.Data:
                self.size += len(event.data)  # type: ignore[union-attr]
                if self.size > MAX_BODY:
                    self._fail(413, f"the request body exceeds {MAX_BODY} bytes")
                    return
                self.body.append(event.data)  # type: ignore[union-attr]
            elif kind is h11.Request:
                self._start(event)  # type: ignore[arg-type]
            elif kind is h11.EndOfMessage:
                self._dispatch()
                if self.pending is not None:
                    return
            elif event is h11.NEED_DATA or event is h11.PAUSED:
                return
            elif kind is h11.ConnectionClosed:
                self.transport.close()
                return

    def _start(self, request: h11.Request) -> None:
        self.started = time.perf_counter()
        self.body = []
        self.size = 0
        self.path = request.target.split(b"?", 1)[0].decode("latin-1")
        self.respond = self.server.routes.get(self.path)
        self.status = (404 if self.respond is None
                       else 405 if request.method != b"POST" else 0)
        if self.status == 0:
            self.server.started(self.path)
        if self.h11.client_is_waiting_for_100_continue and self.status == 0:
            self._write(self.h11.send(h11.InformationalResponse(status_code=100, headers=[])))

    def _dispatch(self) -> None:
        if self.status:
            reason = b"404: Not Found" if self.status == 404 else b"405: Method Not Allowed"
            extra = [(b"allow", b"POST")] if self.status == 405 else []
            self._answer(self.status, reason, _TEXT, extra)
            return
        assert self.respond is not None
        body = b"".join(self.body)
        self.body = []
        try:
            answer = self.respond(body)
        except Exception:  # the review functions never raise; this is the last guard
            log.exception("admission webhook %s failed", self.path)
            self._finish(500, b"500: Internal Server Error", _TEXT)
            return
        if inspect.isawaitable(answer):
            self.pending = asyncio.ensure_future(self._await(answer))
            if self.transport is not None:
                self.transport.pause_reading()
        else:
            self._finish(200, answer, _JSON)

    async def _await(self, answer: Awaitable[bytes]) -> None:
        try:
            status, body, ctype = 200, await answer, _JSON
        except Exception:
            log.exception("admission webhook %s failed", self.path)
            status, body, ctype = 500, b"500: Internal Server Error", _TEXT
        self.pending = None
        self._finish(status, body, ctype)
        if self.transport is not None:
            self.transport.resume_reading()
            self._events()  # a request that arrived meanwhile

    def _finish(self, status: int, body: bytes, content_type: bytes) -> None:
        """Answer an admission and account for it."""
        self.server.finished(self.path, time.perf_counter() - self.started, status)
        self._answer(status, body, content_type)

    def _answer(self, status: int, body: bytes, content_type: bytes,
                extra: list[tuple[bytes, bytes]] | None = None) -> None:
        if self.transport is None:
            return  # the client left; nothing to answer
        headers = [(b"content-type", content_type), (b"content-length", b"%d" % len(body)),
                   *(extra or ())]
        if self.server.closing:
            headers.append((b"connection", b"close"))
        h = self.h11
        self._write(b"".join((h.send(h11.Response(status_code=status, headers=headers)),
                              h.send(h11.Data(data=body)), h.send(h11.EndOfMessage()))))
        if h.our_state is h11.MUST_CLOSE:
            self.transport.close()
        elif h.their_state is h11.DONE:
            h.start_next_cycle()
        self.last_activity = time.monotonic()

    def _fail(self, status: int, message: str) -> None:
        """A request we cannot read: answer it if HTTP still allows, then close."""
        if self.transport is None:
            return
        if self.h11.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            with contextlib.suppress(h11.LocalProtocolError):
                body = message.encode()
                self._write(b"".join((
                    self.h11.send(h11.Response(status_code=status, headers=[
                        (b"content-type", _TEXT), (b"content-length", b"%d" % len(body)),
                        (b"connection", b"close")])),
                    self.h11.send(h11.Data(data=body)), self.h11.send(h11.EndOfMessage()))))
        self.transport.close()

    def _write(self, data: bytes) -> None:
        if self.transport is not None:
            self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class HttpServer:
    """``routes`` (path -> answer of a POST body) over HTTP/1.1; ``started``/``finished``
    hooks for the metrics; ``accepted`` counts connections as they are accepted."""

    def __init__(self, routes: Mapping[str, Respond], *,
                 started: Callable[[str], None] | None = None, finished: Done | None = None,
                 accepted: Callable[[], None] | None = None) -> None:
        self.routes = dict(routes)
        self._started = started
        self._finished = finished
        self._accepted = accepted
        self.connections: set[Connection] = set()
        self.closing = False
        self._servers: list[asyncio.Server] = []
        self._sweeper: asyncio.Task[None] | None = None

    def started(self, path: str) -> None:
        if self._started is not None:
            self._started(path)

    def finished(self, path: str, seconds: float, status: int) -> None:
        if self._finished is not None:
            self._finished(path, seconds, status)

    def protocol(self) -> Connection:
        """asyncio's protocol factory, called once per accepted TCP connection (before its TLS
        handshake)."""
        if self._accepted is not None:
            self._accepted()
        return Connection(self)

    async def start(self, sockets: list[socket.socket], context: ssl.SSLContext) -> None:
        """Serve on ``sockets`` (bound, not yet listening) with TLS ``context``."""
        loop = asyncio.get_running_loop()
        for sock in sockets:
            self._servers.append(await loop.create_server(
                self.protocol, sock=sock, ssl=context, backlog=1024))
        self._sweeper = asyncio.create_task(self._sweep(), name="webhook-idle-connections")

    async def _sweep(self) -> None:
        """Close connections idle for longer than :data:`IDLE_TIMEOUT`."""
        while True:
            await asyncio.sleep(_SWEEP_INTERVAL)
            cutoff = time.monotonic() - IDLE_TIMEOUT
            for conn in list(self.connections):
                if conn.idle and conn.last_activity < cutoff:
                    conn.close()

    async def stop(self, timeout: float) -> None:  # noqa: ASYNC109
        """Stop accepting, close idle connections, let requests under way finish (each
        answer then closes its connection) for up to ``timeout`` seconds, abort the rest."""
        self.closing = True
        for server in self._servers:
            server.close()
        if self._sweeper is not None:
            self._sweeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sweeper
        deadline = time.monotonic() + timeout
        while self.connections:
            for conn in list(self.connections):
                if conn.idle:
                    conn.close()
            if time.monotonic() >= deadline:
                break
            await asyncio.sleep(0.05)
        for conn in list(self.connections):
            conn.abort()
        for server in self._servers:
            await server.wait_closed()
        self._servers = []

    @property
    def ports(self) -> list[int]:
        return [int(s.getsockname()[1]) for server in self._servers for s in server.sockets]
