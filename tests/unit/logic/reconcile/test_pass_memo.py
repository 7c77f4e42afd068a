"""What a pass keeps between its steps and passes must never hide a change: the memo of derived
facts (``logic.reconcile.memo``), the cache's per-owner change mark (``KindStore.changed``) and the
controller's held snapshot inputs (``controllers.leaderworkerset.Held``)."""

from __future__ import annotations

import copy
from dataclasses import fields
from typing import Any

from lws_operator.controllers.leaderworkerset import Held
from lws_operator.kube.cache import ClusterCache, KindStore
from lws_operator.logic.reconcile.memo import Memo
from lws_operator.logic.reconcile.snapshot import CACHED_FIELDS, Memory, Observed, Options
from tests.harness.lws_world import at_rest, built_world, manifest, plan_pass

OWNER = ("ns", "sample")


def _pod(name: str, version: str, owner: str = "sample") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                         "resourceVersion": version,
                         "labels": {"leaderworkerset.sigs.k8s.io/name": owner}}}


def test_a_memo_reuses_a_result_only_for_the_very_same_inputs() -> None:
    memo, calls = Memo(), []

    def compute() -> int:
        calls.append(1)
        return len(calls)

    first = {"a": 1}
    assert memo.get("n", (first, "key", 3), compute) == 1
    assert memo.get("n", (first, "key", 3), compute) == 1  # same objects, equal scalars
    assert memo.get("n", ({"a": 1}, "key", 3), compute) == 2  # an equal copy is not the same
    assert memo.get("n", ({"a": 1}, "key", 3), compute) == 3
    held = {"a": 1}
    assert memo.get("n", (held, "key", 4), compute) == 4
    assert memo.get("n", (held, "other", 4), compute) == 5
    assert memo.get("n", (held, "other", 4.0), compute) == 6  # another type is another input
    assert memo.get("m", (held, "other", 4.0), compute) == 7  # one result per name
    assert len(memo) == 2


def test_the_change_mark_moves_with_every_change_of_an_owners_objects() -> None:
    store = KindStore("Pod")
    assert store.changed(OWNER) == 0
    store.upsert(_pod("a", "5"))
    marks = [store.changed(OWNER)]
    store.upsert(_pod("a", "6"))
    marks.append(store.changed(OWNER))
    store.upsert(_pod("a", "4"))  # older than what is stored: not stored, no change
    assert store.changed(OWNER) == marks[-1]
    store.upsert(_pod("x", "7", owner="other"))  # another owner's object
    assert store.changed(OWNER) == marks[-1]
    store.upsert(_pod("b", "8"))
    marks.append(store.changed(OWNER))
    store.delete(_pod("b", "8"))
    marks.append(store.changed(OWNER))
    assert len(set(marks)) == len(marks)
    assert 0 not in marks
    store.upsert({**_pod("a", "9"), "metadata": {**_pod("a", "9")["metadata"], "labels": {}}})
    assert store.changed(OWNER) == 0  # none left: nothing to keep
    assert store.changed(("ns", "other")) != 0


def test_held_inputs_follow_the_cache() -> None:
    world = at_rest(built_world(manifest(size=2, replicas=2)))
    cache: ClusterCache = world.cache
    held = Held(cache, "ns")
    lws = cache["LeaderWorkerSet"].get(*OWNER)
    assert lws is not None
    held.refresh(cache, OWNER, lws)
    pods, body = held.pods, held.body
    held.refresh(cache, OWNER, lws)
    assert held.pods is pods
    assert held.body is body
    leader = copy.deepcopy(cache["Pod"].get("ns", "sample-1"))
    assert leader is not None
    leader["metadata"]["resourceVersion"] = "900"
    leader["metadata"]["labels"].pop("leaderworkerset.sigs.k8s.io/group-key")
    cache["Pod"].upsert(leader)
    held.refresh(cache, OWNER, lws)
    assert [p["metadata"]["name"] for p in held.owned["Pod"]] == [
        "sample-0", "sample-0-1", "sample-1", "sample-1-1"]
    assert "sample-1" not in [p["metadata"]["name"] for p in held.pods]  # not admitted now
    changed = {**lws, "metadata": {**lws["metadata"], "resourceVersion": "901"}}
    cache["LeaderWorkerSet"].upsert(changed)
    stored = cache["LeaderWorkerSet"].get(*OWNER)
    assert stored is not None
    held.refresh(cache, OWNER, stored)
    assert held.body is not body
    assert held.body["metadata"]["resourceVersion"] == "901"
    assert held.body["kind"] == "LeaderWorkerSet"
    assert held.cached["body"] is held.body  # a new body alone refreshes the snapshot fields
    assert held.cached["pods"] is held.pods
    assert tuple(held.cached) == CACHED_FIELDS


