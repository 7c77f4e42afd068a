"""How kopf's thread hands events to the main loop (``kube.watch``): every event reaches the
cache in arrival order, the other thread wakes the main loop only when no drain is coming (once
per burst, not once per batch), an idle drain ends the chain, and an event that fails to be
observed strands none behind it. The loop here is a recorder driven step by step: no thread, no
clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from kubernetes.aio import client
from prometheus_client import CollectorRegistry

from lws_operator.api.constants import NAME_LABEL
from lws_operator.kube.cache import ClusterCache, Key
from lws_operator.kube.client import KubeClient
from lws_operator.kube.watch import HANDOFF_DELAY, WATCHED, Watches


class RecordingLoop:
    """The loop methods the hand-over uses, recorded instead of scheduled; ``delays`` says
    how long each drain was to wait (0: at the loop's next turn)."""

    def __init__(self) -> None:
        self.wakeups = 0
        self.timers: list[Callable[[], None]] = []
        self.delays: list[float] = []

    def call_soon_threadsafe(self, callback: Callable[[], None]) -> None:
        self.wakeups += 1
        self.delays.append(0.0)
        self.timers.append(callback)

    def call_soon(self, callback: Callable[[], None]) -> None:
        self.delays.append(0.0)
        self.timers.append(callback)

    def call_later(self, delay: float, callback: Callable[[], None]) -> None:
        assert delay == HANDOFF_DELAY
        self.delays.append(delay)
        self.timers.append(callback)

    def fire(self) -> None:
        """Run the one pending drain, as the loop would when its delay is up."""
        assert len(self.timers) == 1, "exactly one drain is pending at a time"
        self.timers.pop()()


def pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "resourceVersion": "1", "labels": {NAME_LABEL: "x"}},
            "spec": {}, "status": {}}


def watches() -> tuple[Watches, RecordingLoop, list[Key]]:
    kube = KubeClient(client.ApiClient(configuration=client.Configuration()))
    told: list[Key] = []
    w = Watches(kube, ClusterCache(), CollectorRegistry(), WATCHED,
                lambda _kind, _type, owner, _obj: told.append(owner))
    loop = RecordingLoop()
    w._loop = loop  # type: ignore[assignment]
    return w, loop, told


def names(w: Watches) -> list[str]:
    return sorted(p["metadata"]["name"] for p in w.cache["Pod"].owned_by(("ns", "x")))


def test_a_burst_wakes_the_main_loop_once_and_an_idle_drain_ends_it() -> None:
    w, loop, told = watches()
    w._hand_over("Pod", "ADDED", pod("a"))
    w._hand_over("Pod", "ADDED", pod("b"))
    assert loop.wakeups == 1
    assert loop.delays == [0.0]  # the burst's first event waits for no delay of ours
    assert names(w) == []
    loop.fire()
    assert names(w) == ["a", "b"]
    assert told == [("ns", "x")] * 2
    # The burst goes on: the drain that took events scheduled the next one itself, a batch's
    # delay later.
    assert loop.delays == [0.0, HANDOFF_DELAY]
    w._hand_over("Pod", "ADDED", pod("c"))
    assert loop.wakeups == 1
    loop.fire()
    assert names(w) == ["a", "b", "c"]
    loop.fire()  # finds nothing: the chain ends, and the next event wakes the loop again
    assert loop.timers == []
    assert not w._drain_pending
    w._hand_over("Pod", "ADDED", pod("d"))
    assert loop.wakeups == 2
    assert loop.delays[-1] == 0.0
    loop.fire()
    assert names(w) == ["a", "b", "c", "d"]


def test_events_are_observed_in_arrival_order() -> None:
    w, loop, _ = watches()
    first = pod("a")
    second = pod("a") | {"status": {"phase": "Running"}}
    second["metadata"] = first["metadata"] | {"resourceVersion": "2"}
    w._hand_over("Pod", "ADDED", first)
    w._hand_over("Pod", "MODIFIED", second)
    w._hand_over("Pod", "DELETED", second)
    loop.fire()
    assert names(w) == []


def test_an_event_that_fails_strands_none_behind_it() -> None:
    w, loop, _ = watches()
    w._hand_over("NoSuchKind", "ADDED", pod("a"))
    w._hand_over("Pod", "ADDED", pod("b"))
    with pytest.raises(KeyError):
        loop.fire()
    loop.fire()
    assert names(w) == ["b"]
    loop.fire()
    assert loop.timers == []
    assert not w._drain_pending
