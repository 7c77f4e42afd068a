"""The admission webhooks in a process of their own, so that no reconcile pass delays an admission.

Served on the controllers' event loop, an admission waited behind whatever pass held the loop;
served from a thread of the same process, it still waited for the GIL, which the controllers'
CPU work holds for up to the interpreter's switch interval at a time, several times per request
(``docs/performance.md`` has the figures). So ``lws-operator run`` serves admissions
from a child process (``python -m lws_operator.admission.child``, the same interpreter and
package), and keeps everything that talks to the API server in the parent:

* **Port.** The parent binds the webhook port at start (a taken port is still one line at
  startup, ``listener.bind``) and hands the bound sockets to the child, which listens on them
  once it has a certificate. The chart's ports and values are unchanged.
* **Certificates.** The parent's certificate manager (``kube.certs``) sends each certificate it
  would have served to the child over a private socket pair and waits for the child to confirm
  that new connections get it; rotation is unchanged.
* **Metrics.** The child counts its admissions on a registry of its own under the same names
  (``admission.metrics``); before each scrape of the operator's ``/metrics`` the parent asks the
  child for them (``refresh``) and serves them with its own (``ChildMetrics``), so one scrape
  shows everything, as before. Prometheus' multiprocess mode was not used: it needs a shared
  writable directory, changes how every gauge of the process aggregates, and would have touched
  every metric of the controllers to move three.
* **Evictions.** The group disruption budget needs the watch caches, which only the parent has:
  the child forwards each eviction review to the parent and serves its answer
  (``admission.eviction`` says why this and not a listener in the parent).
* **Readiness.** Ready once the child confirmed the certificate of the Secret.
* **Lifetime.** ``lws-operator run`` forks the child at its start, before the controllers'
  imports and the event loop, so that the two processes share the interpreter and the modules
  both import (``admission.fork``); it is started, with its settings and the sockets, when the
  first certificate is served. Without a forked child (an embedder, a restart) the child is
  started as a new interpreter then. The child stops when the parent tells it to (after
  unregistering, in-flight admissions drain) or when the parent is gone: the parent's end of
  the socket pair closes with it, killed or not, and the child drains and exits on that end of
  file. It ignores SIGINT and SIGTERM (a terminal's Ctrl-C reaches the whole process group, and
  the parent must unregister before the webhooks stop). A child that dies is started again
  (spawned), with the last certificate.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import asdict, replace
from typing import Any, Protocol

from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector, CollectorRegistry

from lws_operator.admission.counts import Snapshot
from lws_operator.admission.fork import ForkedChild, ForkedProcess
from lws_operator.admission.listener import bind, close
from lws_operator.admission.metrics import child_families
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
    send,
    send_start,
)

__all__ = [  # the wire's names, for callers that know only this module
    "CERTIFICATE", "EVICTION", "EVICTION_FORWARD_TIMEOUT", "METRICS", "SERVING", "STOP",
    "AdmissionProcess", "ChildMetrics", "ChildSettings", "fingerprint", "inherited_sockets",
    "receive", "send",
]

log = logging.getLogger(__name__)

_ANSWER_TIMEOUT = 30.0
_METRICS_TIMEOUT = 2.0


class Child(Protocol):
    """A running child: ``asyncio.subprocess.Process`` (spawned) or ``ForkedProcess``."""

    @property
    def pid(self) -> int: ...

    @property
    def returncode(self) -> int | None: ...

    async def wait(self) -> int: ...

    def kill(self) -> None: ...


class ChildMetrics(Collector):
    """The child's counts as last fetched (``admission.counts``), served from the parent's
    registry as the metric families the child would have exported."""

    def __init__(self) -> None:
        self.snapshot: Snapshot | None = None

    def collect(self) -> Iterable[Metric]:
        return child_families(self.snapshot) if self.snapshot is not None else []

    def describe(self) -> Iterable[Metric]:
        return []  # unknown until the child answers: no name check at registration


class AdmissionProcess:
    """The parent's handle on the admission child: same interface as ``AdmissionServer`` for
    ``WebhookRuntime`` (``reserve``, ``serve``, ``listening``, ``port``, ``stop``)."""

    def __init__(self, settings: ChildSettings,
                 registry: CollectorRegistry | None = None,
                 forked: ForkedChild | None = None) -> None:
        """``forked``: a child forked at the start (``admission.fork``), waiting to be
        started; the first start uses it, later ones spawn."""
        self.settings = settings
        self.host = settings.host
        self.port = settings.port
        self.metrics = ChildMetrics()
        if registry is not None:
            registry.register(self.metrics)
        self._reserved: list[socket.socket] = []
        self._forked = forked
        self._child: Child | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._answers: dict[str, asyncio.Future[Any]] = {}
        self._certificate: tuple[bytes, bytes] | None = None
        self._serving: str | None = None
        self._stopping = False
        self._lock = asyncio.Lock()
        self.restarts = 0
        # Answers the evictions the child forwards (``admission.eviction``); None allows them.
        self.on_eviction: Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]] | None = None
        self._evictions: set[asyncio.Task[None]] = set()

    @property
    def listening(self) -> bool:
        """The child runs and confirmed the current certificate."""
        return (self._child is not None and self._child.returncode is None
                and self._certificate is not None
                and self._serving == fingerprint(self._certificate[0]))

    @property
    def pid(self) -> int | None:
        return self._child.pid if self._child is not None else None

    def reserve(self) -> None:
        """Bind the port now (``OSError`` if that fails); the child listens on it."""
        if not self._reserved:
            self._reserved = bind(self.host, self.port)
            self.port = int(self._reserved[0].getsockname()[1])

    async def _start_child(self) -> None:
        self.reserve()
        settings = replace(self.settings, port=self.port)
        forked, self._forked = self._forked, None
        parent_end = None
        if forked is not None:
            parent_end = await self._start_forked(forked, settings)
        if parent_end is None:
            parent_end = await self._spawn(settings)
        reader, self._writer = await asyncio.open_unix_connection(sock=parent_end)
        self._serving = None
        assert self._child is not None
        self._reader_task = asyncio.create_task(self._read(reader, self._child),
                                                name="admission-child")
        log.info("admission webhooks served by process %d%s", self._child.pid,
                 " (forked at start)" if isinstance(self._child, ForkedProcess) else "")

    async def _start_forked(self, forked: ForkedChild,
                            settings: ChildSettings) -> socket.socket | None:
        """Start the child forked at start; its end of the pair, or None if it is gone."""
        control = forked.take()
        child = ForkedProcess(forked.pid)
        try:
            send_start(control, settings, self._reserved)
        except OSError as exc:
            log.error("the admission process forked at start is gone (%s, status %s): "
                      "starting a new one", exc, child.returncode)
            control.close()
            child.kill()
            await child.wait()
            return None
        self._child = child
        return control

    async def _spawn(self, settings: ChildSettings) -> socket.socket:
        """A new interpreter as the child; the parent's end of its pair."""
        parent_end, child_end = socket.socketpair()
        fds = [child_end.fileno(), *(s.fileno() for s in self._reserved)]
        try:
            self._child = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "lws_operator.admission.child",
                "--control-fd", str(fds[0]), "--listen-fds", ",".join(map(str, fds[1:])),
                "--settings", _encode(asdict(settings)),
                pass_fds=fds, stdin=asyncio.subprocess.DEVNULL)
        except BaseException:
            parent_end.close()
            raise
        finally:
            child_end.close()
        return parent_end

    async def _read(self, reader: asyncio.StreamReader, child: Child) -> None:
        """The child's answers, until it is gone; then, unless we are stopping, a new child."""
        while (message := await receive(reader)) is not None:
            self._take(message)
        code = await child.wait()
        for future in self._answers.values():
            if not future.done():
                future.set_exception(ConnectionError("the admission process exited"))
        self._answers.clear()
        if self._stopping:
            return
        log.error("the admission process %d exited with status %s; starting it again",
                  child.pid, code)
        await self._replace_child()

    def _take(self, message: tuple[Any, ...]) -> None:
        """One message of the child: an eviction to decide, or the answer to a question."""
        kind = message[0]
        if kind == EVICTION:
            task = asyncio.create_task(self._answer_eviction(message[1], message[2]))
            self._evictions.add(task)
            task.add_done_callback(self._evictions.discard)
            return
        if kind == SERVING:
            self._serving = message[1]
        elif kind == METRICS:
            self.metrics.snapshot = message[1]
        future = self._answers.pop(kind, None)
        if future is not None and not future.done():
            future.set_result(message[1])

    async def _replace_child(self) -> None:
        """Start a new child, after a backoff that grows with each restart, until one starts
        or we stop; hand it the certificate served. From then on the new child's reader
        watches it (and starts the next one)."""
        while not self._stopping:
            self.restarts += 1
            await asyncio.sleep(min(0.5 * self.restarts, 10.0))
            if self._stopping:
                return
            async with self._lock:
                try:
                    await self._start_child()
                except OSError as exc:
                    log.error("starting the admission process again failed: %s", exc)
                    continue
                if self._certificate is not None:
                    await self._hand_certificate(self._certificate)
            return

    async def _hand_certificate(self, certificate: tuple[bytes, bytes]) -> None:
        """Send the new child the certificate; one that does not take it is killed, so that
        its reader starts another."""
        try:
            await self._ask(CERTIFICATE, *certificate)
        except (OSError, TimeoutError) as exc:  # ConnectionError is an OSError
            log.error("the new admission process did not take the certificate "
                      "(%s): starting another", exc)
            if self._child is not None and self._child.returncode is None:
                self._child.kill()

    async def _answer_eviction(self, ident: int, request: Mapping[str, Any]) -> None:
        """Decide one forwarded eviction and send the answer back (lost if the child is)."""
        decide = self.on_eviction
        try:
            answer = await decide(request) if decide is not None else {"allowed": True}
        except Exception:
            log.exception("deciding a forwarded eviction failed; allowing it")
            answer = {"allowed": True}
        writer = self._writer
        if writer is not None:
            with contextlib.suppress(ConnectionError, OSError):
                await send(writer, (EVICTION, ident, answer))

    async def _ask(self, kind: str, *payload: Any) -> Any:
        """Send a request and wait for its answer (answers of one kind come in order)."""
        assert self._writer is not None
        answer_kind = SERVING if kind == CERTIFICATE else kind
        future = self._answers.get(answer_kind)
        if future is None or future.done():
            future = self._answers[answer_kind] = asyncio.get_running_loop().create_future()
        await send(self._writer, (kind, *payload))
        timeout = _METRICS_TIMEOUT if kind == METRICS else _ANSWER_TIMEOUT
        return await asyncio.wait_for(asyncio.shield(future), timeout)

    async def serve(self, cert: bytes, key: bytes) -> None:
        """Serve ``cert`` from now on: returns once the child confirms that new connections
        get it (the first time: that it listens)."""
        async with self._lock:
            self._certificate = (cert, key)
            if self._child is None:
                await self._start_child()
            served = await self._ask(CERTIFICATE, cert, key)
        if served != fingerprint(cert):
            raise RuntimeError("the admission process serves another certificate")

    async def refresh(self) -> None:
        """Fetch the child's metrics (before a scrape); the last ones stay on failure."""
        if self._writer is None or self._child is None or self._child.returncode is not None:
            return
        try:
            await self._ask(METRICS)
        except (TimeoutError, ConnectionError, OSError) as exc:
            log.warning("could not fetch the admission process's metrics: %s",
                        exc or type(exc).__name__)

    async def stop(self) -> None:
        """Tell the child to stop accepting and drain its in-flight admissions, wait for it
        (killing it after its shutdown timeout and a margin), release the port. A forked child
        never started is told by the end of its pair."""
        self._stopping = True
        forked, self._forked = self._forked, None
        if forked is not None:
            await _discard(forked)
        child, writer = self._child, self._writer
        if child is not None and child.returncode is None and writer is not None:
            with contextlib.suppress(ConnectionError, OSError):
                await send(writer, (STOP,))
            try:
                await asyncio.wait_for(child.wait(), self.settings.shutdown_timeout + 5.0)
            except TimeoutError:
                log.warning("the admission process %d did not stop; killing it", child.pid)
                child.kill()
                await child.wait()
        if writer is not None:
            writer.close()
        if self._reader_task is not None:
            await asyncio.gather(self._reader_task, return_exceptions=True)
        reserved, self._reserved = self._reserved, []
        close(reserved)


async def _discard(forked: ForkedChild) -> None:
    """A forked child that was never started: closing its pair ends it; reap it."""
    control = forked.take()
    child = ForkedProcess(forked.pid)
    control.close()
    try:
        await asyncio.wait_for(child.wait(), 5.0)
    except TimeoutError:
        child.kill()
        await child.wait()


def _encode(settings: dict[str, Any]) -> str:
    import json

    return json.dumps(settings, separators=(",", ":"))