def test_an_assembled_snapshot_is_the_snapshot_its_fields_make() -> None:
    world = at_rest(built_world(manifest(size=2, replicas=2)))
    held = Held(world.cache, "ns")
    lws = world.cache["LeaderWorkerSet"].get(*OWNER)
    assert lws is not None
    held.refresh(world.cache, OWNER, lws)
    rest: dict[str, Any] = {
        "tombstones": ({"metadata": {"name": "gone"}},), "now": "2026-01-01T00:00:00Z",
        "clock": 5.0, "options": Options(60.0), "memory": Memory(reported=frozenset({"u"})),
        "collected": ("why",), "fetched": {"/x": {}}}
    assembled = Observed.assemble(held.cached, *rest.values())
    built = Observed(**held.cached, **rest)
    assert assembled == built
    assert {f.name for f in fields(Observed)} == {*CACHED_FIELDS, *rest}  # every field set
    for name in (f.name for f in fields(Observed)):
        assert getattr(assembled, name) is getattr(built, name), name
    assert assembled.lws.name == "sample"


def test_a_pass_reports_pods_the_webhook_never_saw() -> None:
    """The status step reads the unmutated pods from the snapshot (``Observed.unmutated_pods``),
    not from every pod."""
    world = at_rest(built_world(manifest(size=2, replicas=2)))
    worker = copy.deepcopy(world.cache["Pod"].get("ns", "sample-1-1"))
    assert worker is not None
    worker["metadata"].update(name="sample-1-9", uid="stray", resourceVersion="700")
    worker["metadata"]["labels"].pop("leaderworkerset.sigs.k8s.io/worker-index")
    world.cache["Pod"].upsert(worker)
    done = plan_pass(world)
    (status,) = [a for a in done.actions if getattr(a, "subresource", None) == "status"]
    progressing = next(c for c in status.body["status"]["conditions"]
                       if c["type"] == "Progressing")
    assert progressing["reason"] == "PodsNotMutated"
    assert "e.g. sample-1-9" in progressing["message"]
    assert done.events() == [f"event PodsNotMutated: {progressing['message']}"]


def test_a_selection_asks_only_about_objects_it_has_not_judged() -> None:
    memo, asked = Memo(), []

    def keep(obj: dict[str, Any]) -> bool:
        asked.append(obj["n"])
        return bool(obj["n"] % 2)

    one, two, three = {"n": 1}, {"n": 2}, {"n": 3}
    objects = (one, two, three)
    first = memo.select("odd", objects, keep)
    assert first == (one, three)
    assert asked == [1, 2, 3]
    assert memo.select("odd", objects, keep) is first  # the same tuple: nothing asked
    assert asked == [1, 2, 3]
    two_again = {"n": 2}  # a new object of equal content is asked about
    assert memo.select("odd", (one, two_again, three), keep) is first  # same objects kept
    assert asked == [1, 2, 3, 2]
    five = {"n": 5}
    assert memo.select("odd", (one, two_again, five), keep) == (one, five)
    assert asked == [1, 2, 3, 2, 5]
    assert memo.select("odd", (five, one), keep) == (five, one)  # their order, none asked
    assert asked == [1, 2, 3, 2, 5]
    assert memo.select("odd", (), keep) == ()
    assert memo.select("odd", (one,), keep) == (one,)  # forgotten once left out
    assert asked == [1, 2, 3, 2, 5, 1]
    assert memo.select("other", (one, two), keep) == (one,)  # each name judges on its own
    assert asked == [1, 2, 3, 2, 5, 1, 1, 2]
    assert len(memo) == 2


