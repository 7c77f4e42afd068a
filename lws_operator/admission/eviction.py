"""The group disruption budget on the Eviction API (ours; ``logic.disruption.budget`` decides).

The webhook ``veviction.lws-operator.dev`` sees every ``CREATE`` of ``pods/eviction``. An
objectSelector cannot narrow it to our pods: for a subresource the API server matches the
selector against the object sent to the webhook, here the Eviction, which carries no labels of
its pod (the API server's documentation: "an object that cannot have labels ... is not
considered to match"). So every eviction reaches us and one that is not of a pod of a
LeaderWorkerSet with a budget is allowed at once; its failurePolicy is ``Ignore`` and its
timeout short, so an operator that is down or slow never blocks a drain.

Where it is decided. The answer needs the set's pods, which only the operator's main process
has (the watch caches, ``kube.cache``), and reservations every decision shares. The admission
child (``admission.process``) has neither, so the child forwards an eviction review over the
socket pair it already shares with its parent (the parent's certificates and metrics travel
there too) and the parent answers (:class:`EvictionGuard`). The alternative, a second HTTPS
listener in the main process, needs its own port, Service port, certificate serving and chart
values, for the one webhook whose latency matters least (a drain retries every 5 s). A parent
that does not answer within ``admission.process.EVICTION_FORWARD_TIMEOUT`` gets the eviction
allowed, as the failurePolicy would.

Decisions hold across replicas as a PodDisruptionBudget's do. An allowed eviction of a healthy
group's pod reserves the group in an annotation of the set, written with a merge patch that
carries the resourceVersion the decision read (``logic.disruption.reservations`` decides and
says what the annotation holds); the answer is given only once the write succeeded. Two
replicas deciding from the same version cannot both write: the second gets 409 Conflict, reads
the set again and decides again, now counting the first's reservation. After
:data:`MAX_ATTEMPTS` conflicts, or :data:`RETRY_SECONDS`, the eviction is refused with 429 as an
eviction whose PodDisruptionBudget keeps changing is, and the evictor retries. Within one
process the decisions about one set are serialized by a lock, so they never conflict with each
other. The set's version the cache holds may lag behind the guard's own last write; the guard
keeps that write's answer and decides from it until the cache moves on. A write that fails for
another reason (the API server away, a permission missing) allows the eviction, as the
webhook's failure policy would: a guard that cannot record never blocks a drain.

A refusal is the API's "too many requests": code 429, reason ``TooManyRequests``, which the API
server passes on to the client (prefixed with the webhook's name), exactly the class of error a
PodDisruptionBudget's refusal is. ``kubectl drain`` retries both after 5 s (its
``evictPods``: ``IsTooManyRequests``), as do the cluster autoscaler and other evictors. Each
refusal is counted and recorded as a Warning Event ``EvictionRefused`` on the set (at most one
per set every :data:`EVENT_INTERVAL` seconds: a drain retries each pod every 5 s), which
``kubectl lws why`` reads.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import quote

from prometheus_client import CollectorRegistry

from lws_operator.admission.answers import allowed, denied
from lws_operator.api import disruption
from lws_operator.api.constants import (
    EVENT_ACTION_DELETE,
    EVENT_TYPE_WARNING,
    GROUP,
    PLURAL,
    REASON_EVICTION_REFUSED,
    VERSION,
)
from lws_operator.api.view import group_index, lws_view, metadata
from lws_operator.kube.cache import ClusterCache, Key, owner_key
from lws_operator.kube.client import MERGE_PATCH, ApiException, KubeClient
from lws_operator.kube.connection import CONNECTION_ERRORS
from lws_operator.kube.events import EventRecorder
from lws_operator.kube.group_metrics import GroupMetrics
from lws_operator.logic.disruption.budget import Decision, disrupted_groups
from lws_operator.logic.disruption.reservations import (
    Plan,
    Reservation,
    parse_reservations,
    plan,
    reservation_patch,
)
from lws_operator.logic.objects.events import Event

log = logging.getLogger(__name__)

# Seconds between two EvictionRefused Events of one set.
EVENT_INTERVAL = 30.0
# Decisions one eviction may take when its reservation's write keeps conflicting, and the time
# they may take together (well within the child's wait for the answer,
# ``admission.process.EVICTION_FORWARD_TIMEOUT``).
MAX_ATTEMPTS = 5
RETRY_SECONDS = 2.5

# A write or read that failed for another reason than a conflict.
_FAILURES: tuple[type[BaseException], ...] = (ApiException, *CONNECTION_ERRORS)

Decider = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]


class Conflict(Exception):
    """The set changed since the decision read it."""


class ReservationStore(Protocol):
    """Where reservations are written: the set itself (:class:`ApiReservations`)."""

    async def read(self, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    async def write(self, lws: Mapping[str, Any], body: dict[str, Any]) -> Mapping[str, Any]:
        """The set after the merge patch ``body``; ``Conflict`` if it changed meanwhile."""
        ...


class ApiReservations:
    """Reservations in the set's annotation, through the API server."""

    def __init__(self, kube: KubeClient) -> None:
        self.kube = kube

    @staticmethod
    def _path(namespace: str, name: str) -> str:
        return f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}/{quote(name)}"

    async def read(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return await self.kube.get(self._path(namespace, name))

    async def write(self, lws: Mapping[str, Any], body: dict[str, Any]) -> Mapping[str, Any]:
        meta = metadata(lws)
        try:
            return await self.kube.request(
                "PATCH", self._path(str(meta.get("namespace")), str(meta.get("name"))),
                body=body, content_type=MERGE_PATCH, timeout=RETRY_SECONDS)
        except ApiException as exc:
            if exc.status == 409:
                raise Conflict from None
            raise


class LocalReservations:
    """Reservations kept in this process only (the answers of the writes are what the guard
    reads next): for a guard without an API client, such as the webhook tests'."""

    async def read(self, namespace: str, name: str) -> Mapping[str, Any] | None:
        return None

    async def write(self, lws: Mapping[str, Any], body: dict[str, Any]) -> Mapping[str, Any]:
        meta = dict(metadata(lws))
        meta["annotations"] = {**(meta.get("annotations") or {}),
                               **body["metadata"]["annotations"]}
        return {**lws, "metadata": meta}


@dataclass
class _Written:
    """The set as the guard's last write left it, and the version the cache held then."""

    cached_version: str | None
    lws: Mapping[str, Any]


def too_many_requests(message: str) -> dict[str, Any]:
    """The Eviction API's own refusal (a PodDisruptionBudget's): 429 ``TooManyRequests``."""
    return denied(429, message, "TooManyRequests")


class EvictionEndpoint:
    """What serves the eviction path: the guard once the controllers' caches exist, allowing
    everything before (and with ``--disable-controllers``, where no cache is kept)."""

    def __init__(self) -> None:
        self.decider: Decider | None = None

    async def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        if self.decider is None:
            return allowed()
        return await self.decider(request)


class EvictionGuard:
    """Decides evictions against the caches and the set's reservations, counts and records."""

    def __init__(self, cache: ClusterCache, recorder: EventRecorder | None,
                 registry: CollectorRegistry | None,
                 clock: Callable[[], float] = time.time, *,
                 store: ReservationStore | None = None) -> None:
        self.cache = cache
        self.recorder = recorder
        self.metrics = GroupMetrics.for_registry(registry) if registry is not None else None
        self.clock = clock  # wall-clock seconds: reservations expire alike on every replica
        self.store: ReservationStore = store if store is not None else LocalReservations()
        self._written: dict[Key, _Written] = {}
        self._locks: dict[Key, tuple[asyncio.Lock, int]] = {}  # and its users
        self._last_event: dict[Key, float] = {}

    async def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return await self.decide(request)

    async def decide(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """One eviction review's answer (module docstring)."""
        if request.get("operation") != "CREATE" or request.get("subResource") != "eviction":
            return allowed()
        if not self.cache.synced:
            return allowed()  # nothing known yet: as if the webhook were down
        namespace, name = str(request.get("namespace") or ""), str(request.get("name") or "")
        pod = self.cache["Pod"].get(namespace, name)
        owner = owner_key("Pod", pod) if pod is not None else None
        if pod is None or owner is None or self.cache["LeaderWorkerSet"].get(*owner) is None:
            return allowed()
        lock, users = self._locks.get(owner) or (asyncio.Lock(), 0)
        self._locks[owner] = (lock, users + 1)
        try:
            async with lock:
                return await self._decide(request, owner, pod)
        finally:
            lock, users = self._locks[owner]
            if users == 1:  # no other decision about the set waits: forget the lock
                del self._locks[owner]
            else:
                self._locks[owner] = (lock, users - 1)

    def _latest(self, owner: Key) -> Mapping[str, Any] | None:
        """The set from the cache, unless the guard's own write is newer than the cache."""
        cached = self.cache["LeaderWorkerSet"].get(*owner)
        written = self._written.get(owner)
        if cached is None:
            self._written.pop(owner, None)
            return None
        version = metadata(cached).get("resourceVersion")
        if written is not None and written.cached_version == version:
            return written.lws
        self._written.pop(owner, None)
        return cached

    async def _decide(self, request: Mapping[str, Any], owner: Key,
                      pod: Mapping[str, Any]) -> dict[str, Any]:
        namespace, name = str(request.get("namespace") or ""), str(request.get("name") or "")
        dry_run = bool(request.get("dryRun"))
        started = self.clock()
        lws = self._latest(owner)
        for attempt in range(MAX_ATTEMPTS):
            if lws is None:
                return allowed()  # the set is gone
            outcome = self._plan(owner, lws, pod, namespace)
            if outcome is None:
                return allowed()  # the set has no group disruption budget
            if outcome.write is not None and not dry_run:
                # what the cache shows now, which the write is newer than (``_latest``)
                cached_version = self._cached_version(owner)
                try:
                    failed = await self._reserve(owner, lws, outcome.write, cached_version,
                                                 namespace, name)
                except Conflict:
                    if not self._may_retry(attempt, started):
                        break
                    try:
                        lws = await self._read_again(owner, attempt, cached_version)
                    except _FAILURES as exc:
                        return self._unrecorded(namespace, name, exc)
                    continue
                if failed is not None:
                    return failed
            decision = outcome.decision
            return self._answer(request, owner, lws, name, decision,
                                len(decision.disrupted)
                                + (1 if decision.reserve and not dry_run else 0))
        message = (f"Cannot evict pod {name} now: the group disruption budget of "
                   f"LeaderWorkerSet {namespace}/{owner[1]} is being changed by other "
                   "evictions; try again.")
        log.info("eviction of pod %s/%s: refused after %d conflicting writes", namespace, name,
                 MAX_ATTEMPTS)
        if self.metrics is not None:
            self.metrics.evictions.labels(namespace, owner[1], "refused").inc()
        return too_many_requests(message)

    def _plan(self, owner: Key, lws: Mapping[str, Any], pod: Mapping[str, Any],
              namespace: str) -> Plan | None:
        """What the set's budget and reservations make of evicting ``pod`` now (``plan``), or
        None when the set has no group disruption budget."""
        view = lws_view(lws)
        budget = disruption.budget_of(view.annotations, view.replicas)
        if budget is None:
            return None
        pods = self.cache["Pod"].owned_by(owner)
        observed = disrupted_groups(pods, view.replicas, view.size, view.hashed)
        by_uid = {str(metadata(p).get("uid")): p for p in pods}
        return plan(reservations=parse_reservations(view.annotations), pods=by_uid,
                    observed=observed, group=group_index(pod),
                    uid=str(metadata(pod).get("uid")), budget=budget, now=self.clock(),
                    set_name=f"{namespace}/{owner[1]}")

    def _cached_version(self, owner: Key) -> Any:
        cached = self.cache["LeaderWorkerSet"].get(*owner)
        return metadata(cached).get("resourceVersion") if cached else None

    async def _reserve(self, owner: Key, lws: Mapping[str, Any], write: dict[str, Reservation],
                       cached_version: Any, namespace: str, name: str) -> dict[str, Any] | None:
        """Write the set's reservations (``write``) over the version decided from: None once
        written, else the answer to give (the set gone: allowed; the write failed: allowed
        unrecorded). ``Conflict`` when someone wrote the set meanwhile."""
        body = reservation_patch(write, str(metadata(lws).get("resourceVersion") or ""))
        try:
            written = await self.store.write(lws, body)
        except Conflict:
            raise
        except _FAILURES as exc:
            if isinstance(exc, ApiException) and exc.status == 404:
                return allowed()
            return self._unrecorded(namespace, name, exc)
        self._written[owner] = _Written(cached_version, written)
        return None

    def _may_retry(self, attempt: int, started: float) -> bool:
        """Whether a decision that lost a write race is made again (``MAX_ATTEMPTS``,
        ``RETRY_SECONDS``)."""
        return attempt + 1 < MAX_ATTEMPTS and self.clock() - started <= RETRY_SECONDS

    async def _read_again(self, owner: Key, attempt: int,
                          cached_version: Any) -> Mapping[str, Any] | None:
        """The set as written by whoever won the race (another replica's reservation), after
        a short random pause that keeps two replicas from colliding again in step."""
        await asyncio.sleep(random.uniform(0, 0.02 * 2 ** attempt))
        lws = await self.store.read(owner[0], owner[1])
        if lws is not None:
            self._written[owner] = _Written(cached_version, lws)
        return lws

    def _unrecorded(self, namespace: str, name: str, exc: BaseException) -> dict[str, Any]:
        log.error("eviction of pod %s/%s: allowed without a reservation, which could not be "
                  "written: %s", namespace, name, exc)
        return allowed()

    def _answer(self, request: Mapping[str, Any], owner: Key, lws: Mapping[str, Any],
                name: str, decision: Decision, disrupted: int) -> dict[str, Any]:
        namespace = owner[0]
        verdict = "allowed" if decision.allowed else "refused"
        log.info("eviction of pod %s/%s (group %s of %s): %s; budget %d, disrupted %s",
                 namespace, name, decision.group, owner[1], verdict, decision.budget,
                 list(decision.disrupted) or "none")
        if self.metrics is not None:
            self.metrics.evictions.labels(namespace, owner[1], verdict).inc()
            self.metrics.disrupted.labels(namespace, owner[1]).set(disrupted)
        if decision.allowed:
            return allowed()
        if not request.get("dryRun"):
            self._record(owner, lws, name, decision.message, self.clock())
        return too_many_requests(decision.message)

    def _record(self, owner: Key, lws: Mapping[str, Any], pod: str, message: str,
                now: float) -> None:
        """The EvictionRefused Event, at most one per set per ``EVENT_INTERVAL``."""
        last = self._last_event.get(owner)
        if self.recorder is None or (last is not None and now - last < EVENT_INTERVAL):
            return
        self._last_event[owner] = now
        event = Event(REASON_EVICTION_REFUSED, EVENT_TYPE_WARNING, EVENT_ACTION_DELETE,
                      f"Refused the eviction of pod {pod}: {message}")
        self.recorder.record(lws, event)  # queued: written by the controller's Event senders
