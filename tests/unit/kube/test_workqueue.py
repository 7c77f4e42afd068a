"""The work queue (lws_operator.kube.workqueue) on a manual clock: dedup, one worker per key at a
time, re-adds during processing, backoff, delayed adds, shutdown, and the ``workqueue_*``
metrics after known sequences. Time only moves when a test advances it."""

from __future__ import annotations

import asyncio
import itertools
import random

import pytest
from prometheus_client import CollectorRegistry

from lws_operator.kube.ratelimit import TokenBucket
from lws_operator.kube.workqueue import (
    DefaultRateLimiter,
    ExponentialBackoff,
    QueueShutDown,
    WorkQueue,
)
from tests.harness.clock import ManualClock, settle


def new_queue(clock: ManualClock, registry: CollectorRegistry | None = None) -> WorkQueue[str]:
    return WorkQueue("leaderworkerset", registry=registry, clock=clock, sleep=clock.sleep)


async def get_now(queue: WorkQueue[str]) -> str:
    """``get()`` when a key must be ready already: fail rather than block."""
    task = asyncio.create_task(queue.get())
    await settle()
    assert task.done(), "no key was ready"
    return task.result()


async def nothing_ready(queue: WorkQueue[str]) -> bool:
    task = asyncio.create_task(queue.get())
    await settle()
    ready = task.done()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return not ready


# --- dedup and processing -------------------------------------------------------------------

async def test_a_waiting_key_is_queued_once() -> None:
    queue = new_queue(ManualClock())
    for key in ["a", "a", "b", "a", "b"]:
        queue.add(key)
    assert len(queue) == 2
    assert [await get_now(queue), await get_now(queue)] == ["a", "b"]
    assert await nothing_ready(queue)


async def test_a_key_being_processed_is_not_handed_out_again_until_done() -> None:
    queue = new_queue(ManualClock())
    queue.add("a")
    assert await get_now(queue) == "a"
    for _ in range(3):
        queue.add("a")  # three events while the pass runs ...
    assert len(queue) == 1
    assert await nothing_ready(queue)  # ... but no second worker may take it
    queue.done("a")
    assert await get_now(queue) == "a"  # one more pass, exactly one
    queue.done("a")
    assert await nothing_ready(queue)
    assert len(queue) == 0


async def test_done_without_a_re_add_does_not_requeue() -> None:
    queue = new_queue(ManualClock())
    queue.add("a")
    await get_now(queue)
    queue.done("a")
    queue.done("a")  # twice, and for a key never taken: both no-ops
    queue.done("zzz")
    assert len(queue) == 0
    assert await nothing_ready(queue)


async def test_a_blocked_getter_wakes_on_add() -> None:
    queue = new_queue(ManualClock())
    getter = asyncio.create_task(queue.get())
    await settle()
    assert not getter.done()
    queue.add("a")
    assert await getter == "a"
    assert queue.processing() == frozenset({"a"})


async def test_a_getter_cancelled_after_its_wake_up_passes_it_on() -> None:
    queue = new_queue(ManualClock())
    first = asyncio.create_task(queue.get())
    second = asyncio.create_task(queue.get())
    await settle()
    queue.add("a")  # wakes the first getter ...
    first.cancel()  # ... which is cancelled before it runs
    await settle()
    assert first.cancelled()
    assert second.done()
    assert second.result() == "a"


async def test_many_workers_never_overlap_on_a_key_and_every_add_is_seen() -> None:
    rng = random.Random(20260101)
    queue = new_queue(ManualClock())
    keys = ["a", "b", "c"]
    in_progress: set[str] = set()
    overlaps: list[str] = []
    tick = itertools.count()
    last_add: dict[str, int] = {}
    last_start: dict[str, int] = {}
    passes = 0

    async def worker() -> None:
        nonlocal passes
        while True:
            try:
                key = await queue.get()
            except QueueShutDown:
                return
            if key in in_progress:
                overlaps.append(key)
            in_progress.add(key)
            last_start[key] = next(tick)
            passes += 1
            for _ in range(rng.randrange(5)):
                await asyncio.sleep(0)
            in_progress.discard(key)
            queue.done(key)

    workers = [asyncio.create_task(worker()) for _ in range(10)]
    for _ in range(2000):
        key = rng.choice(keys)
        last_add[key] = next(tick)
        queue.add(key)
        for _ in range(rng.randrange(3)):
            await asyncio.sleep(0)
    await settle()
    assert len(queue) == 0
    assert not queue.processing()
    queue.shutdown()
    await asyncio.gather(*workers)
    assert overlaps == []
    # Level-triggered liveness: every key had a pass that started after its last add.
    assert all(last_start[key] > last_add[key] for key in keys)
    # Dedup did its job: far fewer passes than adds.
    assert passes < 2000


