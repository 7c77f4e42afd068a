"""Deterministic time: a manual clock the test sets (``now``) or advances, whose ``sleep`` wakes on
``advance`` in asyncio tests; the one test clock of the unit tests."""

from __future__ import annotations

import asyncio
import heapq
import itertools


class ManualClock:
    """A clock and an ``asyncio.sleep`` stand-in: sleepers wake when ``advance`` passes their
    deadline, earliest first."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    def __call__(self) -> float:
        return self.now

    async def sleep(self, delay: float) -> None:
        future = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + delay, next(self._order), future))
        await future

    def sleeping(self) -> int:
        return sum(1 for *_, f in self._sleepers if not f.done())

    def advance(self, seconds: float) -> None:
        self.now += seconds
        while self._sleepers and self._sleepers[0][0] <= self.now + 1e-12:
            _, _, future = heapq.heappop(self._sleepers)
            if not future.done():
                future.set_result(None)


async def settle() -> None:
    """Let every runnable task run until it blocks again."""
    for _ in range(20):
        await asyncio.sleep(0)
