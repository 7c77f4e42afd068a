"""The operator's Prometheus registry and the kube layer's metric families, in one place.

Names and labels are controller-runtime's (its pkg/metrics), so dashboards and alerts built
for the Go controller keep working; ``lws_operator_api_requests_total`` is ours, because
controller-runtime's request counter cannot tell a status write from a spec write.

Several controllers (LeaderWorkerSet, pod) share one registry and a family may be registered on a
registry only once, so each family set is created once per registry (``for_registry``) and
controllers only pick their label values. Tests pass a fresh registry each.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import TypeVar

import prometheus_client
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    PlatformCollector,
    ProcessCollector,
)

__all__ = [
    "RECONCILE_TIME_BUCKETS",
    "REST_LATENCY_BUCKETS",
    "WORKQUEUE_BUCKETS",
    "ClientMetrics",
    "EventMetrics",
    "ReconcileMetrics",
    "WatchMetrics",
    "WorkqueueMetrics",
    "new_registry",
]

# 1e-8 ... 1e3: ExponentialBuckets(10e-9, 10, 12).
WORKQUEUE_BUCKETS = tuple(10e-9 * 10**i for i in range(12))

RECONCILE_TIME_BUCKETS = (
    0.005, 0.01, 0.025, 0.05,
    0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0,
    6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0, 50.0, 60.0,
)

REST_LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)


def new_registry() -> CollectorRegistry:
    """The process's registry: the process, platform and GC collectors, and no ``*_created``
    series (which would double the number of counter series for nothing)."""
    prometheus_client.disable_created_metrics()
    registry = CollectorRegistry()
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


T = TypeVar("T")
_families: weakref.WeakKeyDictionary[CollectorRegistry, dict[type, object]] = (
    weakref.WeakKeyDictionary())
_lock = threading.Lock()


def _once(registry: CollectorRegistry, kind: type[T], make: Callable[[], T]) -> T:
    with _lock:
        per_registry = _families.setdefault(registry, {})
        if kind not in per_registry:
            per_registry[kind] = make()
        found: T = per_registry[kind]  # type: ignore[assignment]
        return found


class ClientMetrics:
    """Every API call: controller-runtime's ``rest_client_requests_total{code,method,host}``,
    ``rest_client_rate_limiter_duration_seconds{verb,host}`` (time spent waiting for a token),
    and ``lws_operator_api_requests_total{verb,resource,code}`` by Kubernetes verb."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.requests = Counter(
            "rest_client_requests_total",
            "API server requests by HTTP status code, method and API server host.",
            ["code", "method", "host"], registry=registry)
        self.rate_limiter_duration = Histogram(
            "rest_client_rate_limiter_duration_seconds",
            "Seconds a request waited for a token of the client-side rate limiter.",
            ["verb", "host"], buckets=REST_LATENCY_BUCKETS, registry=registry)
        self.api_requests = Counter(
            "lws_operator_api_requests_total",
            "API requests by Kubernetes verb, resource (with subresource) and status code.",
            ["verb", "resource", "code"], registry=registry)

    @classmethod
    def for_registry(cls, registry: CollectorRegistry) -> ClientMetrics:
        return _once(registry, cls, lambda: cls(registry))