# --- backoff --------------------------------------------------------------------------------

def test_exponential_backoff_doubles_from_5ms_up_to_1000s() -> None:
    backoff = ExponentialBackoff()
    delays = [backoff.when("a") for _ in range(25)]
    assert delays[:4] == pytest.approx([0.005, 0.01, 0.02, 0.04])
    assert delays[17] == pytest.approx(0.005 * 2**17)  # 655.36 s, the last uncapped one
    assert delays[18:] == [1000.0] * 7
    assert backoff.num_requeues("a") == 25
    assert backoff.when("b") == pytest.approx(0.005)  # per key
    assert all(backoff.when("c") <= 1000.0 for _ in range(2000))


def test_forget_resets_the_backoff() -> None:
    backoff = ExponentialBackoff()
    for _ in range(5):
        backoff.when("a")
    backoff.forget("a")
    assert backoff.num_requeues("a") == 0
    assert backoff.when("a") == pytest.approx(0.005)


def test_default_limiter_takes_the_larger_of_backoff_and_overall_bucket() -> None:
    clock = ManualClock()
    limiter = DefaultRateLimiter(clock=clock)
    # 100 different keys failing at once ride the burst at the per-key base delay ...
    assert [limiter.when(f"k{i}") for i in range(100)] == pytest.approx([0.005] * 100)
    # ... the next ones queue behind the 10-per-second bucket.
    assert [limiter.when(f"k{i}") for i in range(100, 103)] == pytest.approx([0.1, 0.2, 0.3])
    clock.advance(3600)
    # One key failing alone is held by its own backoff, not the bucket.
    assert [limiter.when("x") for _ in range(4)] == pytest.approx([0.005, 0.01, 0.02, 0.04])


async def test_add_rate_limited_waits_its_backoff_and_forget_resets_it() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    queue.add_rate_limited("a")
    assert queue.num_requeues("a") == 1
    assert queue.waiting() == {"a": pytest.approx(0.005)}
    assert await nothing_ready(queue)
    clock.advance(0.005)
    assert await get_now(queue) == "a"
    queue.done("a")
    queue.add_rate_limited("a")
    queue.add_rate_limited("a")  # the second, later deadline loses to the pending earlier one
    assert queue.num_requeues("a") == 3
    assert queue.waiting() == {"a": pytest.approx(0.005 + 0.01)}
    queue.forget("a")
    assert queue.num_requeues("a") == 0
    clock.advance(1)
    assert await get_now(queue) == "a"
    queue.done("a")
    queue.add_rate_limited("a")
    assert queue.waiting() == {"a": pytest.approx(1.005 + 0.005)}


def test_a_custom_rate_limiter_is_used() -> None:
    clock = ManualClock()
    limiter = DefaultRateLimiter(ExponentialBackoff(1, 8), TokenBucket(0, 0), clock=clock)
    queue = WorkQueue[str](rate_limiter=limiter, clock=clock, sleep=clock.sleep)
    assert queue.rate_limiter is limiter


# --- delayed adds ---------------------------------------------------------------------------

async def test_delayed_adds_become_ready_in_deadline_order() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    queue.add_after("a", 3)
    queue.add_after("b", 1)
    queue.add_after("c", 2)
    queue.add_after("d", 0)  # no delay: ready at once
    assert await get_now(queue) == "d"
    assert await nothing_ready(queue)
    clock.advance(3)
    assert [await get_now(queue) for _ in range(3)] == ["b", "c", "a"]
    assert queue.waiting() == {}


async def test_the_earlier_deadline_wins_and_the_superseded_one_never_fires() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    queue.add_after("a", 10)
    queue.add_after("a", 2)
    queue.add_after("a", 5)  # later than the pending 2: ignored
    assert queue.waiting() == {"a": 2}
    clock.advance(2)
    assert await get_now(queue) == "a"
    queue.done("a")
    clock.advance(20)  # past the superseded 10 and the ignored 5
    assert await nothing_ready(queue)
    assert len(queue) == 0


