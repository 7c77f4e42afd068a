"""How a controller's runtime winds down (``controllers.shutdown.shut_down``): over the real work
queue and workers, a pass in flight finishes first, idle workers return, the watches are told
to halt and the futures the runtime waited on are cancelled."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from prometheus_client import CollectorRegistry

from lws_operator.controllers.shutdown import shut_down
from lws_operator.kube.watch import Watches
from lws_operator.kube.workers import Result, run_workers
from lws_operator.kube.workqueue import WorkQueue
from tests.harness.clock import settle


class _Watches:
    def __init__(self) -> None:
        self.halted = False

    def halt(self) -> None:
        self.halted = True


async def test_a_pass_in_flight_finishes_before_the_runtime_stops() -> None:
    registry = CollectorRegistry()
    queue: WorkQueue[str] = WorkQueue("shutdown", registry=registry)
    stop = asyncio.Event()
    release = asyncio.Event()
    finished: list[str] = []

    async def reconcile(key: str) -> Result:
        await release.wait()
        finished.append(key)
        return Result()

    workers = asyncio.create_task(run_workers(
        queue, reconcile, concurrency=2, controller="shutdown", registry=registry, stop=stop))
    queue.add("a")
    await settle()  # one worker in the pass, the other idle in get()
    waiting: asyncio.Future[Any] = asyncio.ensure_future(stop.wait())
    watches = _Watches()
    stopping = asyncio.create_task(shut_down(stop, cast(Watches, watches), queue, workers,
                                             waiting))
    await settle()
    assert not stopping.done()  # the pass holds it
    assert watches.halted
    assert stop.is_set()
    assert waiting.cancelled()
    queue.add("b")  # after the shutdown: never handed out
    release.set()
    await asyncio.wait_for(stopping, timeout=10)  # a hang guard, not a timing assertion
    assert finished == ["a"]
    assert workers.done()
