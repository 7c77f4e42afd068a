"""The controllers' work queue: what turns a stream of watch events into reconcile passes.

Watch handlers only add the owning LeaderWorkerSet's key; workers take keys from here. The queue
gives the guarantees level-triggered reconciliation needs (docs/architecture.md, "The path of one
spec change"):

- a key waits at most once: a hundred pod events for one group make one pass, not a hundred;
- a key is never handed to two workers at once: a key added while it is being processed waits
  until the worker calls ``done`` and is then handed out again, once;
- failures retry with per-key exponential backoff (5 ms doubling up to 1000 s), bounded overall
  by a token bucket (10 retries a second, 100 burst), so a broken API server or a bad object
  cannot make the operator spin;
- delayed adds (``add_after``) sit in one heap served by one timer task; an earlier deadline for
  a key replaces a later one;
- coalesced adds (``add_soon``, ours, not client-go's): "this key needs a pass, but a burst of
  news is arriving": the key is added once ``window`` seconds after the first such add, and the
  adds meanwhile join it. It is dropped when the key is added (or handed out) before then: that
  pass reads the cache after the news arrived, so the coalesced add has nothing left to bring.
  Watch events of a set's pods and StatefulSets come in bursts (a group's pods start together),
  and without it each event that found the key idle made a pass of its own.

Semantics follow client-go's rate-limited queue, which is what a drop-in for the Go controller
should behave like; the metrics are controller-runtime's ``workqueue_*``. Time is injected
(``clock`` and ``sleep``) so tests run on a manual clock.

It lives on one event loop and is not thread-safe.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections import deque
from collections.abc import Hashable
from typing import Any, Generic, Protocol, TypeVar

from prometheus_client import CollectorRegistry

from lws_operator.kube.metrics import WorkqueueMetrics
from lws_operator.kube.ratelimit import Clock, Sleep, TokenBucket

__all__ = [
    "DEFAULT_NAME",
    "DefaultRateLimiter",
    "ExponentialBackoff",
    "QueueShutDown",
    "RateLimiter",
    "WorkQueue",
]

DEFAULT_NAME = "leaderworkerset"

K = TypeVar("K", bound=Hashable)


class QueueShutDown(Exception):
    """``get()`` on a queue that has been shut down."""


class RateLimiter(Protocol):
    """How long a key must wait before its next retry."""

    def when(self, key: Hashable) -> float:
        """The delay of the key's next retry; counts one more retry."""
        ...

    def forget(self, key: Hashable) -> None:
        """The key succeeded: its next failure starts from the base delay again."""
        ...

    def num_requeues(self, key: Hashable) -> int:
        ...


class ExponentialBackoff:
    """``base * 2**failures``, capped at ``cap``, per key."""

    def __init__(self, base: float = 0.005, cap: float = 1000.0) -> None:
        self.base = base
        self.cap = cap
        self._failures: dict[Hashable, int] = {}

    def when(self, key: Hashable) -> float:
        failures = self._failures.get(key, 0)
        self._failures[key] = failures + 1
        if failures > 64:  # 2**64 * base is past any cap; avoid huge float exponents
            return self.cap
        return min(self.cap, self.base * 2.0**failures)

    def forget(self, key: Hashable) -> None:
        self._failures.pop(key, None)

    def num_requeues(self, key: Hashable) -> int:
        return self._failures.get(key, 0)


class DefaultRateLimiter:
    """The larger of the per-key backoff and the overall token bucket's delay, like a Go
    controller's default: one key failing backs off alone, many keys failing at once are held
    to the bucket's rate together."""

    def __init__(self, backoff: ExponentialBackoff | None = None,
                 bucket: TokenBucket | None = None, clock: Clock = time.monotonic) -> None:
        self.backoff = backoff or ExponentialBackoff()
        self.bucket = bucket or TokenBucket(10, 100, clock=clock)

    def when(self, key: Hashable) -> float:
        return max(self.backoff.when(key), self.bucket.reserve())

    def forget(self, key: Hashable) -> None:
        self.backoff.forget(key)

    def num_requeues(self, key: Hashable) -> int:
        return self.backoff.num_requeues(key)