def test_owned_by_lists_an_owners_objects_in_name_order_through_every_change() -> None:
    """``owned_by`` keeps each owner's sorted names until one joins or leaves: a table of
    joins, changes, departures and relabelings, checked after each against a fresh sort."""
    store = KindStore("Pod")
    steps: list[tuple[str, dict[str, Any]]] = [
        ("upsert", _pod("c", "1")), ("upsert", _pod("a", "2")), ("upsert", _pod("b", "3")),
        ("upsert", _pod("a", "4")),  # a change: same members
        ("upsert", _pod("a0", "5", owner="other")),
        ("delete", _pod("b", "3")),
        ("upsert", _pod("b", "6")),  # back again
        ("upsert", _pod("c", "7", owner="other")),  # relabelled to another owner
        ("upsert", {**_pod("a", "8"), "metadata": {**_pod("a", "8")["metadata"],
                                                   "labels": {}}}),  # no owner at all
        ("upsert", _pod("a", "9")),
    ]
    for op, obj in steps:
        getattr(store, op)(obj)
        for owner in (OWNER, ("ns", "other")):
            names = [o["metadata"]["name"] for o in store.owned_by(owner)]
            expected = sorted(o["metadata"]["name"] for o in store._objects.values()
                              if o["metadata"]["labels"].get(
                                  "leaderworkerset.sigs.k8s.io/name") == owner[1])
            assert names == expected, (op, obj["metadata"])
            assert all(o is store.get("ns", o["metadata"]["name"])
                       for o in store.owned_by(owner))  # the stored objects, latest ones
    assert [o["metadata"]["name"] for o in store.owned_by(OWNER)] == ["a", "b"]
    assert [o["metadata"]["name"] for o in store.owned_by(("ns", "other"))] == ["a0", "c"]


def test_a_selection_over_objects_in_place_asks_about_the_replaced_ones_only() -> None:
    """The same number of objects, some replaced in place (a pod's new state keeps its name
    and so its place): only those are asked about; the result is the last tuple while no
    kept object changed, and right whatever moved (a reordering is asked about again)."""
    memo, asked = Memo(), []

    def keep(obj: dict[str, Any]) -> bool:
        asked.append(obj["n"])
        return bool(obj["n"] % 2)

    one, two, three, four = {"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}
    first = memo.select("odd", (one, two, three, four), keep)
    assert first == (one, three)
    assert asked == [1, 2, 3, 4]
    four_again = {"n": 4}
    assert memo.select("odd", (one, two, three, four_again), keep) is first
    assert asked == [1, 2, 3, 4, 4]
    three_again = {"n": 3}  # a kept object replaced: a new tuple with the new object
    kept = memo.select("odd", (one, two, three_again, four_again), keep)
    assert kept == (one, three_again)
    assert kept[1] is three_again
    assert asked == [1, 2, 3, 4, 4, 3]
    six = {"n": 6}  # a kept object's place taken by one not kept
    assert memo.select("odd", (one, two, six, four_again), keep) == (one,)
    seven = {"n": 7}  # and the other way round
    assert memo.select("odd", (one, two, six, seven), keep) == (one, seven)
    # Swapped places: both asked again, the order is the objects'.
    assert memo.select("odd", (two, one, six, seven), keep) == (one, seven)
    assert asked == [1, 2, 3, 4, 4, 3, 6, 7, 2, 1]
    assert memo.select("odd", (two, one, six, seven), keep) == (one, seven)
    assert asked == [1, 2, 3, 4, 4, 3, 6, 7, 2, 1]
