"""What the local clusters need of this host: the pinned versions, the build cache, free ports,
and stopping a process. Its own module so that the launcher and the real-node tier
(``node.py``) both use it without importing each other."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def versions() -> dict[str, str]:
    """The pinned versions in ``versions.env`` (shared with ``build.sh``)."""
    out = {}
    for line in (HERE / "versions.env").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def cache_root() -> Path:
    """Where the pinned builds are cached, once per machine (``$LWS_CACHE`` overrides it)."""
    return Path(os.environ.get("LWS_CACHE", Path.home() / ".cache" / "lws-operator"))


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def terminate(pid: int, grace: float = 10.0) -> None:
    """SIGTERM ``pid``, then SIGKILL it if it is still there after ``grace`` seconds."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    end = time.monotonic() + grace
    while time.monotonic() < end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        # Reap it if it is our own child (a launcher that stayed alive, as in pytest).
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
