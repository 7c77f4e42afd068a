"""When the watch caches are resynced (``kube.gaps``), from kopf's public API and our own
client only: a listing's events of any kind, the API server answering again after our client
found it away, a LeaderWorkerSet created over cached leftovers of a namesake. That a resync
drops exactly what a real listing no longer holds is tested against a real API server
(``tests/integration/test_watch_gaps.py``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.aio import client
from prometheus_client import CollectorRegistry

from lws_operator.api.constants import NAME_LABEL
from lws_operator.controllers.runtime import ControllerOptions, ControllerRuntime
from lws_operator.kube.client import NO_ANSWER, KubeClient, Reachability
from lws_operator.kube.gaps import LEFTOVERS, LISTED, RECONNECTED, STARTED, WatchGaps
from lws_operator.kube.metrics import WatchMetrics

SETTLE = 0.05


class Resyncs:
    """Counts resyncs; fails the first ``failures`` of them as an API server away would."""

    def __init__(self, failures: int = 0) -> None:
        self.done = 0
        self.failures = failures

    async def __call__(self) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("refused")
        self.done += 1


def gaps_with(resync: Resyncs) -> tuple[WatchGaps, CollectorRegistry]:
    registry = CollectorRegistry()
    return WatchGaps(resync, WatchMetrics.for_registry(registry), settle=SETTLE,
                     retry_max=4 * SETTLE), registry


async def settled(gaps: WatchGaps) -> None:
    for _ in range(400):
        if not gaps.pending:
            return
        await asyncio.sleep(SETTLE / 5)
    raise AssertionError("the resync never settled")


def sample(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


async def test_a_listing_in_chunks_is_one_resync_and_only_a_relisting_is_counted() -> None:
    resync = Resyncs()
    gaps, registry = gaps_with(resync)
    for i in range(3):  # kopf's initial listing, in chunks with pauses shorter than SETTLE
        gaps.listed("Pod", f"ns/p{i}")
        await asyncio.sleep(SETTLE / 5)
    await settled(gaps)
    assert resync.done == 1
    assert sample(registry, "lws_operator_watch_relistings_total", kind="Pod") == 0

    for i in range(3):  # the watch expired: kopf lists again
        gaps.listed("Pod", f"ns/p{i}")
    gaps.listed("Service", "ns/s")  # empty at the start, so first seen now: a relisting too
    await settled(gaps)
    assert resync.done == 2
    assert sample(registry, "lws_operator_watch_relistings_total", kind="Pod") == 1
    assert sample(registry, "lws_operator_watch_relistings_total", kind="Service") == 1
    assert sample(registry, "lws_operator_cache_resync_triggers_total", reason=LISTED) == 2
    await gaps.close()


async def test_a_pause_within_a_listing_longer_than_the_settling_time_is_no_relisting() -> None:
    """A big listing (50,000 pods on a busy machine) pauses between chunks for longer than
    the settling time: a resync runs meanwhile, yet the next chunk goes on past the last key
    listed and is no relisting. A listing that starts over at or before it is one; keys are
    compared as the API server orders them (storage keys, "namespace/name")."""
    resync = Resyncs()
    gaps, registry = gaps_with(resync)
    gaps.listed("Pod", "ns/p0")
    gaps.listed("Pod", "ns/p1")
    await settled(gaps)  # the pause: a resync settles
    gaps.listed("Pod", "ns/p2")  # the next chunk
    gaps.listed("Pod", "ns-b/p0")  # "ns-b/" sorts before "ns/" in storage order, not after:
    await settled(gaps)  # ... so this started over: the relisting
    assert sample(registry, "lws_operator_watch_relistings_total", kind="Pod") == 1
    gaps.listed("Pod", "ns-b/p1")
    gaps.listed("Pod", "ns/p0")
    await settled(gaps)
    assert sample(registry, "lws_operator_watch_relistings_total", kind="Pod") == 1
    gaps.listed("Pod", "ns/p0")  # a listing of one object, listed again
    await settled(gaps)
    assert sample(registry, "lws_operator_watch_relistings_total", kind="Pod") == 2
    assert resync.done == 4
    await gaps.close()


async def test_kopf_starting_asks_for_a_resync_even_if_every_initial_listing_is_empty() -> None:
    resync = Resyncs()
    gaps, registry = gaps_with(resync)
    gaps.started()
    gaps.listed("LeaderWorkerSet", "ns/x")  # kopf's initial listing, within the settling time
    await settled(gaps)
    assert resync.done == 1
    assert sample(registry, "lws_operator_cache_resync_triggers_total", reason=STARTED) == 1
    assert sample(registry, "lws_operator_watch_relistings_total", kind="LeaderWorkerSet") == 0


async def test_a_failed_resync_is_tried_again_until_it_succeeds() -> None:
    resync = Resyncs(failures=3)
    gaps, _ = gaps_with(resync)
    gaps.listed("Service", "ns/s")
    await settled(gaps)
    assert resync.done == 1
    assert resync.failures == 0
    await gaps.close()


@pytest.mark.parametrize(("signal", "reason"), [
    (lambda gaps: gaps.reconnected(), RECONNECTED),
    (lambda gaps: gaps.leftovers("LeaderWorkerSet", "ns", "x"), LEFTOVERS),
])
async def test_each_signal_asks_for_one_resync(signal: Any, reason: str) -> None:
    resync = Resyncs()
    gaps, registry = gaps_with(resync)
    signal(gaps)
    signal(gaps)
    await settled(gaps)
    assert resync.done == 1
    assert sample(registry, "lws_operator_cache_resync_triggers_total", reason=reason) == 1
    await gaps.close()


def test_reachability_tells_when_the_server_answers_again() -> None:
    seen: list[str] = []
    reach = Reachability()
    reach.subscribe(lambda: seen.append("back"))
    reach.saw("200")
    reach.saw("404")  # an answer about the request, not about the server
    assert seen == []
    reach.saw(NO_ANSWER)
    reach.saw("503")
    assert reach.away
    assert seen == []
    reach.saw("409")
    assert not reach.away
    assert seen == ["back"]
    reach.saw("200")
    assert seen == ["back"]


# The runtime's part: which events ask for a resync. Nothing here reaches an API server.

def runtime() -> tuple[ControllerRuntime, CollectorRegistry]:
    kube = KubeClient(client.ApiClient(configuration=client.Configuration()))
    registry = CollectorRegistry()
    return ControllerRuntime(kube, ControllerOptions(), registry), registry


async def queued(run: ControllerRuntime, keys: int) -> None:
    """Until ``keys`` keys wait in the queue (children's events are coalesced for a moment)."""
    async with asyncio.timeout(5):
        while len(run.queue) < keys:  # noqa: ASYNC110 - the queue has no event to wait on
            await asyncio.sleep(0.01)
    assert len(run.queue) == keys


def obj(kind: str, name: str, uid: str, owner: str | None = None) -> dict[str, Any]:
    labels = {NAME_LABEL: owner} if owner else {}
    return {"kind": kind, "metadata": {"name": name, "namespace": "ns", "uid": uid,
                                       "resourceVersion": "5", "labels": labels}}


async def test_an_event_without_a_type_of_any_kind_asks_for_a_resync() -> None:
    run, registry = runtime()
    run.watches._observe("Service", "ADDED", obj("Service", "x", "s1", owner="x"))
    assert not run.watches.gaps.pending
    revision = obj("ControllerRevision", "x-1", "c1", owner="x")
    run.watches._observe("ControllerRevision", None, revision)
    assert run.watches.gaps.pending
    assert sample(registry, "lws_operator_cache_resync_triggers_total", reason=LISTED) == 1
    await run.watches.gaps.close()


async def test_a_set_created_over_cached_leftovers_of_a_namesake_asks_for_a_resync() -> None:
    run, registry = runtime()
    run.watches._observe("LeaderWorkerSet", "ADDED", obj("LeaderWorkerSet", "fresh", "l1"))
    run.watches._observe("LeaderWorkerSet", "MODIFIED", obj("LeaderWorkerSet", "fresh", "l1"))
    run.watches._observe("Service", "ADDED", obj("Service", "fresh", "s1", owner="fresh"))
    assert not run.watches.gaps.pending  # a new set, then its own children: no leftovers

    run.watches._observe("Service", "ADDED", obj("Service", "old", "s2", owner="old"))
    run.watches._observe("LeaderWorkerSet", "ADDED", obj("LeaderWorkerSet", "old", "l2"))
    assert run.watches.gaps.pending
    assert sample(registry, "lws_operator_cache_resync_triggers_total", reason=LEFTOVERS) == 1
    await run.watches.gaps.close()


async def test_a_listing_of_an_object_cached_as_it_is_wakes_no_pass() -> None:
    """kopf's first listing comes after the operator's own: objects it lists unchanged (same
    UID and resourceVersion) are news to nobody; a changed or new one is, and every listing
    still asks for a resync."""
    run, _registry = runtime()
    run.watches._observe("Service", "ADDED", obj("Service", "x", "s1", owner="x"))
    assert await run.queue.get() == ("ns", "x")  # taken by a worker: no longer queued
    run.watches._observe("Service", None, obj("Service", "x", "s1", owner="x"))
    assert len(run.queue) == 0
    assert run.watches.gaps.pending
    changed = obj("Service", "x", "s1", owner="x")
    changed["metadata"]["resourceVersion"] = "6"
    run.watches._observe("Service", None, changed)
    await queued(run, 1)  # a child's event joins a pass a moment later (``add_soon``)
    assert run.watches.cache["Service"].get("ns", "x") == changed
    run.watches._observe("Service", None, obj("Service", "y", "s2", owner="y"))
    await queued(run, 2)
    await run.watches.gaps.close()
