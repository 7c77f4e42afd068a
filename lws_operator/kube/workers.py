"""Workers that drain a work queue into reconcile passes, the way a Go controller's do.

A pass either succeeds (its backoff is reset, and it may ask to run again after a delay) or
raises (the key is retried with backoff). The key is always marked done, so a key added during
the pass runs once more afterwards. Expected failures (API errors, timeouts, lost connections)
are logged as one warning line without a traceback: with hundreds of objects, a conflict storm
must not bury the log in stack traces. Anything else is a bug and gets an error with traceback,
counted as a "panic" like controller-runtime counts a recovered panic.

Workers wait on an optional ``gate`` before taking each key; leader election sets it on the
Lease holder, so standby replicas keep their caches warm but never write.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass
from typing import Generic, TypeVar

import aiohttp
from prometheus_client import CollectorRegistry

from lws_operator.kube.client import ApiException, status_message
from lws_operator.kube.logcontext import reconciling
from lws_operator.kube.metrics import ReconcileMetrics
from lws_operator.kube.ratelimit import Clock
from lws_operator.kube.workqueue import QueueShutDown, WorkQueue

__all__ = ["EXPECTED_ERRORS", "Reconcile", "Result", "RetryableError", "describe_error",
           "run_workers"]

log = logging.getLogger(__name__)

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class Result:
    """What a successful pass asks for next: nothing (the default), another pass after
    ``requeue_after`` seconds (0: as soon as this one is done), or (``requeue``) another pass
    after the key's backoff. Unlike controller-runtime, whose zero ``RequeueAfter`` means no
    requeue, zero here is "at once": a pass whose write brings no watch event that would wake
    the next (a rollback on the progress deadline) says so; None is "no requeue"."""

    requeue_after: float | None = None
    requeue: bool = False


class RetryableError(Exception):
    """An expected failure a reconcile raises on purpose (a lagging cache, a precondition that
    will hold later): logged as a warning, retried with backoff."""


EXPECTED_ERRORS: tuple[type[BaseException], ...] = (
    ApiException, RetryableError, TimeoutError, ConnectionError, aiohttp.ClientError)

Reconcile = Callable[[K], Awaitable[Result | None]]


def describe_error(exc: BaseException) -> str:
    """One line for a log: an API error's status and message, else the exception's type."""
    if isinstance(exc, ApiException):
        return f"{exc.status} {status_message(exc)}"
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


async def _first_set(*events: asyncio.Event) -> None:
    """Wait until any of the events is set."""
    if any(event.is_set() for event in events):
        return
    waiters = [asyncio.ensure_future(event.wait()) for event in events]
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()


class _Workers(Generic[K]):
    """One controller's workers: its queue, its reconcile and its metric series, shared by all
    of them."""

    def __init__(self, queue: WorkQueue[K], reconcile: Reconcile[K], controller: str,
                 registry: CollectorRegistry, concurrency: int, stop: asyncio.Event,
                 gate: asyncio.Event | None, expected: tuple[type[BaseException], ...],
                 clock: Clock) -> None:
        self.queue, self.reconcile, self.controller = queue, reconcile, controller
        self.stop, self.gate, self.expected, self.clock = stop, gate, expected, clock
        metrics = ReconcileMetrics.for_registry(registry)
        metrics.init(controller)
        metrics.max_concurrent.labels(controller).set(concurrency)
        self.active = metrics.active_workers.labels(controller)
        self.active.set(0)
        self.total = {result: metrics.total.labels(controller, result)
                      for result in metrics.RESULTS}
        self.errors = metrics.errors.labels(controller)
        self.panics = metrics.panics.labels(controller)
        self.duration = metrics.time.labels(controller)

    async def worker(self) -> None:
        while not self.stop.is_set():
            if self.gate is not None and not self.gate.is_set():
                await _first_set(self.gate, self.stop)
                continue
            try:
                key = await self.queue.get()
            except QueueShutDown:
                return
            if self.gate is not None and not self.gate.is_set():
                # The gate closed (leadership lost) while this worker waited for a key: leave
                # the key for whoever holds the gate next instead of writing as a standby.
                self.queue.add(key)
                self.queue.done(key)
                continue
            with reconciling(key):  # the pass's log lines carry its key (kube.logcontext)
                await self._counted_pass(key)
            # Let the loop run between passes: ``queue.get`` returns without suspending while
            # keys wait, and a pass with nothing to write never suspends either, so a worker
            # would otherwise run a whole backlog as one step of the event loop: at a cold start
            # over 1,000 sets, every set's first pass back to back, while no Lease renewal, watch
            # event or metrics scrape could run.
            await asyncio.sleep(0)

    async def _counted_pass(self, key: K) -> None:
        started = self.clock()
        self.active.inc()
        try:
            result = await self.reconcile(key)
        except asyncio.CancelledError:
            raise
        except self.expected as exc:
            self._failed(key)
            log.warning("%s: reconcile of %s failed, retrying: %s", self.controller, key,
                        describe_error(exc))
        except Exception:
            self._failed(key)
            self.panics.inc()
            log.exception("%s: reconcile of %s raised an unexpected exception", self.controller,
                          key)
        else:
            self._succeeded(key, result)
        finally:
            self.duration.observe(max(0.0, self.clock() - started))
            self.active.dec()
            self.queue.done(key)

    def _failed(self, key: K) -> None:
        """A pass raised: the key is retried after its backoff."""
        self.queue.add_rate_limited(key)
        self.errors.inc()
        self.total["error"].inc()

    def _succeeded(self, key: K, result: Result | None) -> None:
        """A pass returned: the key runs again after the delay it asked for, after its backoff
        (``requeue``), or not until something changes (its backoff reset)."""
        if result is not None and result.requeue_after is not None \
                and result.requeue_after >= 0:
            self.queue.forget(key)
            self.queue.add_after(key, result.requeue_after)
            self.total["requeue_after"].inc()
        elif result is not None and result.requeue:
            self.queue.add_rate_limited(key)
            self.total["requeue"].inc()
        else:
            self.queue.forget(key)
            self.total["success"].inc()


async def run_workers(
    queue: WorkQueue[K],
    reconcile: Reconcile[K],
    *,
    concurrency: int,
    controller: str,
    registry: CollectorRegistry,
    stop: asyncio.Event,
    gate: asyncio.Event | None = None,
    expected: tuple[type[BaseException], ...] = EXPECTED_ERRORS,
    clock: Clock = time.monotonic,
) -> None:
    """Run ``concurrency`` workers until ``stop`` is set; then shut the queue down, let passes
    in progress finish, and return. Cancelling this coroutine cancels the workers."""
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")
    workers = _Workers(queue, reconcile, controller, registry, concurrency, stop, gate,
                       expected, clock)
    tasks = [asyncio.create_task(workers.worker(), name=f"{controller}-worker-{i}")
             for i in range(concurrency)]
    try:
        await stop.wait()
        queue.shutdown()
        # Workers blocked on the gate see ``stop``; workers in get() see the shutdown; those in
        # a pass finish it first.
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)
