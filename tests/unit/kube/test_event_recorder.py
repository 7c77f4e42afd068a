"""The Event recorder's senders (``kube.events``) without a cluster: ``record`` returns before
the write, Events regarding one object are written in order while other objects' go on, a full
queue drops and counts, and stopping drains what is queued within its timeout.

The writes go to a stand-in for the client's ``request`` that keeps each Event's body and can
hold a write until the test releases it; what the API server answers is the cluster tests'
(``tests/integration/test_executor.py``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from lws_operator.kube.client import ApiException
from lws_operator.kube.events import DROP_LOG_INTERVAL, EventRecorder
from lws_operator.logic.objects.events import Event
from tests.harness.clock import ManualClock


class Writes:
    """Stands in for ``KubeClient.request``: the notes written, in the order the writes ended;
    a note listed in ``held`` waits for its gate; a note starting with ``fail`` is refused."""

    def __init__(self) -> None:
        self.written: list[str] = []
        self.started: list[str] = []
        self.held: dict[str, asyncio.Event] = {}

    async def request(self, method: str, path: str, *, body: Mapping[str, Any],
                      **_: Any) -> dict[str, Any]:
        assert (method, path) == ("POST", f"/apis/events.k8s.io/v1/namespaces/"
                                          f"{body['metadata']['namespace']}/events")
        note = str(body["note"])
        self.started.append(note)
        gate = self.held.get(note)
        if gate is not None:
            await gate.wait()
        if note.startswith("fail"):
            raise ApiException(status=500, reason="Internal Server Error")
        self.written.append(note)
        return dict(body)

    def hold(self, note: str) -> asyncio.Event:
        gate = self.held[note] = asyncio.Event()
        return gate


def obj(name: str) -> dict[str, Any]:
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": name, "namespace": "ns", "uid": f"u-{name}",
                         "resourceVersion": "7"}}


def event(note: str) -> Event:
    return Event("GroupsProgressing", "Normal", "Create", note)


def recorder(writes: Writes, **kwargs: Any) -> EventRecorder:
    return EventRecorder(writes, "test", **kwargs)  # type: ignore[arg-type]


async def until(condition: Any) -> None:
    """Let the senders run until ``condition()`` holds (a bounded number of loop turns)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the senders never got there")


async def test_record_returns_before_the_write_and_the_sender_writes_it() -> None:
    writes = Writes()
    events = recorder(writes)
    gate = writes.hold("slow")
    async with events.sending():
        events.record(obj("a"), event("slow"), related=obj("b"))
        assert writes.written == []  # record did not wait for the write
        await until(lambda: writes.started == ["slow"])
        assert writes.written == []  # the write is still held
        gate.set()
        await events.flush()
    assert writes.written == ["slow"]


async def test_the_body_is_the_event_regarding_the_object() -> None:
    writes = Writes()
    events = recorder(writes, controller="disaggregatedset")
    body = events.body(obj("a"), event("a note"), related=obj("b"))
    assert {k: body[k] for k in ("apiVersion", "kind", "reportingController",
                                 "reportingInstance", "action", "reason", "type", "note")} == {
        "apiVersion": "events.k8s.io/v1", "kind": "Event",
        "reportingController": "disaggregatedset", "reportingInstance": "test",
        "action": "Create", "reason": "GroupsProgressing", "type": "Normal", "note": "a note"}
    assert body["metadata"]["namespace"] == "ns"
    assert body["metadata"]["name"].startswith("a.")
    assert body["regarding"] == {"apiVersion": "leaderworkerset.x-k8s.io/v1",
                                 "kind": "LeaderWorkerSet", "name": "a", "namespace": "ns",
                                 "uid": "u-a", "resourceVersion": "7"}
    assert body["related"]["name"] == "b"