class WorkqueueMetrics:
    """controller-runtime's ``workqueue_*`` families, labelled ``{name, controller}``
    (``workqueue_depth`` also ``priority``, always empty here)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["name", "controller"]
        self.depth = Gauge(
            "workqueue_depth", "Keys waiting to be processed",
            [*labels, "priority"], registry=registry)
        self.adds = Counter(
            "workqueue_adds_total", "Keys added (not counting adds of a key already waiting)",
            labels, registry=registry)
        self.queue_duration = Histogram(
            "workqueue_queue_duration_seconds",
            "Seconds from a key's add to a worker taking it",
            labels, buckets=WORKQUEUE_BUCKETS, registry=registry)
        self.work_duration = Histogram(
            "workqueue_work_duration_seconds",
            "Seconds a worker spent on a key, from taking it to done",
            labels, buckets=WORKQUEUE_BUCKETS, registry=registry)
        self.unfinished_work = Gauge(
            "workqueue_unfinished_work_seconds",
            "Seconds spent so far on the keys being processed now (a steady rise means a "
            "stuck worker)",
            labels, registry=registry)
        self.longest_running = Gauge(
            "workqueue_longest_running_processor_seconds",
            "Seconds the longest key in progress has been processed",
            labels, registry=registry)
        self.retries = Counter(
            "workqueue_retries_total", "Delayed re-adds (backoff retries and requeue-after)",
            labels, registry=registry)

    @classmethod
    def for_registry(cls, registry: CollectorRegistry) -> WorkqueueMetrics:
        return _once(registry, cls, lambda: cls(registry))


class ReconcileMetrics:
    """controller-runtime's ``controller_runtime_*`` reconcile families, labelled
    ``{controller}`` (``reconcile_total`` also ``result``)."""

    RESULTS = ("success", "error", "requeue", "requeue_after")

    def __init__(self, registry: CollectorRegistry) -> None:
        self.total = Counter(
            "controller_runtime_reconcile_total",
            "Reconcile passes by result",
            ["controller", "result"], registry=registry)
        self.errors = Counter(
            "controller_runtime_reconcile_errors_total",
            "Reconcile passes that raised",
            ["controller"], registry=registry)
        self.panics = Counter(
            "controller_runtime_reconcile_panics_total",
            "Reconcile passes that raised an unexpected exception",
            ["controller"], registry=registry)
        self.time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Seconds per reconcile pass",
            ["controller"], buckets=RECONCILE_TIME_BUCKETS, registry=registry)
        self.max_concurrent = Gauge(
            "controller_runtime_max_concurrent_reconciles",
            "Number of workers of the controller",
            ["controller"], registry=registry)
        self.active_workers = Gauge(
            "controller_runtime_active_workers",
            "Workers busy with a reconcile pass now",
            ["controller"], registry=registry)

    @classmethod
    def for_registry(cls, registry: CollectorRegistry) -> ReconcileMetrics:
        return _once(registry, cls, lambda: cls(registry))

    def init(self, controller: str) -> None:
        """Create every series of ``controller`` at zero, so rates work from the first scrape
        (as controller-runtime does when a controller starts)."""
        for result in self.RESULTS:
            self.total.labels(controller, result)
        self.errors.labels(controller)
        self.panics.labels(controller)


class LeaderElectionMetrics:
    """controller-runtime's ``leader_election_master_status{name}``: 1 while this process
    holds the Lease ``name``, else 0."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.status = Gauge(
            "leader_election_master_status",
            "Whether this process is the leader (1) or a standby (0) of the lease 'name'",
            ["name"], registry=registry)

    @classmethod
    def for_registry(cls, registry: CollectorRegistry) -> LeaderElectionMetrics:
        return _once(registry, cls, lambda: cls(registry))


class WatchMetrics:
    """How the watches recover from gaps (``kube.watch``, ``kube.list_watch``):
    ``lws_operator_watch_relistings_total{kind}`` (a kind listed again because its watch
    expired: 410 Gone) and ``lws_operator_watch_relisting_deletions_total{kind}`` (cached
    objects a relisting lacked, delivered as deletions: their DELETED event never came). Also
    ``lws_operator_watch_events_unchanged_total{kind}``: events of an owner (a
    LeaderWorkerSet, a DisaggregatedSet) that changed nothing the cache keeps of it but its
    resourceVersion (the echoes of the operator's status writes, mostly), which wake no pass."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.relistings = Counter(
            "lws_operator_watch_relistings_total",
            "Listings of a kind after its first one (its watch expired, 410 Gone), by kind.",
            ["kind"], registry=registry)
        self.relisting_deletions = Counter(
            "lws_operator_watch_relisting_deletions_total",
            "Cached objects a relisting lacked (deleted while the watch was down, their "
            "DELETED event never seen), delivered as deletions, by kind.",
            ["kind"], registry=registry)
        self.unchanged = Counter(
            "lws_operator_watch_events_unchanged_total",
            "Watch events of an owner that changed nothing the cache keeps of it but its "
            "resourceVersion (the echoes of the operator's status writes, mostly), so woke no "
            "pass, by kind.", ["kind"], registry=registry)

    @classmethod
    def for_registry(cls, registry: CollectorRegistry) -> WatchMetrics:
        return _once(registry, cls, lambda: cls(registry))


class EventMetrics:
    """``lws_operator_events_dropped_total{controller}``: Events never written because the
    queue of Events waiting to be written was full (``kube.event_queue``). Recording is best
    effort, as upstream's is; a rising count means the API server cannot keep up with the
    operator's Events (or refuses them)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.dropped = Counter(
            "lws_operator_events_dropped_total",
            "Events not recorded because the queue of Events waiting to be written was full, "
            "by the controller that decided them.", ["controller"], registry=registry)

    @classmethod
    def for_registry(cls, registry: CollectorRegistry) -> EventMetrics:
        return _once(registry, cls, lambda: cls(registry))
