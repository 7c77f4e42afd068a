"""The admission process: serves the webhooks on sockets its parent bound, with the certificates
its parent sends, until its parent says stop or is gone (``admission.process`` says why).

    python -m lws_operator.admission.child --control-fd N --listen-fds A[,B] --settings JSON

Started only by ``AdmissionProcess``; nothing here talks to the API server.
"""

from __future__ import annotations

import argparse
import asyncio
import asyncio.sslproto
import datetime as dt
import gc
import json
import logging
import signal
import socket
import sys

import prometheus_client
from prometheus_client import CollectorRegistry

from lws_operator.kube.lean_imports import bare_packages

# aiohttp's ``__init__`` imports its client half too (connector, sessions, cookie jar, and two
# SSL contexts with the system's CA certificates built at import); this process only serves.
# Registered bare before anything imports it (``kube.lean_imports``), ``aiohttp.web`` imports
# what it needs and no more: measured, 2.2 MiB less unique memory and ~0.1 s less to import.
bare_packages(("aiohttp",))

from lws_operator.admission import review  # noqa: E402 (after the line above)
from lws_operator.admission.metrics import WebhookMetrics  # noqa: E402
from lws_operator.admission.process import (  # noqa: E402
    CERTIFICATE,
    METRICS,
    SERVING,
    STOP,
    ChildSettings,
    fingerprint,
    inherited_sockets,
    receive,
    send,
)
from lws_operator.admission.server import AdmissionServer, ServingTLS  # noqa: E402

log = logging.getLogger("lws_operator.admission.child")

# Bytes asyncio's TLS layer reads from a socket at once. Its default (256 KiB) is a buffer
# allocated and zeroed for every TLS connection: the API server opens a new connection whenever
# more calls are in flight than it keeps idle, so under load hundreds are made per second, and
# the allocator kept what hundreds of them had held (measured, unique memory after two bursts of
# 300 concurrent connections, 25 MiB before them: 100-112 MiB with 256 KiB, 64 MiB with 64 KiB,
# 55 MiB with 32 KiB, 50 MiB with 16 KiB).
# Two TLS records (16 KiB of plaintext each, the protocol's largest) fit; larger bodies take
# more reads, which is all a smaller buffer changes.
TLS_READ_BUFFER = 32 * 1024


async def serve(settings: ChildSettings, control: socket.socket,
                listeners: list[socket.socket]) -> None:
    prometheus_client.disable_created_metrics()  # as the parent's registry (kube.metrics)
    registry = CollectorRegistry()
    tls = ServingTLS(settings.tls_min_version, settings.tls_ciphers)
    server = AdmissionServer(
        tls=tls, handlers=review.handlers(settings.scheduler_provider), host=settings.host,
        port=settings.port, metrics=WebhookMetrics(registry),
        shutdown_timeout=settings.shutdown_timeout)
    server.adopt(listeners)
    reader, writer = await asyncio.open_unix_connection(sock=control)
    # Everything imported so far lives as long as the process: keep it out of the collector's
    # generations, so a collection walks only what admissions allocate.
    gc.freeze()
    try:
        while (message := await receive(reader)) is not None:
            kind = message[0]
            if kind == CERTIFICATE:
                tls.load(message[1], message[2])
                if not server.listening:
                    await server.start()
                await send(writer, (SERVING, fingerprint(message[1])))
            elif kind == METRICS:
                await send(writer, (METRICS, list(registry.collect())))
            elif kind == STOP:
                break
        else:
            log.warning("the operator process is gone; the admission process stops")
    finally:
        await server.stop()
        writer.close()


class _JsonLines(logging.Formatter):
    """The operator's JSON log line (``lws-operator run --log-format json``)."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {"ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(),
                 "level": record.levelname.lower(), "logger": record.name,
                 "msg": record.getMessage()}
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        return json.dumps(entry)


def _setup_logging(level: str, fmt: str) -> None:
    """Lines in the parent's format, on the stderr they share."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_JsonLines() if fmt == "json" else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level.upper(), handlers=[handler], force=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lws_operator.admission.child")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--listen-fds", required=True)
    parser.add_argument("--settings", required=True)
    args = parser.parse_args(argv)
    settings = ChildSettings(**json.loads(args.settings))
    # The parent decides when this process stops (see admission.process).
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _setup_logging(settings.log_level, settings.log_format)
    # A class attribute meant to be read per instance; this process serves nothing else.
    asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER
    control = socket.socket(fileno=args.control_fd)
    listeners = inherited_sockets([int(fd) for fd in args.listen_fds.split(",") if fd])
    asyncio.run(serve(settings, control, listeners))
    return 0


if __name__ == "__main__":
    sys.exit(main())
