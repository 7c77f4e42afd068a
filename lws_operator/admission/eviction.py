"""The group disruption budget on the Eviction API (ours; ``logic.disruption`` decides).

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

Decisions are serialized by construction: :meth:`EvictionGuard.decide` is synchronous on the
parent's event loop, reading the cache and taking the reservation with no await in between, so
two evictions of different healthy groups arriving together are decided one after the other
and the second sees the first's reservation. Reservations live only in this process: with
several operator replicas behind the webhook Service, two evictions decided by two replicas at
the same moment can both be allowed (until each cache shows the other's deletion, a few
milliseconds); one replica, the default, has no such window.

A refusal is the API's "too many requests": code 429, reason ``TooManyRequests``, which the API
server passes on to the client (prefixed with the webhook's name), exactly the class of error a
PodDisruptionBudget's refusal is. ``kubectl drain`` retries both after 5 s (its
``evictPods``: ``IsTooManyRequests``), as do the cluster autoscaler and other evictors. Each
refusal is counted and recorded as a Warning Event ``EvictionRefused`` on the set (at most one
per set every :data:`EVENT_INTERVAL` seconds: a drain retries each pod every 5 s), which
``kubectl lws why`` reads.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from prometheus_client import CollectorRegistry

from lws_operator.admission.review import allowed, denied
from lws_operator.api import disruption
from lws_operator.api.constants import (
    EVENT_ACTION_DELETE,
    EVENT_TYPE_WARNING,
    REASON_EVICTION_REFUSED,
)
from lws_operator.api.view import group_index, lws_view
from lws_operator.kube.cache import ClusterCache, Key, owner_key
from lws_operator.kube.events import EventRecorder
from lws_operator.kube.group_metrics import GroupMetrics
from lws_operator.logic.disruption import (
    RESERVATION_SECONDS,
    decide,
    disrupted_groups,
    live_reservations,
)
from lws_operator.logic.events import Event

log = logging.getLogger(__name__)

# Seconds between two EvictionRefused Events of one set.
EVENT_INTERVAL = 30.0

Decider = Callable[[Mapping[str, Any]], Awaitable[dict[str, Any]]]


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
    """Decides evictions against the caches, keeps the reservations, counts and records."""

    def __init__(self, cache: ClusterCache, recorder: EventRecorder | None,
                 registry: CollectorRegistry | None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.cache = cache
        self.recorder = recorder
        self.metrics = GroupMetrics.for_registry(registry) if registry is not None else None
        self.clock = clock
        self.reserved: dict[Key, dict[str, float]] = {}
        self._last_event: dict[Key, float] = {}

    async def handle(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return self.decide(request)

    def decide(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """One eviction review's answer. Synchronous on purpose (module docstring)."""
        if request.get("operation") != "CREATE" or request.get("subResource") != "eviction":
            return allowed()
        if not self.cache.synced:
            return allowed()  # nothing known yet: as if the webhook were down
        namespace, name = str(request.get("namespace") or ""), str(request.get("name") or "")
        pod = self.cache["Pod"].get(namespace, name)
        owner = owner_key("Pod", pod) if pod is not None else None
        lws = self.cache["LeaderWorkerSet"].get(*owner) if owner is not None else None
        if pod is None or owner is None or lws is None:
            return allowed()
        view = lws_view(lws)
        budget = disruption.budget_of(view.annotations, view.replicas)
        if budget is None:
            self.reserved.pop(owner, None)
            return allowed()
        now = self.clock()
        pods = self.cache["Pod"].owned_by(owner)
        observed = disrupted_groups(pods, view.replicas, view.size, view.hashed)
        held = live_reservations(self.reserved.get(owner, {}), observed, now)
        decision = decide(group=group_index(pod), budget=budget, disrupted=observed | set(held),
                          set_name=f"{namespace}/{owner[1]}")
        if decision.reserve and not request.get("dryRun"):
            held[str(decision.group)] = now + RESERVATION_SECONDS
        if held:
            self.reserved[owner] = held
        else:
            self.reserved.pop(owner, None)
        verdict = "allowed" if decision.allowed else "refused"
        log.info("eviction of pod %s/%s (group %s of %s): %s; budget %d, disrupted %s",
                 namespace, name, decision.group, owner[1], verdict, budget,
                 list(decision.disrupted) or "none")
        if self.metrics is not None:
            self.metrics.evictions.labels(namespace, owner[1], verdict).inc()
            self.metrics.disrupted.labels(namespace, owner[1]).set(len(observed | set(held)))
        if decision.allowed:
            return allowed()
        if not request.get("dryRun"):
            self._record(owner, lws, name, decision.message, now)
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