class WorkQueue(Generic[K]):
    """A deduplicating, rate-limited, delaying queue of keys; see the module docstring.

    ``name`` labels the metrics (``name`` and ``controller``, which controller-runtime sets to
    the same value). Without a ``registry`` the metrics go to a private registry nobody reads.
    """

    def __init__(
        self,
        name: str = DEFAULT_NAME,
        *,
        controller: str | None = None,
        registry: CollectorRegistry | None = None,
        rate_limiter: RateLimiter | None = None,
        clock: Clock = time.monotonic,
        sleep: Sleep = asyncio.sleep,
    ) -> None:
        self.name = name
        self.controller = controller or name
        self.clock = clock
        self._sleep = sleep
        self.rate_limiter: RateLimiter = rate_limiter or DefaultRateLimiter(clock=clock)
        self._ready: deque[K] = deque()  # keys a worker may take, in order
        self._dirty: set[K] = set()  # keys that need a pass: in _ready, or re-added in progress
        self._processing: dict[K, float] = {}  # key -> when a worker took it
        self._added_at: dict[K, float] = {}  # key -> when it became dirty (queue latency)
        self._getters: deque[asyncio.Future[None]] = deque()
        # Delayed adds: key -> (deadline, sequence) of its one live heap entry; stale heap
        # entries (superseded by an earlier deadline) are skipped when they surface.
        self._waiting: dict[K, tuple[float, int]] = {}
        self._heap: list[tuple[float, int, K]] = []
        # Coalesced adds (``add_soon``): key -> (deadline, sequence), in the same heap.
        self._soon: dict[K, tuple[float, int]] = {}
        self._sequence = itertools.count()
        self._timer: asyncio.Task[None] | None = None
        self._timer_wakeup = asyncio.Event()
        self._shutting_down = False

        metrics = WorkqueueMetrics.for_registry(registry or CollectorRegistry(auto_describe=True))
        labels = (self.name, self.controller)
        metrics.depth.labels(*labels, "").set_function(lambda: len(self._dirty))
        metrics.unfinished_work.labels(*labels).set_function(self._unfinished_seconds)
        metrics.longest_running.labels(*labels).set_function(self._longest_running_seconds)
        self._adds = metrics.adds.labels(*labels)
        self._retries = metrics.retries.labels(*labels)
        self._queue_duration = metrics.queue_duration.labels(*labels)
        self._work_duration = metrics.work_duration.labels(*labels)

    # --- state, for callers and tests -------------------------------------------------------

    def __len__(self) -> int:
        """Keys waiting for a worker (not counting delayed adds not yet due)."""
        return len(self._dirty)

    @property
    def shutting_down(self) -> bool:
        return self._shutting_down

    def processing(self) -> frozenset[K]:
        return frozenset(self._processing)

    def waiting(self) -> dict[K, float]:
        """Delayed adds not yet due: key -> deadline (by the queue's clock)."""
        return {key: deadline for key, (deadline, _) in self._waiting.items()}

    def coalescing(self) -> dict[K, float]:
        """Coalesced adds not yet due: key -> deadline (by the queue's clock)."""
        return {key: deadline for key, (deadline, _) in self._soon.items()}

    # --- adding -----------------------------------------------------------------------------

    def add(self, key: K) -> None:
        """Mark the key as needing a pass. A no-op if it already waits; if a worker has it now,
        it is handed out again after that worker's ``done``."""
        if self._shutting_down or key in self._dirty:
            return
        self._dirty.add(key)
        self._soon.pop(key, None)  # this pass reads whatever the coalesced add waited for
        self._added_at[key] = self.clock()
        self._adds.inc()
        if key in self._processing:
            return
        self._ready.append(key)
        self._wake_one_getter()

    def add_after(self, key: K, delay: float) -> None:
        """Add the key once ``delay`` seconds have passed. If the key already has a pending
        delayed add, the earlier deadline wins."""
        if self._shutting_down:
            return
        self._retries.inc()
        if delay <= 0:
            self.add(key)
            return
        deadline = self.clock() + delay
        pending = self._waiting.get(key)
        if pending is not None and pending[0] <= deadline:
            return
        self._schedule(self._waiting, key, deadline)

    def _schedule(self, entries: dict[K, tuple[float, int]], key: K, deadline: float) -> None:
        """One live heap entry for ``key`` in ``entries`` (delayed or coalesced adds), due at
        ``deadline``; the timer re-arms when it is the new earliest."""
        sequence = next(self._sequence)
        entries[key] = (deadline, sequence)
        heapq.heappush(self._heap, (deadline, sequence, key))
        self._drop_stale_heads()
        if self._heap[0][1] == sequence:  # a new earliest deadline: the timer must re-arm
            self._timer_wakeup.set()
        self._ensure_timer()

    def add_soon(self, key: K, window: float) -> None:
        """Add the key ``window`` seconds from now, unless it waits for a worker already or is
        added before then (module docstring); a pending coalesced add with an earlier deadline
        stands. Not a retry: nothing is counted but the add itself, when it happens."""
        if self._shutting_down or key in self._dirty:
            return
        if window <= 0:
            self.add(key)
            return
        deadline = self.clock() + window
        pending = self._soon.get(key)
        if pending is not None and pending[0] <= deadline:
            return
        self._schedule(self._soon, key, deadline)

    def add_rate_limited(self, key: K) -> None:
        """Add the key after its backoff: the retry path of a failed pass."""
        self.add_after(key, self.rate_limiter.when(key))

    def forget(self, key: K) -> None:
        """The key's pass succeeded: reset its backoff. Does not remove it from the queue."""
        self.rate_limiter.forget(key)

    def num_requeues(self, key: K) -> int:
        return self.rate_limiter.num_requeues(key)

    # --- taking -----------------------------------------------------------------------------

    async def get(self) -> K:
        """Wait for a key and mark it as being processed; the caller must call ``done(key)``.

        Raises ``QueueShutDown`` once the queue is shut down, even if keys still wait: a
        stopping operator finishes the passes in progress and starts no new ones.
        """
        while True:
            self._promote_due()
            if self._shutting_down:
                raise QueueShutDown(self.name)
            if self._ready:
                break
            waiter = asyncio.get_running_loop().create_future()
            self._getters.append(waiter)
            try:
                await waiter
            except asyncio.CancelledError:
                woken = waiter.done() and not waiter.cancelled()
                waiter.cancel()
                with contextlib.suppress(ValueError):
                    self._getters.remove(waiter)
                if woken and self._ready:  # pass the wake-up on rather than lose it
                    self._wake_one_getter()
                raise
        key = self._ready.popleft()
        self._dirty.discard(key)
        now = self.clock()
        self._queue_duration.observe(max(0.0, now - self._added_at.pop(key, now)))
        self._processing[key] = now
        return key

    def done(self, key: K) -> None:
        """The worker is finished with the key. If it was added meanwhile, it is ready again."""
        started = self._processing.pop(key, None)
        if started is None:
            return
        self._work_duration.observe(max(0.0, self.clock() - started))
        if key in self._dirty and not self._shutting_down:
            self._ready.append(key)
            self._wake_one_getter()

    def shutdown(self) -> None:
        """Stop handing out keys: waiting and later ``get()`` calls raise ``QueueShutDown``;
        adds are ignored; the timer stops."""
        self._shutting_down = True
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)

    # --- internals --------------------------------------------------------------------------

    def _wake_one_getter(self) -> None:
        while self._getters:
            waiter = self._getters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return

    def _live(self, key: K, sequence: int) -> dict[K, tuple[float, int]] | None:
        """Which of the delayed or coalesced adds a heap entry is the live one of, if any."""
        for entries in (self._waiting, self._soon):
            live = entries.get(key)
            if live is not None and live[1] == sequence:
                return entries
        return None

    def _drop_stale_heads(self) -> None:
        while self._heap:
            _, sequence, key = self._heap[0]
            if self._live(key, sequence) is not None:
                return
            heapq.heappop(self._heap)

    def _promote_due(self) -> None:
        """Move delayed adds whose deadline has passed into the queue, earliest first."""
        now = self.clock()
        while True:
            self._drop_stale_heads()
            if not self._heap or self._heap[0][0] > now:
                return
            _, sequence, key = heapq.heappop(self._heap)
            entries = self._live(key, sequence)
            if entries is not None:
                del entries[key]
            self.add(key)

    def _ensure_timer(self) -> None:
        if self._timer is None or self._timer.done():
            self._timer = asyncio.get_running_loop().create_task(
                self._run_timer(), name=f"workqueue-{self.name}-timer")

    async def _run_timer(self) -> None:
        """Sleep until the earliest deadline (or until an earlier one is added), promote what
        is due, repeat. One task for all delayed keys."""
        while not self._shutting_down:
            self._timer_wakeup.clear()
            self._promote_due()
            pending: set[asyncio.Future[Any]] = {
                asyncio.ensure_future(self._timer_wakeup.wait())}
            if self._heap:
                delay = max(0.0, self._heap[0][0] - self.clock())
                pending.add(asyncio.ensure_future(self._sleep(delay)))
            try:
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for future in pending:
                    future.cancel()

    def _unfinished_seconds(self) -> float:
        now = self.clock()
        return sum(max(0.0, now - started) for started in self._processing.values())

    def _longest_running_seconds(self) -> float:
        now = self.clock()
        return max((max(0.0, now - s) for s in self._processing.values()), default=0.0)
