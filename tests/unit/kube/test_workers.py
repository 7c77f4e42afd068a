"""The reconcile workers (lws_operator.kube.workers): what each outcome of a pass does to the
queue, the log and the ``controller_runtime_*`` metrics; concurrency, the leader gate and stop.
The queue runs on a manual clock, so retries fire only when a test advances time."""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from lws_operator.kube.client import ApiException
from lws_operator.kube.metrics import RECONCILE_TIME_BUCKETS
from lws_operator.kube.workers import Result, RetryableError, run_workers
from lws_operator.kube.workqueue import WorkQueue
from tests.harness.clock import ManualClock, settle

CONTROLLER = "leaderworkerset"


Reconcile = Callable[[str], Coroutine[Any, Any, Result | None]]


class Harness:
    def __init__(self) -> None:
        self.clock = ManualClock()
        self.registry = CollectorRegistry()
        self.queue: WorkQueue[str] = WorkQueue(
            CONTROLLER, registry=self.registry, clock=self.clock, sleep=self.clock.sleep)
        self.stop = asyncio.Event()

    def metric(self, name: str, **labels: str) -> float | None:
        return self.registry.get_sample_value(name, {"controller": CONTROLLER, **labels})

    def results(self) -> dict[str, float | None]:
        return {r: self.metric("controller_runtime_reconcile_total", result=r)
                for r in ("success", "error", "requeue", "requeue_after")}

    @asynccontextmanager
    async def running(self, reconcile: Reconcile, *, concurrency: int = 2,
                      gate: asyncio.Event | None = None) -> AsyncIterator[asyncio.Task[None]]:
        task = asyncio.create_task(run_workers(
            self.queue, reconcile, concurrency=concurrency, controller=CONTROLLER,
            registry=self.registry, stop=self.stop, gate=gate, clock=self.clock))
        await settle()
        try:
            yield task
        finally:
            self.stop.set()
            await asyncio.wait_for(task, timeout=10)  # a hang guard, not a timing assertion


def conflict() -> ApiException:
    return ApiException(status=409, reason="Conflict", body=json.dumps({
        "kind": "Status", "message": "the object has been modified", "code": 409}))


async def test_success_forgets_the_backoff_and_counts_success() -> None:
    h = Harness()
    seen: list[str] = []

    async def reconcile(key: str) -> None:
        seen.append(key)

    h.queue.add_rate_limited("ns/a")  # pretend two earlier failures
    h.queue.add_rate_limited("ns/a")
    h.clock.advance(1)
    async with h.running(reconcile):
        await settle()
        assert seen == ["ns/a"]
        assert h.queue.num_requeues("ns/a") == 0
        assert h.queue.waiting() == {}
    assert h.results() == {"success": 1, "error": 0, "requeue": 0, "requeue_after": 0}
    assert h.metric("controller_runtime_reconcile_errors_total") == 0


async def test_an_api_error_is_retried_with_backoff_and_logged_once_without_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()
    calls: list[str] = []

    async def reconcile(key: str) -> Result:
        calls.append(key)
        if len(calls) <= 2:
            raise conflict()
        return Result()

    caplog.set_level(logging.WARNING, logger="lws_operator.kube.workers")
    h.queue.add("ns/a")
    async with h.running(reconcile):
        await settle()
        assert calls == ["ns/a"]
        assert h.queue.waiting() == {"ns/a": pytest.approx(0.005)}
        h.clock.advance(0.005)
        await settle()
        assert len(calls) == 2
        assert h.queue.waiting() == {"ns/a": pytest.approx(0.005 + 0.01)}
        assert h.queue.num_requeues("ns/a") == 2
        h.clock.advance(0.01)
        await settle()
        assert len(calls) == 3
        assert h.queue.num_requeues("ns/a") == 0
    records = [r for r in caplog.records if r.name == "lws_operator.kube.workers"]
    assert len(records) == 2
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in records)
    assert "409 the object has been modified" in records[0].getMessage()
    assert "ns/a" in records[0].getMessage()
    assert h.results() == {"success": 1, "error": 2, "requeue": 0, "requeue_after": 0}
    assert h.metric("controller_runtime_reconcile_errors_total") == 2
    assert h.metric("controller_runtime_reconcile_panics_total") == 0


