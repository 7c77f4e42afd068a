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
from typing import TypeVar

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
    metrics = ReconcileMetrics.for_registry(registry)
    metrics.init(controller)
    metrics.max_concurrent.labels(controller).set(concurrency)
    active = metrics.active_workers.labels(controller)
    active.set(0)
    total = {result: metrics.total.labels(controller, result) for result in metrics.RESULTS}
    errors = metrics.errors.labels(controller)
    panics = metrics.panics.labels(controller)
    duration = metrics.time.labels(controller)

    async def one_pass(key: K) -> None:
        with reconciling(key):  # the pass's log lines carry its key (kube.logcontext)
            await counted_pass(key)

    async def counted_pass(key: K) -> None:
        started = clock()
        active.inc()
        try:
            result = await reconcile(key)
        except asyncio.CancelledError:
            raise
        except expected as exc:
            queue.add_rate_limited(key)
            errors.inc()
            total["error"].inc()
            log.warning("%s: reconcile of %s failed, retrying: %s", controller, key,
                        describe_error(exc))
        except Exception:
            queue.add_rate_limited(key)
            errors.inc()
            panics.inc()
            total["error"].inc()
            log.exception("%s: reconcile of %s raised an unexpected exception", controller, key)
        else:
            if result is not None and result.requeue_after is not None \
                    and result.requeue_after >= 0:
                queue.forget(key)
                queue.add_after(key, result.requeue_after)
                total["requeue_after"].inc()
            elif result is not None and result.requeue:
                queue.add_rate_limited(key)
                total["requeue"].inc()
            else:
                queue.forget(key)
                total["success"].inc()
        finally:
            duration.observe(max(0.0, clock() - started))
            active.dec()
            queue.done(key)

    async def worker() -> None:
        while not stop.is_set():
            if gate is not None and not gate.is_set():
                await _first_set(gate, stop)
                continue
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            if gate is not None and not gate.is_set():
                # The gate closed (leadership lost) while this worker waited for a key: leave
                # the key for whoever holds the gate next instead of writing as a standby.
                queue.add(key)
                queue.done(key)
                continue
            await one_pass(key)
            # Let the loop run between passes: ``queue.get`` returns without suspending while
            # keys wait, and a pass with nothing to write never suspends either, so a worker
            # would otherwise run a whole backlog as one step of the event loop: at a cold start
            # over 1,000 sets, every set's first pass back to back, while no Lease renewal, watch
            # event or metrics scrape could run.
            await asyncio.sleep(0)

    tasks = [asyncio.create_task(worker(), name=f"{controller}-worker-{i}")
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