async def test_a_superseded_deadline_does_not_fire_a_later_delayed_add_early() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    queue.add_after("a", 10)
    queue.add_after("a", 2)  # supersedes 10
    queue.add_after("b", 5)  # keeps the stale t=10 entry off the top when a fires
    clock.advance(2)
    assert await get_now(queue) == "a"
    queue.done("a")
    queue.add_after("a", 18)  # due at t=20; the stale t=10 entry must not stand in for it
    clock.advance(8)  # t=10
    assert await get_now(queue) == "b"
    assert await nothing_ready(queue)
    assert queue.waiting() == {"a": 20}
    clock.advance(10)  # t=20
    assert await get_now(queue) == "a"


async def test_the_timer_wakes_a_blocked_getter_at_the_deadline() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    getter = asyncio.create_task(queue.get())
    queue.add_after("a", 5)
    await settle()
    clock.advance(4.9)
    await settle()
    assert not getter.done()
    clock.advance(0.1)
    await settle()
    assert getter.done()
    assert getter.result() == "a"


async def test_an_earlier_deadline_re_arms_the_timer() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    getter = asyncio.create_task(queue.get())
    queue.add_after("late", 100)
    await settle()
    queue.add_after("soon", 1)
    await settle()
    clock.advance(1)
    await settle()
    assert getter.done()
    assert getter.result() == "soon"
    assert queue.waiting() == {"late": 100}


async def test_a_delayed_add_of_a_waiting_key_is_still_deduplicated() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    queue.add("a")
    queue.add_after("a", 1)
    clock.advance(1)
    await settle()
    assert len(queue) == 1
    assert await get_now(queue) == "a"
    assert await nothing_ready(queue)


# --- shutdown -------------------------------------------------------------------------------

async def test_shutdown_wakes_every_getter_and_stops_everything() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    getters = [asyncio.create_task(queue.get()) for _ in range(3)]
    queue.add_after("later", 5)
    await settle()
    assert clock.sleeping() == 1  # the one timer, whatever the number of delayed keys
    queue.shutdown()
    results = await asyncio.gather(*getters, return_exceptions=True)
    assert all(isinstance(r, QueueShutDown) for r in results)
    queue.add("a")
    queue.add_after("b", 0)
    assert len(queue) == 0
    with pytest.raises(QueueShutDown):
        await queue.get()
    await settle()
    assert clock.sleeping() == 0


async def test_get_after_shutdown_raises_even_with_keys_left() -> None:
    queue = new_queue(ManualClock())
    queue.add("a")
    queue.shutdown()
    with pytest.raises(QueueShutDown):
        await queue.get()


async def test_one_timer_serves_many_delayed_keys() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    for i in range(50):
        queue.add_after(f"k{i}", 1 + i)
    await settle()
    assert clock.sleeping() == 1
    clock.advance(100)
    await settle()
    assert len(queue) == 50
    queue.shutdown()


# --- coalesced adds -------------------------------------------------------------------------

async def test_a_burst_of_coalesced_adds_makes_one_pass_a_window_after_the_first() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    queue.add_soon("a", 0.1)
    clock.advance(0.05)
    queue.add_soon("a", 0.1)  # joins the pending one: its deadline stays t=0.1
    assert queue.coalescing() == {"a": pytest.approx(0.1)}
    assert await nothing_ready(queue)
    clock.advance(0.05)
    assert await get_now(queue) == "a"
    queue.done("a")
    clock.advance(1)
    assert await nothing_ready(queue)
    assert queue.coalescing() == {}


async def test_a_coalesced_add_of_a_key_already_waiting_adds_nothing_later() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    queue.add("a")
    queue.add_soon("a", 0.1)  # the waiting pass reads the cache after this news
    assert queue.coalescing() == {}
    assert await get_now(queue) == "a"
    queue.done("a")
    clock.advance(1)
    assert await nothing_ready(queue)


async def test_an_add_before_the_window_ends_drops_the_coalesced_add() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    queue.add_soon("a", 0.1)
    queue.add("a")  # a set's own event: at once, and it covers the coalesced news
    assert await get_now(queue) == "a"
    queue.done("a")
    assert queue.coalescing() == {}
    clock.advance(1)
    assert await nothing_ready(queue)


async def test_a_coalesced_add_during_a_pass_runs_once_after_the_window() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    queue.add("a")
    assert await get_now(queue) == "a"
    queue.add_soon("a", 0.1)  # news the running pass may have missed
    queue.done("a")
    assert await nothing_ready(queue)
    clock.advance(0.1)
    assert await get_now(queue) == "a"