async def test_one_object_s_events_are_written_in_order_while_others_go_on() -> None:
    writes = Writes()
    events = recorder(writes, senders=4)
    gate = writes.hold("a1")
    async with events.sending():
        for note in ("a1", "a2", "a3"):
            events.record(obj("a"), event(note))
        events.record(obj("b"), event("b1"))
        await until(lambda: "b1" in writes.written)
        # Four senders, yet a's second Event waits for its first.
        assert writes.started == ["a1", "b1"]
        gate.set()
        await events.flush()
    assert writes.written == ["b1", "a1", "a2", "a3"]


async def test_a_refused_write_is_logged_and_the_next_goes_on(
        caplog: pytest.LogCaptureFixture) -> None:
    writes = Writes()
    events = recorder(writes)
    with caplog.at_level(logging.WARNING, logger="lws_operator.kube.events"):
        async with events.sending():
            events.record(obj("a"), event("fail once"))
            events.record(obj("a"), event("after"))
            await events.flush()
    assert writes.written == ["after"]
    assert [r.getMessage() for r in caplog.records] == [
        "could not record event GroupsProgressing 'fail once': (500)\n"
        "Reason: Internal Server Error\n"]


def dropped(registry: CollectorRegistry, controller: str) -> float | None:
    return registry.get_sample_value("lws_operator_events_dropped_total",
                                     {"controller": controller})


async def test_a_full_queue_drops_counts_and_warns_at_most_every_interval(
        caplog: pytest.LogCaptureFixture) -> None:
    writes = Writes()
    registry = CollectorRegistry()
    clock = ManualClock(100.0)
    events = recorder(writes, registry=registry, bound=2, clock=clock)
    assert dropped(registry, "leaderworkerset") == 0.0  # exported before any drop
    with caplog.at_level(logging.WARNING, logger="lws_operator.kube.events"):
        for note in ("kept 1", "kept 2", "lost 1", "lost 2"):
            events.record(obj("a"), event(note))
        clock.now += DROP_LOG_INTERVAL - 1
        events.record(obj("b"), event("lost 3"))
        clock.now += 1
        events.record(obj("b"), event("lost 4"))
    assert dropped(registry, "leaderworkerset") == 4.0
    assert [r.getMessage() for r in caplog.records] == [
        "dropped 1 Event(s) (the latest: GroupsProgressing 'lost 1'): 2 Events are already "
        "waiting to be written; every drop is counted in lws_operator_events_dropped_total",
        "dropped 3 Event(s) (the latest: GroupsProgressing 'lost 4'): 2 Events are already "
        "waiting to be written; every drop is counted in lws_operator_events_dropped_total"]
    async with events.sending():
        await events.flush()
    assert writes.written == ["kept 1", "kept 2"]


async def test_stopping_writes_what_is_queued() -> None:
    writes = Writes()
    events = recorder(writes, senders=2)
    async with events.sending():
        for i in range(20):
            events.record(obj(f"o{i % 3}"), event(f"n{i}"))
    assert sorted(writes.written) == sorted(f"n{i}" for i in range(20))
    for name in ("o0", "o1", "o2"):  # each object's in order
        mine = [n for n in writes.written if int(n[1:]) % 3 == int(name[1:])]
        assert mine == sorted(mine, key=lambda n: int(n[1:]))


async def test_stopping_gives_up_after_the_drain_timeout_and_says_so(
        caplog: pytest.LogCaptureFixture) -> None:
    writes = Writes()
    events = recorder(writes, senders=1)
    writes.hold("stuck")  # never released
    with caplog.at_level(logging.WARNING, logger="lws_operator.kube.events"):
        async with events.sending(drain=0.05):
            events.record(obj("a"), event("stuck"))
            events.record(obj("b"), event("behind"))
            await until(lambda: writes.started == ["stuck"])
    assert writes.written == []
    assert [r.getMessage() for r in caplog.records] == [
        "stopping: 2 Event(s) of the leaderworkerset controller not recorded (not written "
        "within 0.05 s)"]


async def test_events_recorded_before_the_senders_start_are_written_once_they_do() -> None:
    writes = Writes()
    events = recorder(writes)
    events.record(obj("a"), event("early"))
    await asyncio.sleep(0)
    assert writes.started == []
    async with events.sending():
        await events.flush()
    assert writes.written == ["early"]

