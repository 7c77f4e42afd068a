"""The eviction guard (``admission.eviction``) over a real watch cache, without a cluster: what
it reads of the cache, the reservations it keeps between decisions, and its metrics."""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry

from lws_operator.admission.eviction import EvictionGuard
from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    MAX_DISRUPTED_GROUPS_ANNOTATION,
    NAME_LABEL,
)
from lws_operator.kube.cache import ClusterCache
from lws_operator.logic.disruption import RESERVATION_SECONDS

NS = "ns"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


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


def test_reservations_hold_a_group_until_the_cache_shows_it_then_expire() -> None:
    cache, clock, registry = world(lws("s", 3, 2, "1")), Clock(), CollectorRegistry()
    guard = EvictionGuard(cache, None, registry, clock)
    assert allowed(guard.decide(eviction("s-0-1", dry_run=True)))  # reserves nothing
    assert allowed(guard.decide(eviction("s-1-1")))
    refused = guard.decide(eviction("s-2-1"))  # the cache does not show s-1-1 going yet
    assert not allowed(refused)
    assert (refused["status"]["code"], refused["status"]["reason"]) == (429, "TooManyRequests")
    assert "group 2 is healthy and 1 group(s) [1] are already disrupted" in \
        refused["status"]["message"]
    assert allowed(guard.decide(eviction("s-1")))  # more of the disrupted group: free
    # The cache sees the eviction: the reservation gives way to what the cache shows.
    cache["Pod"].upsert(pod("s", 1, 1, version=2, deleting=True))
    assert not allowed(guard.decide(eviction("s-0")))
    assert guard.reserved == {}
    # The group comes back Ready (a new pod): the next group may go.
    cache["Pod"].delete(pod("s", 1, 1, version=3, deleting=True))
    cache["Pod"].upsert({**pod("s", 1, 1, version=4), "metadata": {
        **pod("s", 1, 1)["metadata"], "uid": "u-new", "resourceVersion": "4"}})
    assert allowed(guard.decide(eviction("s-0")))
    # An allowed eviction that never happens (refused later by a PDB) stops holding its group.
    assert not allowed(guard.decide(eviction("s-2")))
    clock.now += RESERVATION_SECONDS
    assert allowed(guard.decide(eviction("s-2")))
    samples = {(s.labels["decision"], s.value) for m in registry.collect()
               if m.name == "lws_evictions" for s in m.samples if s.name.endswith("_total")}
    assert samples == {("allowed", 5.0), ("refused", 3.0)}
    disrupted = [s.value for m in registry.collect() if m.name == "lws_disrupted_groups"
                 for s in m.samples]
    assert disrupted == [1.0]


def test_pods_of_sets_without_a_budget_and_unknown_pods_are_allowed() -> None:
    cache = world(lws("free", 2, 1, None), lws("bad", 2, 1, "two"), lws("s", 2, 1, "1"))
    guard = EvictionGuard(cache, None, None)
    for name in ("free-0", "free-1", "bad-0", "bad-1", "nobody", "s-0"):
        assert allowed(guard.decide(eviction(name))), name
    assert not allowed(guard.decide(eviction("s-1")))
    # Not an eviction, or a cache not yet synced: allowed.
    assert allowed(guard.decide({**eviction("s-1"), "subResource": ""}))
    cache["Pod"].synced = False
    assert allowed(guard.decide(eviction("s-1")))
