"""A client-side token bucket: the one budget every API call of the process draws from.

A controller that falls behind must not turn a backlog into a burst of writes against the API
server; with QPS and burst from configuration the whole process stays within a known request
rate, as a Go controller does with its client's rate limiter. The same bucket also serves as the
overall limit of the work queue's retries (``reserve`` without sleeping).

Waiters are served in the order they asked: each caller reserves the next free slot when it
calls, then sleeps until that slot, so a late caller can never overtake an earlier one. Time is
injected (``clock`` and ``sleep``) so tests run on a manual clock without sleeping.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["Clock", "Sleep", "TokenBucket"]

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]


class TokenBucket:
    """``qps`` tokens a second, at most ``burst`` saved up; ``qps <= 0`` means no limit.

    The bucket starts full. Tokens may go negative: that is the queue of reservations made by
    callers still waiting for their slot.
    """

    def __init__(self, qps: float, burst: int, clock: Clock = time.monotonic,
                 sleep: Sleep = asyncio.sleep) -> None:
        if qps > 0 and burst < 1:
            raise ValueError(f"burst must be at least 1 when qps > 0, got {burst}")
        self.qps = qps
        self.burst = burst
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()

    @property
    def unlimited(self) -> bool:
        return self.qps <= 0

    def _refill(self) -> None:
        now = self._clock()
        elapsed = max(0.0, now - self._last)
        self._last = now
        self._tokens = min(float(self.burst), self._tokens + elapsed * self.qps)

    def tokens(self) -> float:
        """Tokens available now (negative while reservations are outstanding)."""
        if self.unlimited:
            return float("inf")
        self._refill()
        return self._tokens

    def reserve(self) -> float:
        """Take a token now and return how long the caller must wait before using it."""
        if self.unlimited:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        return 0.0 if self._tokens >= 0 else -self._tokens / self.qps

    def _cancel_reservation(self) -> None:
        self._refill()
        self._tokens = min(float(self.burst), self._tokens + 1.0)

    async def acquire(self) -> float:
        """Wait for a token; returns the seconds waited (by the bucket's clock)."""
        delay = self.reserve()
        if delay <= 0:
            return 0.0
        try:
            await self._sleep(delay)
        except asyncio.CancelledError:
            # A caller that gives up hands its slot back, so the budget is not lost.
            self._cancel_reservation()
            raise
        return delay
