"""The admission process: serves the webhooks on sockets its parent bound, with the certificates
its parent sends, until its parent says stop or is gone (``admission.process`` says why).

    python -m lws_operator.admission.child --control-fd N --listen-fds A[,B] --settings JSON

Started only by ``AdmissionProcess``: forked by ``lws-operator run`` at its start
(``admission.fork``, ``run_forked``), or as above when it was not (a restart, or an embedder
that forked nothing). Nothing here talks to the API server (evictions are decided by the
parent, ``ParentEvictions``).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import gc
import itertools
import json
import logging
import signal
import socket
import sys
from collections.abc import Mapping
from typing import Any

from lws_operator.admission import review
from lws_operator.admission.counts import WebhookCounts
from lws_operator.admission.protocol import (
    CERTIFICATE,
    EVICTION,
    EVICTION_FORWARD_TIMEOUT,
    METRICS,
    SERVING,
    STOP,
    ChildSettings,
    fingerprint,
    inherited_sockets,
    receive,
    receive_start,
    send,
)
from lws_operator.admission.server import AdmissionServer, ServingTLS

log = logging.getLogger("lws_operator.admission.child")

class ParentEvictions:
    """Forwards eviction reviews to the parent, which holds the caches that decide them
    (``admission.eviction``), and waits for its answer; no answer in time, or no parent,
    allows the eviction (the webhook's failurePolicy is Ignore: the same outcome, sooner)."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)

    async def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        ident = next(self._ids)
        future = self.pending[ident] = asyncio.get_running_loop().create_future()
        try:
            await send(self.writer, (EVICTION, ident, dict(request)))
            return await asyncio.wait_for(future, EVICTION_FORWARD_TIMEOUT)
        except (TimeoutError, ConnectionError, OSError) as exc:
            log.warning("no answer from the operator process for eviction %s (%s): allowed",
                        request.get("uid"), exc or type(exc).__name__)
            return review.allowed()
        finally:
            self.pending.pop(ident, None)

    def answered(self, ident: int, answer: dict[str, Any]) -> None:
        future = self.pending.get(ident)
        if future is not None and not future.done():
            future.set_result(answer)


async def serve(settings: ChildSettings, control: socket.socket,
                listeners: list[socket.socket]) -> None:
    counts = WebhookCounts()  # served by the parent (admission.counts)
    tls = ServingTLS(settings.tls_min_version, settings.tls_ciphers)
    reader, writer = await asyncio.open_unix_connection(sock=control)
    evictions = ParentEvictions(writer)
    server = AdmissionServer(
        tls=tls, handlers=review.serving_handlers(settings.scheduler_provider,
                                                  evictions.handle),
        host=settings.host, port=settings.port, metrics=counts,
        shutdown_timeout=settings.shutdown_timeout)
    server.adopt(listeners)
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
            elif kind == EVICTION:
                evictions.answered(message[1], message[2])
            elif kind == METRICS:
                await send(writer, (METRICS, counts.snapshot()))
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


def ignore_stop_signals() -> None:
    """The parent decides when this process stops (``admission.process``)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def run(settings: ChildSettings, control: socket.socket,
        listeners: list[socket.socket]) -> int:
    """Serve until the parent says stop or is gone."""
    _setup_logging(settings.log_level, settings.log_format)
    import uvloop  # the event loop (``lws_operator.__main__`` says why)

    uvloop.run(serve(settings, control, listeners))
    return 0


def run_forked(control: socket.socket) -> int:
    """The forked child (``admission.fork``): wait for the parent to start it with its settings
    and sockets, then serve; exit at once if the parent is gone before."""
    ignore_stop_signals()
    start = receive_start(control)
    if start is None:
        return 0
    settings, listeners = start
    return run(settings, control, listeners)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="lws_operator.admission.child")
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--listen-fds", required=True)
    parser.add_argument("--settings", required=True)
    args = parser.parse_args(argv)
    settings = ChildSettings(**json.loads(args.settings))
    ignore_stop_signals()
    control = socket.socket(fileno=args.control_fd)
    listeners = inherited_sockets([int(fd) for fd in args.listen_fds.split(",") if fd])
    return run(settings, control, listeners)


if __name__ == "__main__":
    sys.exit(main())