async def test_expected_error_classes_are_warnings(caplog: pytest.LogCaptureFixture) -> None:
    h = Harness()
    errors: list[BaseException] = [RetryableError("cache not synced"), TimeoutError(),
                                   ConnectionResetError("reset")]

    async def reconcile(key: str) -> None:
        raise errors[int(key)]

    caplog.set_level(logging.WARNING, logger="lws_operator.kube.workers")
    for i in range(3):
        h.queue.add(str(i))
    async with h.running(reconcile):
        await settle()
    records = [r for r in caplog.records if r.name == "lws_operator.kube.workers"]
    assert len(records) == 3
    assert all(r.levelno == logging.WARNING and r.exc_info is None for r in records)
    assert h.metric("controller_runtime_reconcile_panics_total") == 0


async def test_an_unexpected_exception_is_an_error_with_traceback_and_a_panic(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness()

    async def reconcile(key: str) -> None:
        raise KeyError("spec")

    caplog.set_level(logging.WARNING, logger="lws_operator.kube.workers")
    h.queue.add("ns/a")
    async with h.running(reconcile):
        await settle()
        assert h.queue.num_requeues("ns/a") == 1
        assert "ns/a" in h.queue.waiting()
    records = [r for r in caplog.records if r.name == "lws_operator.kube.workers"]
    assert len(records) == 1
    assert records[0].levelno == logging.ERROR
    assert records[0].exc_info is not None
    assert h.metric("controller_runtime_reconcile_panics_total") == 1
    assert h.metric("controller_runtime_reconcile_errors_total") == 1
    assert h.results()["error"] == 1


async def test_requeue_after_forgets_and_adds_after_the_delay() -> None:
    h = Harness()
    calls: list[float] = []

    async def reconcile(key: str) -> Result:
        calls.append(h.clock.now)
        return Result(requeue_after=30) if len(calls) == 1 else Result()

    h.queue.add_rate_limited("ns/a")  # an earlier failure, forgotten by the success
    h.clock.advance(1)
    async with h.running(reconcile):
        await settle()
        assert h.queue.num_requeues("ns/a") == 0
        assert h.queue.waiting() == {"ns/a": 31}
        h.clock.advance(29.9)
        await settle()
        assert len(calls) == 1
        h.clock.advance(0.1)
        await settle()
        assert calls == [1, 31]
    assert h.results() == {"success": 1, "error": 0, "requeue": 0, "requeue_after": 1}


async def test_requeue_after_zero_runs_the_next_pass_at_once() -> None:
    """Zero is "at once" (not controller-runtime's "no requeue"): a pass whose write wakes no
    later pass by a watch event (a rollback on the progress deadline) asks for the next itself,
    which runs once this one is done, with no time passing and no backoff counted."""
    h = Harness()
    calls: list[float] = []

    async def reconcile(key: str) -> Result:
        calls.append(h.clock.now)
        return Result(requeue_after=0.0) if len(calls) == 1 else Result()

    h.queue.add("ns/a")
    async with h.running(reconcile):
        await settle()
        assert calls == [0, 0]
        assert h.queue.num_requeues("ns/a") == 0
        assert h.queue.waiting() == {}
    assert h.results() == {"success": 1, "error": 0, "requeue": 0, "requeue_after": 1}


async def test_requeue_goes_through_the_backoff() -> None:
    h = Harness()

    async def reconcile(key: str) -> Result:
        return Result(requeue=True)

    h.queue.add("ns/a")
    async with h.running(reconcile):
        await settle()
        assert h.queue.num_requeues("ns/a") == 1
        assert h.queue.waiting() == {"ns/a": pytest.approx(0.005)}
    assert h.results() == {"success": 0, "error": 0, "requeue": 1, "requeue_after": 0}


async def test_a_key_added_during_its_pass_runs_exactly_once_more() -> None:
    h = Harness()
    release = asyncio.Event()
    calls: list[str] = []

    async def reconcile(key: str) -> None:
        calls.append(key)
        if len(calls) == 1:
            await release.wait()

    h.queue.add("ns/a")
    async with h.running(reconcile, concurrency=4):
        await settle()
        for _ in range(5):
            h.queue.add("ns/a")
        await settle()
        assert calls == ["ns/a"]  # three idle workers, yet none takes the key in progress
        release.set()
        await settle()
        assert calls == ["ns/a", "ns/a"]
        await settle()
        assert calls == ["ns/a", "ns/a"]


async def test_workers_run_keys_concurrently_up_to_the_limit() -> None:
    h = Harness()
    release = asyncio.Event()
    running: set[str] = set()
    peak = 0

    async def reconcile(key: str) -> None:
        nonlocal peak
        running.add(key)
        peak = max(peak, len(running))
        await release.wait()
        running.discard(key)

    for i in range(5):
        h.queue.add(f"ns/{i}")
    async with h.running(reconcile, concurrency=3):
        await settle()
        assert len(running) == 3
        assert h.metric("controller_runtime_active_workers") == 3
        assert h.metric("controller_runtime_max_concurrent_reconciles") == 3
        release.set()
        await settle()
        assert h.metric("controller_runtime_active_workers") == 0
    assert peak == 3
    assert h.results()["success"] == 5


async def test_workers_wait_for_the_gate() -> None:
    h = Harness()
    gate = asyncio.Event()
    calls: list[str] = []

    async def reconcile(key: str) -> None:
        calls.append(key)

    h.queue.add("ns/a")
    async with h.running(reconcile, gate=gate):
        await settle()
        assert calls == []
        assert len(h.queue) == 1
        gate.set()
        await settle()
        assert calls == ["ns/a"]


async def test_a_key_taken_after_the_gate_closed_is_left_for_later() -> None:
    h = Harness()
    gate = asyncio.Event()
    gate.set()
    calls: list[str] = []

    async def reconcile(key: str) -> None:
        calls.append(key)

    async with h.running(reconcile, gate=gate, concurrency=1):
        await settle()  # the worker now waits in get()
        gate.clear()  # leadership lost
        h.queue.add("ns/a")
        await settle()
        assert calls == []
        assert len(h.queue) == 1
        assert not h.queue.processing()
        gate.set()
        await settle()
        assert calls == ["ns/a"]


async def test_stop_with_the_gate_closed_returns() -> None:
    h = Harness()

    async def reconcile(key: str) -> None:
        raise AssertionError("must not run")

    h.queue.add("ns/a")
    async with h.running(reconcile, gate=asyncio.Event()) as task:
        await settle()
        h.stop.set()
        await settle()
        assert task.done()


async def test_stop_lets_the_pass_in_progress_finish_and_starts_no_new_one() -> None:
    h = Harness()
    release = asyncio.Event()
    calls: list[str] = []

    async def reconcile(key: str) -> None:
        calls.append(key)
        await release.wait()

    h.queue.add("ns/a")
    h.queue.add("ns/b")
    async with h.running(reconcile, concurrency=1) as task:
        await settle()
        h.stop.set()
        await settle()
        assert not task.done()  # waiting for ns/a's pass
        release.set()
        await settle()
        assert task.done()
        assert h.queue.shutting_down
    assert calls == ["ns/a"]
    assert h.results()["success"] == 1


async def test_cancelling_run_workers_cancels_the_passes() -> None:
    h = Harness()
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def reconcile(key: str) -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise

    h.queue.add("ns/a")
    task = asyncio.create_task(run_workers(
        h.queue, reconcile, concurrency=1, controller=CONTROLLER, registry=h.registry,
        stop=h.stop, clock=h.clock))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()
    assert not h.queue.processing()  # done() ran for the cancelled pass


async def test_reconcile_time_is_observed_in_controller_runtime_buckets() -> None:
    h = Harness()

    async def reconcile(key: str) -> None:
        h.clock.now += 0.3  # the pass "takes" 0.3 s of the manual clock

    h.queue.add("ns/a")
    async with h.running(reconcile):
        await settle()
    assert h.metric("controller_runtime_reconcile_time_seconds_count") == 1
    assert h.metric("controller_runtime_reconcile_time_seconds_sum") == pytest.approx(0.3)
    assert h.metric("controller_runtime_reconcile_time_seconds_bucket", le="0.25") == 0
    assert h.metric("controller_runtime_reconcile_time_seconds_bucket", le="0.3") == 1
    les = [s.labels["le"] for f in h.registry.collect()
           if f.name == "controller_runtime_reconcile_time_seconds"
           for s in f.samples if s.name.endswith("_bucket")]
    assert les == [str(float(b)) for b in RECONCILE_TIME_BUCKETS] + ["+Inf"]
    assert RECONCILE_TIME_BUCKETS == (
        0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7,
        0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20,
        25, 30, 40, 50, 60)


async def test_every_series_exists_at_zero_once_workers_start() -> None:
    h = Harness()

    async def reconcile(key: str) -> None:
        return None

    async with h.running(reconcile, concurrency=5):
        assert h.results() == {"success": 0, "error": 0, "requeue": 0, "requeue_after": 0}
        assert h.metric("controller_runtime_reconcile_errors_total") == 0
        assert h.metric("controller_runtime_reconcile_panics_total") == 0
        assert h.metric("controller_runtime_active_workers") == 0
        assert h.metric("controller_runtime_max_concurrent_reconciles") == 5


async def test_concurrency_must_be_positive() -> None:
    h = Harness()

    async def reconcile(key: str) -> None:
        return None

    with pytest.raises(ValueError, match="concurrency"):
        await run_workers(h.queue, reconcile, concurrency=0, controller=CONTROLLER,
                          registry=h.registry, stop=h.stop)


async def test_a_pass_runs_with_its_key_as_log_context() -> None:
    """kube.logcontext: every log line of a pass names the key (the JSON ``lws`` field)."""
    from lws_operator.kube.logcontext import GROUP, LWS, bind_group

    h = Harness()
    seen: list[tuple[str | None, str | None]] = []

    async def reconcile(key: str) -> None:
        seen.append((LWS.get(), GROUP.get()))
        bind_group(4)
        seen.append((LWS.get(), GROUP.get()))

    h.queue.add("ns/a")
    h.queue.add("ns/b")
    async with h.running(reconcile, concurrency=1):
        await settle()
    assert seen == [("ns/a", None), ("ns/a", "4"), ("ns/b", None), ("ns/b", "4")]
    assert (LWS.get(), GROUP.get()) == (None, None)


async def test_the_loop_runs_between_passes_that_never_suspend() -> None:
    """A backlog of passes with nothing to write (a cold start's first pass of every set)
    never suspends on its own; the worker still lets the loop run between two passes, so a
    Lease renewal or a watch event is not held up for the whole backlog."""
    h = Harness()
    order: list[str] = []

    async def reconcile(key: str) -> None:
        order.append(key)

    async def other() -> None:
        while True:
            order.append("other")
            await asyncio.sleep(0)

    for i in range(5):
        h.queue.add(f"ns/{i}")
    ticking = asyncio.create_task(other())
    try:
        async with h.running(reconcile, concurrency=1):
            await settle()
    finally:
        ticking.cancel()
    passes = [i for i, what in enumerate(order) if what != "other"]
    assert len(passes) == 5
    assert all(b - a > 1 for a, b in itertools.pairwise(passes))