async def test_coalesced_and_delayed_adds_of_a_key_are_independent() -> None:
    clock = ManualClock()
    registry = CollectorRegistry()
    queue = new_queue(clock, registry)
    queue.add_after("a", 5)  # a pass's requeue_after
    queue.add_soon("a", 0.1)
    assert queue.waiting() == {"a": 5}
    clock.advance(0.1)
    assert await get_now(queue) == "a"
    queue.done("a")
    assert queue.waiting() == {"a": 5}  # the requeue still stands
    clock.advance(4.9)
    assert await get_now(queue) == "a"
    assert sample(registry, "workqueue_retries_total") == 1  # add_after's; add_soon is no retry
    assert sample(registry, "workqueue_adds_total") == 2


async def test_a_coalesced_add_without_a_window_is_an_add() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    queue.add_soon("a", 0)
    assert await get_now(queue) == "a"


async def test_coalesced_adds_after_shutdown_are_ignored() -> None:
    clock = ManualClock()
    queue = new_queue(clock)
    queue.shutdown()
    queue.add_soon("a", 0.1)
    assert queue.coalescing() == {}


# --- metrics --------------------------------------------------------------------------------

def sample(registry: CollectorRegistry, name: str, **labels: str) -> float | None:
    return registry.get_sample_value(
        name, {"name": "leaderworkerset", "controller": "leaderworkerset", **labels})


async def test_metrics_after_a_known_sequence() -> None:
    clock = ManualClock()
    registry = CollectorRegistry()
    queue = new_queue(clock, registry)
    queue.add("a")
    clock.advance(1)
    queue.add("b")
    queue.add("a")  # deduplicated: not an add
    assert sample(registry, "workqueue_adds_total") == 2
    assert sample(registry, "workqueue_depth", priority="") == 2
    clock.advance(2)  # t=3
    assert await get_now(queue) == "a"  # waited 3 s
    assert sample(registry, "workqueue_depth", priority="") == 1
    clock.advance(2)  # t=5
    assert sample(registry, "workqueue_unfinished_work_seconds") == pytest.approx(2)
    assert sample(registry, "workqueue_longest_running_processor_seconds") == pytest.approx(2)
    assert await get_now(queue) == "b"  # waited 4 s
    clock.advance(1)  # t=6: a has run 3 s, b 1 s
    assert sample(registry, "workqueue_unfinished_work_seconds") == pytest.approx(4)
    assert sample(registry, "workqueue_longest_running_processor_seconds") == pytest.approx(3)
    queue.done("a")
    queue.done("b")
    assert sample(registry, "workqueue_unfinished_work_seconds") == 0
    assert sample(registry, "workqueue_longest_running_processor_seconds") == 0
    assert sample(registry, "workqueue_queue_duration_seconds_count") == 2
    assert sample(registry, "workqueue_queue_duration_seconds_sum") == pytest.approx(7)
    assert sample(registry, "workqueue_work_duration_seconds_count") == 2
    assert sample(registry, "workqueue_work_duration_seconds_sum") == pytest.approx(4)
    # 3 s and 4 s waits both land in the 10 s bucket, none in the 1 s one.
    assert sample(registry, "workqueue_queue_duration_seconds_bucket", le="1.0") == 0
    assert sample(registry, "workqueue_queue_duration_seconds_bucket", le="10.0") == 2
    assert sample(registry, "workqueue_retries_total") == 0
    queue.add_rate_limited("a")
    queue.add_after("b", 30)
    assert sample(registry, "workqueue_retries_total") == 2
    assert sample(registry, "workqueue_depth", priority="") == 0  # delayed keys are not depth
    queue.shutdown()


def test_workqueue_duration_buckets_are_controller_runtimes() -> None:
    registry = CollectorRegistry()
    new_queue(ManualClock(), registry)
    expected = ["1e-08", "1e-07", "1e-06", "1e-05", "0.0001", "0.001", "0.01", "0.1", "1.0",
                "10.0", "100.0", "1000.0", "+Inf"]
    for family in registry.collect():
        if family.name in ("workqueue_queue_duration_seconds", "workqueue_work_duration_seconds"):
            les = [s.labels["le"] for s in family.samples if s.name.endswith("_bucket")]
            assert les == expected


async def test_two_queues_share_one_registry_under_their_own_names() -> None:
    registry = CollectorRegistry()
    lws = WorkQueue[str]("leaderworkerset", registry=registry)
    pods = WorkQueue[str]("pod", registry=registry)
    lws.add("a")
    pods.add("x")
    pods.add("y")
    assert registry.get_sample_value(
        "workqueue_adds_total", {"name": "pod", "controller": "pod"}) == 2
    assert registry.get_sample_value(
        "workqueue_depth", {"name": "leaderworkerset", "controller": "leaderworkerset",
                            "priority": ""}) == 1
