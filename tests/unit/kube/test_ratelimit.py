"""The client-side token bucket (lws_operator.kube.ratelimit) on a manual clock: no real sleeping,
no timing assertions; time moves only when a test advances it."""

from __future__ import annotations

import asyncio

import pytest

from lws_operator.kube.ratelimit import TokenBucket
from tests.harness.clock import ManualClock, settle


def test_full_bucket_then_one_token_per_interval() -> None:
    clock = ManualClock()
    bucket = TokenBucket(10, 3, clock=clock, sleep=clock.sleep)
    delays = [bucket.reserve() for _ in range(6)]
    assert delays == pytest.approx([0, 0, 0, 0.1, 0.2, 0.3])


def test_refill_after_time_passes_and_caps_at_burst() -> None:
    clock = ManualClock()
    bucket = TokenBucket(2, 2, clock=clock, sleep=clock.sleep)
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0, 0, 0.5])
    clock.advance(1.0)  # 2 tokens back, one of them owed to the waiter: 1 free
    assert bucket.tokens() == pytest.approx(1.0)
    assert bucket.reserve() == 0
    assert bucket.reserve() == pytest.approx(0.5)
    clock.advance(1000.0)  # a long idle time saves up no more than the burst
    assert bucket.tokens() == pytest.approx(2.0)
    assert [bucket.reserve() for _ in range(3)] == pytest.approx([0, 0, 0.5])


def test_zero_or_negative_qps_is_unlimited() -> None:
    for qps in (0, -1):
        bucket = TokenBucket(qps, 0)
        assert bucket.unlimited
        assert all(bucket.reserve() == 0 for _ in range(10_000))


async def test_unlimited_acquire_never_sleeps() -> None:
    async def no_sleep(delay: float) -> None:
        raise AssertionError(f"slept {delay}")

    bucket = TokenBucket(0, 0, sleep=no_sleep)
    for _ in range(100):
        assert await bucket.acquire() == 0


def test_burst_below_one_is_rejected_when_limited() -> None:
    with pytest.raises(ValueError, match="burst"):
        TokenBucket(5, 0)


async def test_waiters_are_served_in_the_order_they_asked() -> None:
    clock = ManualClock()
    bucket = TokenBucket(1, 1, clock=clock, sleep=clock.sleep)
    finished: list[int] = []

    async def take(i: int) -> None:
        await bucket.acquire()
        finished.append(i)

    tasks = [asyncio.create_task(take(i)) for i in range(5)]
    await settle()
    assert finished == [0]
    for step in range(1, 5):
        clock.advance(1.0)
        await settle()
        assert finished == list(range(step + 1))  # exactly one more, the next in line
    await asyncio.gather(*tasks)


async def test_acquire_returns_the_wait() -> None:
    clock = ManualClock()
    bucket = TokenBucket(4, 1, clock=clock, sleep=clock.sleep)
    assert await bucket.acquire() == 0
    task = asyncio.create_task(bucket.acquire())
    await settle()
    assert not task.done()
    assert clock.sleeping() == 1
    clock.advance(0.25)
    assert await task == pytest.approx(0.25)


async def test_a_cancelled_waiter_gives_its_token_back() -> None:
    clock = ManualClock()
    bucket = TokenBucket(1, 1, clock=clock, sleep=clock.sleep)
    await bucket.acquire()
    waiter = asyncio.create_task(bucket.acquire())
    await settle()
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    # Without the refund the next caller would wait 2 s (behind the abandoned reservation).
    assert bucket.reserve() == pytest.approx(1.0)


async def test_many_acquires_spread_at_the_configured_rate() -> None:
    clock = ManualClock()
    bucket = TokenBucket(5, 2, clock=clock, sleep=clock.sleep)
    tasks = [asyncio.create_task(bucket.acquire()) for _ in range(12)]
    await settle()
    done_at: list[int] = []
    for _tick in range(20):
        done_at.append(sum(t.done() for t in tasks))
        clock.advance(0.2)
        await settle()
    # 2 from the burst at once, then one per 0.2 s.
    assert done_at[:12] == [2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 12]
    await asyncio.gather(*tasks)
