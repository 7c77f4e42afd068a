"""HTTP/1.1 for the admission webhooks: httptools' parser on an ``asyncio.Protocol``.

Why not aiohttp, which the operator's other servers (probes, ``/metrics``) use: the webhook
server answers one kind of request, a POST of a JSON body to a fixed path, thousands of times a
second under load, in a process of its own that should be small. aiohttp's server builds a
request object, a router match, a response object and a payload writer per request, and its
import brings multidict, yarl, attrs, the HTTP client half's helpers and more, all resident in
the admission process. httptools (the bindings of Node's llhttp parser that uvicorn uses, small
to import) parses; an answer is a status line, two headers and the body, written here. h11, the
pure-Python alternative, was tried first: its parsing and framing in Python cost more per
request than aiohttp's whole request path.

What the API server relies on is kept: keep-alive (client-go keeps up to 25 idle connections
per host and reuses them), the query string it appends (``?timeout=10s``) is ignored for
routing, unknown paths are 404, other methods 405, a body over :data:`MAX_BODY` 413 (7 MiB,
controller-runtime's limit for upstream's webhooks: an UPDATE's review carries the object and
the old object, each up to the API server's 3 MiB request limit), a malformed request 400 and
closed.

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
from collections import deque
from collections.abc import Awaitable, Callable, Mapping
from http import HTTPStatus
from typing import NamedTuple

import httptools

log = logging.getLogger(__name__)

# The answer to one request body: synchronous (answered on the spot) or awaitable.
Respond = Callable[[bytes], bytes | Awaitable[bytes]]
# Called with the path, the seconds from the request's head to its answer, and the status.
Done = Callable[[str, float, int], None]

# controller-runtime's admission limit (module docstring). aiohttp's default, 1 MiB, which the
# webhooks had before, refused the UPDATE review of a LeaderWorkerSet whose templates are large
# (two copies of it), which upstream admits; with the webhooks failing closed that blocked it.
MAX_BODY = 7 * 1024 * 1024
# Longer than client-go's idle timeout (90 s, Go's http.DefaultTransport): the client closes
# an idle connection before we would (module docstring).
IDLE_TIMEOUT = 120.0
_SWEEP_INTERVAL = 15.0
_JSON = b"application/json; charset=utf-8"
_TEXT = b"text/plain; charset=utf-8"


class _TooLarge(Exception):
    """Raised from the body callback to stop the parser (it cannot be told to stop otherwise)."""


class Connection(asyncio.Protocol):
    """One client connection: requests in, answers out, in order (HTTP/1.1 has no
    multiplexing; requests a pipelining client sent meanwhile wait in :attr:`queue`).

    httptools calls the ``on_*`` methods while it parses; a complete request is queued and
    answered when every earlier one has been."""

    def __init__(self, server: HttpServer) -> None:
        self.server = server
        self.parser = httptools.HttpRequestParser(self)
        self.transport: asyncio.Transport | None = None
        self.queue: deque[_Request] = deque()
        self.pending: asyncio.Task[None] | None = None
        self.reading = False  # a request has begun and is not complete
        self.last_activity = time.monotonic()
        self._url = b""
        self._body: list[bytes] = []
        self._size = 0
        self._started = 0.0
        self._expect = False

    # asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.server.connections.add(self)

    def connection_lost(self, exc: Exception | None) -> None:
        self.server.connections.discard(self)
        self.transport = None

    def data_received(self, data: bytes) -> None:
        self.last_activity = time.monotonic()
        failure: tuple[int, str] | None = None
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            failure = (400, "protocol upgrades are not supported")
        except httptools.HttpParserError as exc:
            failure = ((413, f"the request body exceeds {MAX_BODY} bytes")
                       if isinstance(exc.__context__, _TooLarge)
                       else (400, f"malformed HTTP request: {exc}"))
        self._answer_queued()
        if failure is not None:
            self._fail(*failure)

    def eof_received(self) -> bool | None:
        return None  # the client is done sending: close once written (asyncio closes)

    # httptools callbacks

    def on_message_begin(self) -> None:
        self.reading = True
        self._url = b""
        self._body = []
        self._size = 0
        self._expect = False

    def on_url(self, url: bytes) -> None:
        self._url += url

    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"expect" and value.lower() == b"100-continue":
            self._expect = True

    def on_headers_complete(self) -> None:
        # The admission's clock starts here, as controller-runtime's does (its handler runs
        # once the head is read, and reads the body itself).
        self._started = time.perf_counter()
        if self._expect and self.transport is not None and not self.queue and not self.pending:
            self.transport.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def on_body(self, body: bytes) -> None:
        self._size += len(body)
        if self._size > MAX_BODY:
            raise _TooLarge
        self._body.append(body)

    def on_message_complete(self) -> None:
        self.reading = False
        path = self._url.split(b"?", 1)[0].decode("latin-1")
        self.queue.append(_Request(path, self.parser.get_method(), b"".join(self._body),
                                   self._started, self.parser.should_keep_alive()))
        self._body = []

    # answers

    @property
    def idle(self) -> bool:
        """No request under way: closing now loses nothing."""
        return self.pending is None and not self.queue and not self.reading

    def _answer_queued(self) -> None:
        while self.queue and self.pending is None and self.transport is not None:
            self._dispatch(self.queue.popleft())

    def _dispatch(self, request: _Request) -> None:
        respond = self.server.routes.get(request.path)
        if respond is None:
            self._write(request, 404, b"404: Not Found", _TEXT)
            return
        if request.method != b"POST":
            self._write(request, 405, b"405: Method Not Allowed", _TEXT, b"allow: POST\r\n")
            return
        self.server.started(request.path)
        try:
            answer = respond(request.body)
        except Exception:  # the review functions never raise; this is the last guard
            log.exception("admission webhook %s failed", request.path)
            self._finish(request, 500, b"500: Internal Server Error", _TEXT)
            return
        if inspect.isawaitable(answer):
            self.pending = asyncio.ensure_future(self._await(request, answer))
            if self.transport is not None:
                self.transport.pause_reading()
        else:
            self._finish(request, 200, answer, _JSON)

    async def _await(self, request: _Request, answer: Awaitable[bytes]) -> None:
        try:
            status, body, ctype = 200, await answer, _JSON
        except Exception:
            log.exception("admission webhook %s failed", request.path)
            status, body, ctype = 500, b"500: Internal Server Error", _TEXT
        self.pending = None
        self._finish(request, status, body, ctype)
        if self.transport is not None:
            self.transport.resume_reading()
            self._answer_queued()

    def _finish(self, request: _Request, status: int, body: bytes, content_type: bytes) -> None:
        """Answer an admission and account for it."""
        self.server.finished(request.path, time.perf_counter() - request.started, status)
        self._write(request, status, body, content_type)

    def _write(self, request: _Request, status: int, body: bytes, content_type: bytes,
               extra: bytes = b"") -> None:
        self._send(status, body, content_type, extra,
                   close=not request.keep_alive or self.server.closing)

    def _fail(self, status: int, message: str) -> None:
        """A request we cannot read: answer it, then close."""
        self._send(status, message.encode(), _TEXT, close=True)

    def _send(self, status: int, body: bytes, content_type: bytes, extra: bytes = b"", *,
              close: bool) -> None:
        """One answer, framed; the connection closed after it when ``close``."""
        if self.transport is None:
            return  # the client left; nothing to answer
        self.transport.write(b"".join((
            _status_line(status), b"content-type: ", content_type,
            b"\r\ncontent-length: %d\r\n" % len(body), extra,
            b"connection: close\r\n\r\n" if close else b"\r\n", body)))
        self.last_activity = time.monotonic()
        if close:
            self.transport.close()

    def close(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        if self.transport is not None:
            self.transport.abort()


class _Request(NamedTuple):
    path: str
    method: bytes
    body: bytes
    started: float  # perf_counter when its head was read
    keep_alive: bool


def _status_line(status: int) -> bytes:
    return b"HTTP/1.1 %d %s\r\n" % (status, HTTPStatus(status).phrase.encode())


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
