"""How much of the loop one watch takes (``kube.list_watch``): events that arrived together are
handed to the cache one after another until the watch has spent its slice of the loop, then
whatever else is ready runs before its next events, so a burst of pod events never holds up the
passes (nor a Lease renewal) for long. The stream is an in-memory one whose lines all arrive at
once (as a read of a busy watch brings them), the clock a manual one that each event advances by
its cost: no API server, no timing."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest
from kubernetes.aio import client

from lws_operator.kube.client import KubeClient
from lws_operator.kube.list_watch import SLICE, ListWatch


class Buffered:
    """A watch answer whose lines have all arrived: reading them never suspends."""

    def __init__(self, lines: list[bytes]) -> None:
        self.lines = lines

    @contextlib.asynccontextmanager
    async def stream(self, path: str, *, query: Mapping[str, str] | None = None,
                     read_timeout: float | None = None) -> AsyncIterator[AsyncIterator[bytes]]:
        async def lines() -> AsyncIterator[bytes]:
            for line in self.lines:
                yield line
        yield lines()


def event(name: str) -> bytes:
    return json.dumps({"type": "ADDED", "object": {"metadata": {
        "name": name, "namespace": "ns", "resourceVersion": "1"}}}).encode()


def run(count: int, cost: float, slice_seconds: float) -> str:
    """The order in which the watch's events ("e") and another ready task's steps ("o") ran,
    each event taking ``cost`` seconds of the loop."""
    now = [0.0]
    order: list[str] = []

    def observe(_kind: str, _type: str | None, _obj: dict[str, Any]) -> None:
        order.append("e")
        now[0] += cost

    async def replace(_kind: str, _items: list[dict[str, Any]], _version: str | None) -> None:
        raise AssertionError("a watch that does not expire lists nothing")

    async def main() -> None:
        kube = KubeClient(client.ApiClient(configuration=client.Configuration()))
        watch = ListWatch(kube, "Pod", "/api/v1/pods", None, observe, replace,
                          slice_seconds=slice_seconds, clock=lambda: now[0])
        watch.kube = Buffered([event(f"p{i}") for i in range(count)])  # type: ignore[assignment]
        watching = asyncio.create_task(watch._watch())

        async def other() -> None:
            while not watching.done():
                order.append("o")
                await asyncio.sleep(0)

        await asyncio.gather(watching, asyncio.create_task(other()))
        await kube.close()

    asyncio.run(main())
    return "".join(order).rstrip("o")


@pytest.mark.parametrize(("count", "cost", "slice_seconds", "expected"), [
    # Cheap events: a whole burst within one slice runs as one step.
    (6, 0.0001, SLICE, "eeeeee"),
    # The slice used up after every third event: the other task runs in between.
    (7, 0.002, 0.005, "eeeoeeeoe"),
    # One event longer than the slice: the others wait for no more than one event.
    (3, 0.02, 0.005, "eoeoe"),
    # Exactly the slice: used up, so it yields.
    (4, 0.0025, 0.005, "eeoeeo"),
])
def test_a_burst_of_events_yields_the_loop_after_each_slice(
        count: int, cost: float, slice_seconds: float, expected: str) -> None:
    assert run(count, cost, slice_seconds) == expected.rstrip("o")


def test_every_event_of_a_sliced_burst_reaches_the_cache_in_order() -> None:
    seen: list[str] = []
    now = [0.0]

    async def replace(_kind: str, _items: list[dict[str, Any]], _version: str | None) -> None:
        raise AssertionError("a watch that does not expire lists nothing")

    def observe(_kind: str, _type: str | None, obj: dict[str, Any]) -> None:
        seen.append(obj["metadata"]["name"])
        now[0] += 1.0  # every event uses up a slice

    async def main() -> ListWatch:
        kube = KubeClient(client.ApiClient(configuration=client.Configuration()))
        watch = ListWatch(kube, "Pod", "/api/v1/pods", None, observe, replace,
                          clock=lambda: now[0])
        watch.kube = Buffered([event(f"p{i}") for i in range(5)])  # type: ignore[assignment]
        await watch._watch()
        await kube.close()
        return watch

    watch = asyncio.run(main())
    assert seen == [f"p{i}" for i in range(5)]
    assert watch.version == "1"
