"""The watch cache: objects indexed by their LeaderWorkerSet, lean copies, tombstones."""

from __future__ import annotations

from typing import Any

from lws_operator.kube.cache import ClusterCache

NAME = "leaderworkerset.sigs.k8s.io/name"


def obj(name: str, lws: str | None = "a", ns: str = "ns") -> dict[str, Any]:
    labels = {NAME: lws} if lws else {}
    return {"metadata": {"name": name, "namespace": ns, "labels": labels,
                         "managedFields": [{"manager": "x"}]}}


def test_index_by_owner_and_relabel() -> None:
    cache = ClusterCache()
    pods = cache["Pod"]
    assert pods.upsert(obj("a-0")) == ("ns", "a")
    assert pods.upsert(obj("b-0", lws="b")) == ("ns", "b")
    assert pods.upsert(obj("plain", lws=None)) is None
    assert [p["metadata"]["name"] for p in pods.owned_by(("ns", "a"))] == ["a-0"]
    assert "managedFields" not in pods.get("ns", "a-0")["metadata"]  # type: ignore[index]
    pods.upsert(obj("a-0", lws="b"))  # relabelled: moves to the other owner
    assert pods.owned_by(("ns", "a")) == []
    assert [p["metadata"]["name"] for p in pods.owned_by(("ns", "b"))] == ["a-0", "b-0"]
    assert pods.delete(obj("a-0", lws=None)) == ("ns", "b")  # owner remembered from the index
    assert [p["metadata"]["name"] for p in pods.owned_by(("ns", "b"))] == ["b-0"]
    assert len(pods) == 2


def test_leaderworkersets_own_themselves() -> None:
    cache = ClusterCache()
    assert cache["LeaderWorkerSet"].upsert(obj("a", lws=None)) == ("ns", "a")
    assert list(cache["LeaderWorkerSet"].owners()) == [("ns", "a")]


def test_tombstones_are_taken_once() -> None:
    cache = ClusterCache()
    cache.bury(("ns", "a"), obj("a-0-1"))
    cache.bury(("ns", "a"), obj("a-0-2"))
    assert [p["metadata"]["name"] for p in cache.take_tombstones(("ns", "a"))] == [
        "a-0-1", "a-0-2"]
    assert cache.take_tombstones(("ns", "a")) == []


def test_synced_needs_every_kind() -> None:
    cache = ClusterCache()
    for kind in ClusterCache.KINDS[:-1]:
        cache[kind].synced = True
    assert not cache.synced
    cache[ClusterCache.KINDS[-1]].synced = True
    assert cache.synced
