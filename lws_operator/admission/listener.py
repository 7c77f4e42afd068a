"""Binding the servers' TCP ports, and starting an aiohttp application on one (the probes and
``/metrics``). aiohttp is imported only by ``listen``: the admission process binds through here
and never imports it (``http_server``)."""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from aiohttp import web


class ListenError(OSError):
    """``host:port`` cannot be bound: the port is taken, or privileged, or the address is not
    one of this host's. ``errno`` says which."""

    def __init__(self, host: str, port: int, cause: OSError) -> None:
        # os.strerror: asyncio words a failed bind as a long sentence around it.
        reason = (str(cause.strerror) if isinstance(cause, socket.gaierror)
                  else os.strerror(cause.errno) if cause.errno else str(cause))
        super().__init__(cause.errno, reason[:1].lower() + reason[1:])
        self.host = host
        self.port = port

    def __str__(self) -> str:
        where = f"[{self.host}]" if ":" in self.host else self.host
        return f"cannot listen on {where}:{self.port}: {self.strerror}"


def bind(host: str, port: int) -> list[socket.socket]:
    """Sockets bound to ``host:port`` but not listening yet: one per address ``host`` resolves
    to, bound as asyncio's ``create_server`` binds them (``SO_REUSEADDR``, IPv6 sockets
    IPv6-only). Binding is where a port in use or an address not on this host shows, so a
    server that may listen only later (the webhooks wait for their certificate) still learns
    at start whether it can. Port 0 picks a free port, the same one for every address.
    ``OSError`` on failure, with nothing left open."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except OSError as exc:  # socket.gaierror: an unknown host name
        raise ListenError(host, port, exc) from exc
    out: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            out.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(out) > 1:
                address = (address[0], out[0].getsockname()[1], *address[2:])
            sock.bind(address)
            sock.setblocking(False)
    except BaseException as exc:
        close(out)
        if isinstance(exc, OSError):
            raise ListenError(host, port, exc) from exc
        raise
    return out


def close(sockets: Sequence[socket.socket]) -> None:
    for sock in sockets:
        with contextlib.suppress(OSError):
            sock.close()


async def listen(
    app: web.Application,
    host: str,
    port: int,
    *,
    ssl_context: ssl.SSLContext | None = None,
    shutdown_timeout: float = 1.0,
    sockets: Sequence[socket.socket] = (),
) -> tuple[web.AppRunner, int]:
    """Serve ``app`` on ``host:port`` (port 0 picks a free one), or on ``sockets`` from
    :func:`bind` when given (they then belong to the runner); returns the runner, whose
    ``cleanup()`` stops it, and the port actually bound. ``ListenError`` when the port cannot
    be bound; nothing is left open on failure."""
    from aiohttp import web

    runner = web.AppRunner(app, handle_signals=False, access_log=None,
                           shutdown_timeout=shutdown_timeout)
    try:
        await runner.setup()
        sites: list[web.BaseSite] = (
            [web.SockSite(runner, sock, ssl_context=ssl_context) for sock in sockets]
            if sockets else
            [web.TCPSite(runner, host, port, ssl_context=ssl_context, reuse_address=True)])
        for site in sites:
            await site.start()
    except BaseException as exc:
        await runner.cleanup()
        close(sockets)
        if isinstance(exc, OSError) and not isinstance(exc, ListenError):
            raise ListenError(host, port, exc) from exc
        raise
    if runner.addresses:
        port = int(runner.addresses[0][1])
    return runner, port
