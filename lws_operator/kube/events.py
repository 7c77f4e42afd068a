"""Recording Kubernetes Events (``events.k8s.io/v1``) on LeaderWorkerSets and DisaggregatedSets.

Events are the user's window into what the controller did (``kubectl describe lws``) and
upstream's tests match their reason, type and note, so the fields follow upstream's events
(leaderworkerset_controller.go). Recording is best effort: a failed Event write is logged and
never fails the pass that decided it.

Recording never waits for the write either. ``record`` builds the Event (its ``eventTime`` is
when the pass decided it), puts it in a bounded queue (``kube.event_queue``) and returns; a few
senders, running while the controller does (``sending``), write the queue's Events through the
same client, so the process-wide rate limiter still paces them. An Event write was slow
under load, and a pass recorded one between its ControllerRevision and leader StatefulSet
writes and one per StatefulSet it created. Upstream's recorder (client-go's event broadcaster)
is asynchronous the same way: a bounded queue drained in the background, Events dropped when it
is full. Events regarding one object are written in the order they were recorded; a full queue
drops the new Event, counts it (``lws_operator_events_dropped_total``) and logs a warning at
most every ``DROP_LOG_INTERVAL`` seconds. On shutdown, what is queued is written for at most
``DRAIN_SECONDS``; the rest is logged as lost.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import socket
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from lws_operator.api.constants import EVENT_REPORTING_CONTROLLER
from lws_operator.kube.client import KubeClient
from lws_operator.kube.event_queue import EventQueue
from lws_operator.kube.metrics import EventMetrics
from lws_operator.logic.objects.events import Event

log = logging.getLogger(__name__)

# Events waiting to be written, at most (client-go's broadcaster queues 1,000). A benchmark
# rollout of 20 sets records about 300 Events over half a minute; at rest, none.
QUEUE_BOUND = 1000
# Concurrent Event writes: enough that a burst (a pass creating a set's worker StatefulSets
# records one Event each) does not queue behind one write at a time.
SENDERS = 4
# Seconds the queued Events may take to be written when the controller stops.
DRAIN_SECONDS = 3.0
# Seconds between two warnings about dropped Events (every drop is counted).
DROP_LOG_INTERVAL = 10.0

ObjectKey = tuple[str, str, str]  # kind, namespace, name of the object the Event regards


def _reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion")}


def _object_key(obj: Mapping[str, Any]) -> ObjectKey:
    meta = obj.get("metadata") or {}
    return (str(obj.get("kind")), str(meta.get("namespace")), str(meta.get("name")))


class EventRecorder:
    """Queues Events regarding an object, optionally with a related object, and writes them in
    the background while ``sending`` is open."""

    def __init__(self, kube: KubeClient, instance: str | None = None,
                 controller: str = EVENT_REPORTING_CONTROLLER, *,
                 registry: CollectorRegistry | None = None, senders: int = SENDERS,
                 bound: int = QUEUE_BOUND, clock: Callable[[], float] = time.monotonic) -> None:
        """``controller``: the Events' ``reportingController`` (upstream's recorder name:
        ``leaderworkerset``, or ``disaggregatedset`` for the DisaggregatedSet controller), and
        the label of the drop counter (on ``registry``, when given)."""
        self.kube = kube
        self.controller = controller
        self.instance = instance or os.environ.get("POD_NAME") or socket.gethostname()
        self.senders = senders
        self.clock = clock
        self.queue: EventQueue[ObjectKey, dict[str, Any]] = EventQueue(bound)
        self.metrics = EventMetrics.for_registry(registry) if registry is not None else None
        if self.metrics is not None:
            self.metrics.dropped.labels(controller)  # the series exists from the first scrape
        self._wake = asyncio.Event()  # something may be ready to take, or the senders stop
        self._idle = asyncio.Event()  # nothing queued, nothing being written
        self._idle.set()
        self._closing = False
        self._last_warning: float | None = None
        self._unlogged = 0

    def body(self, regarding: Mapping[str, Any], event: Event,
             related: Mapping[str, Any] | None = None) -> dict[str, Any]:
        meta = regarding.get("metadata") or {}
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}",
                         "namespace": meta.get("namespace")},
            "eventTime": now,
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": event.action,
            "reason": event.reason,
            "type": event.type,
            "note": event.note[:1024],
            "regarding": _reference(regarding),
        }
        if related is not None:
            body["related"] = _reference(related)
        return body

    def record(self, regarding: Mapping[str, Any], event: Event,
               related: Mapping[str, Any] | None = None) -> None:
        """Queue the Event; it is written by a sender, after the Events queued before it
        regarding the same object. Returns at once (dropping the Event when the queue is
        full)."""
        if self.queue.put(_object_key(regarding), self.body(regarding, event, related)):
            self._idle.clear()
            self._wake.set()
            return
        self._dropped(event)

    def _dropped(self, event: Event) -> None:
        if self.metrics is not None:
            self.metrics.dropped.labels(self.controller).inc()
        self._unlogged += 1
        now = self.clock()
        if self._last_warning is not None and now - self._last_warning < DROP_LOG_INTERVAL:
            return
        log.warning("dropped %d Event(s) (the latest: %s %r): %d Events are already waiting "
                    "to be written; every drop is counted in "
                    "lws_operator_events_dropped_total", self._unlogged, event.reason,
                    event.note, len(self.queue))
        self._last_warning = now
        self._unlogged = 0

    async def write(self, body: Mapping[str, Any]) -> None:
        """One Event to the API server, now; a failure is logged, never raised."""
        namespace = body["metadata"]["namespace"]
        try:
            await self.kube.request(
                "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", body=body)
        except Exception as exc:  # best effort: never fail anything over an Event
            log.warning("could not record event %s %r: %s", body.get("reason"),
                        body.get("note"), exc)

    async def _send(self) -> None:
        """One sender: the queue's Events in turn, until the senders stop and none is left to
        take."""
        while True:
            taken = self.queue.take()
            if taken is None:
                if self._closing:
                    return
                self._wake.clear()
                await self._wake.wait()
                continue
            key, body = taken
            try:
                await self.write(body)
            finally:
                self.queue.done(key)
                if self.queue.has_ready:
                    self._wake.set()  # the object's next Event, for whichever sender waits
                elif self.queue.idle:
                    self._idle.set()

    async def flush(self) -> None:
        """Until every Event queued so far is written or given up (only while ``sending``)."""
        await self._idle.wait()

    @contextlib.asynccontextmanager
    async def sending(self, drain: float = DRAIN_SECONDS) -> AsyncIterator[None]:
        """The senders run while the context is open. On leaving, the queued Events are
        written for at most ``drain`` seconds; what is left then is logged and lost."""
        self._closing = False
        tasks = [asyncio.create_task(self._send(), name=f"events-{self.controller}-{i}")
                 for i in range(self.senders)]
        try:
            yield
        finally:
            self._closing = True
            self._wake.set()
            try:
                await asyncio.wait(tasks, timeout=drain)
                unsent = len(self.queue) + self.queue.in_flight
                if unsent:
                    log.warning("stopping: %d Event(s) of the %s controller not recorded (not "
                                "written within %g s)", unsent, self.controller, drain)
            finally:
                for task in tasks:
                    task.cancel()  # those still writing (a no-op for the others)
                await asyncio.gather(*tasks, return_exceptions=True)
