"""The eviction guard (``admission.eviction``) over a real watch cache, without a cluster: what
it reads of the cache, the reservations it keeps between decisions, its metrics, and replicas
deciding together through one set whose writes carry a resourceVersion precondition (the API
server itself: ``e2e/controllers/test_eviction_replicas.py``)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from lws_operator.admission.eviction import MAX_ATTEMPTS, Conflict, EvictionGuard
from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    MAX_DISRUPTED_GROUPS_ANNOTATION,
    NAME_LABEL,
)
from lws_operator.kube.cache import ClusterCache
from lws_operator.kube.client import ApiException
from lws_operator.logic.disruption.budget import RESERVATION_SECONDS
from lws_operator.logic.disruption.reservations import parse_reservations
from tests.harness.clock import ManualClock

NS = "ns"


def lws(name: str, replicas: int, size: int, budget: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"u-{name}",
                            "resourceVersion": "1"}
    if budget is not None:
        meta["annotations"] = {MAX_DISRUPTED_GROUPS_ANNOTATION: budget}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": meta, "spec": {"replicas": replicas, "leaderWorkerTemplate": {
                "size": size, "workerTemplate": {}}}}


def pod(set_name: str, group: int, worker: int, version: int = 1, ready: bool = True,
        deleting: bool = False) -> dict[str, Any]:
    name = f"{set_name}-{group}" + (f"-{worker}" if worker else "")
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"u-{name}",
                            "resourceVersion": str(version),
                            "labels": {NAME_LABEL: set_name, GROUP_INDEX_LABEL: str(group)}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {}, "status": {
        "phase": "Running", "conditions": [{"type": "Ready",
                                            "status": "True" if ready else "False"}]}}


def world(*sets: dict[str, Any]) -> ClusterCache:
    cache = ClusterCache()
    for store in cache.stores.values():
        store.synced = True
    for obj in sets:
        cache["LeaderWorkerSet"].upsert(obj)
        spec = obj["spec"]
        for group in range(spec["replicas"]):
            for worker in range(spec["leaderWorkerTemplate"]["size"]):
                cache["Pod"].upsert(pod(obj["metadata"]["name"], group, worker))
    return cache


def eviction(name: str, dry_run: bool = False) -> dict[str, Any]:
    return {"operation": "CREATE", "subResource": "eviction", "namespace": NS, "name": name,
            "dryRun": dry_run}


def allowed(answer: dict[str, Any]) -> bool:
    return bool(answer["allowed"])


async def test_reservations_hold_a_group_until_the_cache_shows_it_then_expire() -> None:
    cache, clock, registry = (world(lws("s", 3, 2, "1")), ManualClock(1000.0),
                              CollectorRegistry())
    guard = EvictionGuard(cache, None, registry, clock)
    assert allowed(await guard.decide(eviction("s-0-1", dry_run=True)))  # reserves nothing
    assert allowed(await guard.decide(eviction("s-1-1")))
    refused = await guard.decide(eviction("s-2-1"))  # the cache does not show s-1-1 going yet
    assert not allowed(refused)
    assert (refused["status"]["code"], refused["status"]["reason"]) == (429, "TooManyRequests")
    assert "group 2 is healthy and 1 group(s) [1] are already disrupted" in \
        refused["status"]["message"]
    assert allowed(await guard.decide(eviction("s-1")))  # more of the disrupted group: free
    # The cache sees the eviction: the reservation gives way to what the cache shows.
    cache["Pod"].upsert(pod("s", 1, 1, version=2, deleting=True))
    assert not allowed(await guard.decide(eviction("s-0")))
    # The group comes back Ready (a new pod): the next group may go.
    cache["Pod"].delete(pod("s", 1, 1, version=3, deleting=True))
    cache["Pod"].upsert({**pod("s", 1, 1, version=4), "metadata": {
        **pod("s", 1, 1)["metadata"], "uid": "u-new", "resourceVersion": "4"}})
    assert allowed(await guard.decide(eviction("s-0")))
    # An allowed eviction that never happens (refused later by a PDB) stops holding its group.
    assert not allowed(await guard.decide(eviction("s-2")))
    clock.now += RESERVATION_SECONDS
    assert allowed(await guard.decide(eviction("s-2")))
    samples = {(s.labels["decision"], s.value) for m in registry.collect()
               if m.name == "lws_evictions" for s in m.samples if s.name.endswith("_total")}
    assert samples == {("allowed", 5.0), ("refused", 3.0)}
    disrupted = [s.value for m in registry.collect() if m.name == "lws_disrupted_groups"
                 for s in m.samples]
    assert disrupted == [1.0]


async def test_pods_of_sets_without_a_budget_and_unknown_pods_are_allowed() -> None:
    cache = world(lws("free", 2, 1, None), lws("bad", 2, 1, "two"), lws("s", 2, 1, "1"))
    guard = EvictionGuard(cache, None, None)
    for name in ("free-0", "free-1", "bad-0", "bad-1", "nobody", "s-0"):
        assert allowed(await guard.decide(eviction(name))), name
    assert not allowed(await guard.decide(eviction("s-1")))
    # Not an eviction, or a cache not yet synced: allowed.
    assert allowed(await guard.decide({**eviction("s-1"), "subResource": ""}))
    cache["Pod"].synced = False
    assert allowed(await guard.decide(eviction("s-1")))


class VersionedSet:
    """The set as the API server keeps it for the guards' writes: a merge patch carrying a
    resourceVersion other than the current one is a conflict. The write yields first, as a
    request does, so that guards deciding together all read before any writes."""

    def __init__(self, obj: dict[str, Any], fail: BaseException | None = None,
                 always_conflict: bool = False) -> None:
        self.obj, self.fail, self.always_conflict = obj, fail, always_conflict
        self.writes = self.conflicts = 0

    async def read(self, namespace: str, name: str) -> dict[str, Any] | None:
        await asyncio.sleep(0)
        return copy.deepcopy(self.obj)

    async def write(self, lws: Any, body: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(0)
        if self.fail is not None:
            raise self.fail
        meta = self.obj["metadata"]
        if self.always_conflict or body["metadata"]["resourceVersion"] != meta["resourceVersion"]:
            self.conflicts += 1
            raise Conflict
        self.writes += 1
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)
        meta["annotations"] = {**meta.get("annotations", {}),
                               **body["metadata"]["annotations"]}
        return copy.deepcopy(self.obj)


def replicas(n: int, store: VersionedSet, clock: ManualClock) -> list[EvictionGuard]:
    """``n`` operator replicas: each its own cache of the same cluster, one shared set."""
    return [EvictionGuard(world(copy.deepcopy(store.obj)), None, None, clock, store=store)
            for _ in range(n)]


@pytest.mark.parametrize("budget", [1, 2])
async def test_replicas_deciding_together_allow_at_most_the_budget(budget: int) -> None:
    store, clock = VersionedSet(lws("s", 4, 2, str(budget))), ManualClock(1000.0)
    guards = replicas(2, store, clock)
    # Four healthy groups, one eviction each, alternately to the two replicas, all at once.
    answers = await asyncio.gather(*(guards[g % 2].decide(eviction(f"s-{g}-1"))
                                     for g in range(4)))
    assert sum(allowed(a) for a in answers) == budget
    assert store.writes == budget
    assert store.conflicts >= 1  # the replicas did collide, and the precondition decided
    reserved = parse_reservations(store.obj["metadata"]["annotations"])
    assert len(reserved) == budget


async def test_without_a_shared_store_replicas_each_allow_their_own() -> None:
    """What the precondition prevents: per-process reservations let each replica allow one."""
    clock = ManualClock(1000.0)
    guards = [EvictionGuard(world(lws("s", 4, 2, "1")), None, None, clock) for _ in range(2)]
    answers = await asyncio.gather(guards[0].decide(eviction("s-0-1")),
                                   guards[1].decide(eviction("s-1-1")))
    assert [allowed(a) for a in answers] == [True, True]


async def test_a_write_that_keeps_conflicting_is_refused_with_429() -> None:
    store = VersionedSet(lws("s", 3, 2, "1"), always_conflict=True)
    [guard] = replicas(1, store, ManualClock(1000.0))
    answer = await guard.decide(eviction("s-0-1"))
    assert (answer["allowed"], answer["status"]["code"]) == (False, 429)
    assert store.conflicts == MAX_ATTEMPTS


async def test_a_write_that_fails_otherwise_allows_the_eviction() -> None:
    """As the webhook's failure policy would: a guard that cannot record never blocks."""
    store = VersionedSet(lws("s", 3, 2, "1"), fail=ConnectionRefusedError())
    [guard] = replicas(1, store, ManualClock(1000.0))
    assert allowed(await guard.decide(eviction("s-0-1")))
    gone = VersionedSet(lws("s", 3, 2, "1"), fail=ApiException(status=404, reason="NotFound"))
    [guard] = replicas(1, gone, ManualClock(1000.0))
    assert allowed(await guard.decide(eviction("s-0-1")))


async def test_a_replica_reads_the_reservation_another_wrote() -> None:
    """Replica B's cache of the set lags: its write conflicts, it reads the set again and
    refuses, counting A's reservation although its pod cache shows every group Ready."""
    store, clock = VersionedSet(lws("s", 3, 2, "1")), ManualClock(1000.0)
    a, b = replicas(2, store, clock)
    assert allowed(await a.decide(eviction("s-0-1")))
    refused = await b.decide(eviction("s-1-1"))
    assert not allowed(refused)
    assert "1 group(s) [0] are already disrupted" in refused["status"]["message"]
    # More pods of the reserved group: allowed by either, without a write.
    writes = store.writes
    assert allowed(await b.decide(eviction("s-0")))
    assert store.writes == writes
