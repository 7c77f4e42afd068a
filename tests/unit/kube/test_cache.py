"""The watch cache: objects indexed by their LeaderWorkerSet, lean copies, tombstones."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.kube.cache import ClusterCache, KindStore

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


def _lws(state: str) -> dict[str, Any]:
    lws = obj("a", lws=None)
    if state == "deleting":
        lws["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return lws


@pytest.mark.parametrize(("history", "buried"), [
    ((), True),  # not cached (yet): kept, a pass decides
    (("live",), True),
    (("deleting",), False),  # its passes only clean up: no copy
    (("live", "deleted"), False),  # seen deleted
    (("live", "deleted", "live"), True),  # a namesake created since
])
def test_a_set_being_deleted_gets_no_tombstones(history: tuple[str, ...], buried: bool) -> None:
    cache = ClusterCache()
    for state in history:
        if state == "deleted":
            cache["LeaderWorkerSet"].delete(_lws("live"), gone=True)
            cache.depart(("ns", "a"), _lws("live"))
        else:
            cache["LeaderWorkerSet"].upsert(_lws(state))
    cache.bury(("ns", "a"), obj("a-0-1"))
    cache.bury(("ns", "b"), obj("b-0-1", lws="b"))  # another set's: always kept
    assert len(cache.tombstones(("ns", "a"))) == int(buried)
    assert len(cache.tombstones(("ns", "b"))) == 1


def test_synced_needs_every_kind() -> None:
    cache = ClusterCache()
    for kind in ClusterCache.KINDS[:-1]:
        cache[kind].synced = True
    assert not cache.synced
    cache[ClusterCache.KINDS[-1]].synced = True
    assert cache.synced


def _pod(uid: str, version: int | str, **meta: object) -> dict[str, Any]:
    return {"metadata": {"namespace": "ns", "name": "lws-0", "uid": uid,
                         "resourceVersion": str(version),
                         "labels": {"leaderworkerset.sigs.k8s.io/name": "lws"}, **meta}}


# kopf streams each UID separately: the events of a replaced incarnation can arrive after the new
# incarnation's. (events in arrival order, the UID the store must end with or None)
@pytest.mark.parametrize(("events", "expected"), [
    ([("ADDED", _pod("old", 1)), ("DELETED", _pod("old", 3)), ("ADDED", _pod("new", 4))], "new"),
    ([("ADDED", _pod("old", 1)), ("ADDED", _pod("new", 4)), ("DELETED", _pod("old", 3))], "new"),
    ([("ADDED", _pod("new", 4)), ("MODIFIED", _pod("old", 2, deletionTimestamp="t"))], "new"),
    ([("ADDED", _pod("old", 1)), ("MODIFIED", _pod("old", 2, deletionTimestamp="t")),
      ("ADDED", _pod("new", 4)), ("MODIFIED", _pod("old", 3)), ("DELETED", _pod("old", 3))],
     "new"),
    ([("ADDED", _pod("old", 1)), ("MODIFIED", _pod("old", 2))], "old"),
    ([("ADDED", _pod("new", 4)), ("DELETED", _pod("new", 5))], None),
    # Versions that are not integers: the latest event wins.
    ([("ADDED", _pod("new", 4)), ("MODIFIED", _pod("old", "x"))], "old"),
])
def test_late_events_of_a_replaced_incarnation_never_win(
        events: list[tuple[str, dict[str, Any]]], expected: str | None) -> None:
    store = KindStore("Pod")
    for kind, obj in events:
        owner = store.delete(obj) if kind == "DELETED" else store.upsert(obj)
        assert owner == ("ns", "lws")  # the owner hears about every event
    stored = store.get("ns", "lws-0")
    assert (stored["metadata"]["uid"] if stored else None) == expected
    assert len(store.owned_by(("ns", "lws"))) == (0 if expected is None else 1)


# A pass stores its own write's answer, which can come after the watch events of later changes.
# (versions stored in arrival order, the version the store must end with)
@pytest.mark.parametrize(("versions", "expected"), [
    ([101, 102, 104, 101], "104"),  # the ungate's answer after bound, Running and Ready
    ([101, 104, 104], "104"),
    ([101, 102], "102"),
    (["101", "x"], "x"),  # versions that are not integers: the latest wins
    (["x", "101"], "101"),
])
def test_an_older_version_of_the_same_object_never_replaces_a_newer_one(
        versions: list[int | str], expected: str) -> None:
    store = KindStore("Pod")
    for version in versions:
        assert store.upsert(_pod("u", version)) == ("ns", "lws")
    stored = store.get("ns", "lws-0")
    assert stored is not None
    assert stored["metadata"]["resourceVersion"] == expected


def test_a_deleted_object_never_comes_back_from_a_late_write_answer() -> None:
    now = [0.0]
    store = KindStore("Pod", clock=lambda: now[0])
    store.upsert(_pod("u", 5))
    assert store.delete(_pod("u", 9), gone=True) == ("ns", "lws")  # its DELETED event
    store.upsert(_pod("u", 7))  # the answer of a write sent before it, stored late
    assert store.get("ns", "lws-0") is None
    assert store.owned_by(("ns", "lws")) == []
    store.upsert(_pod("v", 12))  # a new incarnation of the name is stored as ever
    assert store.get("ns", "lws-0")["metadata"]["uid"] == "v"  # type: ignore[index]
    # A late DELETED event of a replaced incarnation is remembered too.
    assert store.delete(_pod("old", 3), gone=True) == ("ns", "lws")
    store.delete(_pod("v", 13), gone=True)
    store.upsert(_pod("old", 2))
    assert store.get("ns", "lws-0") is None
    # Our own delete request (a finalizer may hold the object) forgets it without the memory.
    store.upsert(_pod("w", 20))
    store.delete(_pod("w", 20))
    store.upsert(_pod("w", 21, deletionTimestamp="t"))
    assert store.get("ns", "lws-0") is not None
    # The memory is bounded in time.
    now[0] = 601.0
    store.delete(_pod("w", 22), gone=True)  # prunes what is older than 10 minutes
    store.upsert(_pod("u", 30))
    assert store.get("ns", "lws-0")["metadata"]["uid"] == "u"  # type: ignore[index]


def test_cached_pods_keep_only_the_spec_a_pass_reads() -> None:
    """Exactly ``logic.reconcile.observed.POD_SPEC_SHAPE``: of a container, its name and its TPU
    limit and request (whether a leader requests TPUs decides its workers' TPU environment)."""
    store = KindStore("Pod")
    pod = {**_pod("u", 1), "kind": "Pod", "spec": {
        "nodeName": "n1", "schedulingGates": [{"name": "g"}], "readinessGates": [],
        "containers": [{"name": "c", "image": "i", "env": [{"name": "LWS_LEADER_ADDRESS"}],
                        "resources": {"limits": {"google.com/tpu": 4, "cpu": "1"},
                                      "requests": {"memory": "1Gi"}}}],
        "initContainers": [{"name": "init", "image": "i"}],
        "volumes": [{"name": "token"}], "terminationGracePeriodSeconds": 30}, "status": {
        "phase": "Running"}}
    store.upsert(pod)
    cached = store.get("ns", "lws-0")
    assert cached is not None
    assert cached["spec"] == {
        "nodeName": "n1", "schedulingGates": [{"name": "g"}], "readinessGates": [],
        "containers": [{"name": "c", "resources": {"limits": {"google.com/tpu": 4},
                                                   "requests": {}}}],
        "initContainers": [{"name": "init"}]}
    assert cached["status"] == {"phase": "Running"}
    assert pod["spec"]["containers"][0]["env"]  # the event's own object is left alone
    assert pod["spec"]["containers"][0]["resources"]["limits"]["cpu"] == "1"


def test_the_store_kind_decides_not_the_object_kind() -> None:
    """A pod event without ``kind`` is still trimmed; an object of another kind never is."""
    store = KindStore("Pod")
    store.upsert({**_pod("u", 1), "spec": {"containers": [{"name": "c", "image": "i"}]}})
    assert store.get("ns", "lws-0")["spec"] == {"containers": [{"name": "c"}]}  # type: ignore[index]


def test_other_kinds_keep_their_spec() -> None:
    store = KindStore("StatefulSet")
    sts = {**_pod("u", 1), "kind": "StatefulSet",
           "spec": {"replicas": 2, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    store.upsert(sts)
    cached = store.get("ns", "lws-0")
    assert cached is not None
    assert cached["spec"] == sts["spec"]
