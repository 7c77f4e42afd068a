"""The wire between the operator process and its admission child (``admission.process`` says
why there is a child): the messages, the child's settings, the certificate fingerprint, and the
sockets handed over. Both processes import it; it imports nothing of ``prometheus_client`` nor
of the parent's side, so that the child stays small (docs/performance.md)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import pickle
import socket
import struct
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

_HEADER = struct.Struct("!I")
# Messages, as tuples whose first item names them.
# parent -> a forked child, first and once: (settings as a dict), the listening sockets attached
# (``admission.fork``; a spawned child has both on its command line).
START = "start"
CERTIFICATE = "certificate"  # parent -> child: (cert PEM, key PEM)
SERVING = "serving"  # child -> parent: the SHA-256 of the certificate now served
METRICS = "metrics"  # parent -> child: a request; child -> parent: its counts (snapshot)
STOP = "stop"  # parent -> child: drain and exit
# child -> parent: (id, AdmissionRequest) of an eviction; parent -> child: (id, response).
EVICTION = "eviction"
# Seconds the child waits for the parent's eviction answer before allowing the eviction, as
# the webhook's failurePolicy Ignore would (its timeout is longer, so the API server hears
# this answer rather than its own timeout).
EVICTION_FORWARD_TIMEOUT = 3.0


@dataclass(frozen=True)
class ChildSettings:
    """What the child needs to serve (everything else stays in the parent)."""

    host: str
    port: int
    scheduler_provider: str | None = None
    tls_min_version: str | None = None
    tls_ciphers: str | None = None
    shutdown_timeout: float = 10.0
    log_level: str = "info"
    log_format: str = "text"


def fingerprint(cert_pem: bytes) -> str:
    return hashlib.sha256(cert_pem).hexdigest()


async def send(writer: asyncio.StreamWriter, message: tuple[Any, ...]) -> None:
    """One message: its length, then its pickle (both ends are this package, over a socket
    pair nobody else holds)."""
    data = pickle.dumps(message)
    writer.write(_HEADER.pack(len(data)) + data)
    await writer.drain()


async def receive(reader: asyncio.StreamReader) -> tuple[Any, ...] | None:
    """The next message, or None at the end of the stream (the other side is gone)."""
    try:
        header = await reader.readexactly(_HEADER.size)
        data = await reader.readexactly(_HEADER.unpack(header)[0])
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    message: tuple[Any, ...] = pickle.loads(data)  # only this package writes to the pair
    return message


def inherited_sockets(fds: Sequence[int]) -> list[socket.socket]:
    """The bound sockets the parent handed over, by descriptor."""
    out = []
    for fd in fds:
        os.set_inheritable(fd, False)
        out.append(socket.socket(fileno=fd))
    return out


def send_start(sock: socket.socket, settings: ChildSettings,
               listeners: Sequence[socket.socket]) -> None:
    """Start a forked child (``admission.fork``): its settings, with the bound sockets passed
    along (``SCM_RIGHTS``). Blocking, on the pair before the parent's loop reads it: nothing
    else was written to it yet, so the few hundred bytes fit its buffer at once."""
    data = pickle.dumps((START, asdict(settings)))
    socket.send_fds(sock, [_HEADER.pack(len(data)) + data], [s.fileno() for s in listeners])


def receive_start(sock: socket.socket) -> tuple[ChildSettings, list[socket.socket]] | None:
    """In a forked child, blocking until the parent starts it: its settings and listening
    sockets; None when the parent is gone first (or closed the pair: no start). Reads that
    message's bytes and no more: what follows is for the child's loop."""
    header, fds, _, _ = socket.recv_fds(sock, _HEADER.size, 16)
    listeners = inherited_sockets(fds)
    header += _exactly(sock, _HEADER.size - len(header)) if header else b""
    size = _HEADER.unpack(header)[0] if len(header) == _HEADER.size else 0
    data = _exactly(sock, size)
    if not size or len(data) != size:
        for listener in listeners:
            listener.close()
        return None
    kind, settings = pickle.loads(data)  # only the parent writes to the pair
    if kind != START:
        raise ValueError(f"a forked admission process expected {START!r}, got {kind!r}")
    return ChildSettings(**settings), listeners


def _exactly(sock: socket.socket, size: int) -> bytes:
    """``size`` bytes of the blocking ``sock``, or fewer if it ends first."""
    data = bytearray()
    while len(data) < size and (more := sock.recv(size - len(data))):
        data += more
    return bytes(data)
