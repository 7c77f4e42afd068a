"""A relisting replaces a watch cache's store (``logic.runtime.relisting``,
``kube.watch._replace``): what the listing lacks is delivered as a deletion, through the watch's
DELETED path (a pod's tombstone, the owner woken, a departed set remembered), and what changed as an
update; an object cached after the listing was taken (the answer to our own write) stays."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.aio import client
from prometheus_client import CollectorRegistry

from lws_operator.api.constants import NAME_LABEL
from lws_operator.controllers.runtime import ControllerOptions, ControllerRuntime
from lws_operator.kube.client import KubeClient
from lws_operator.logic.runtime.relisting import Held, deleted, stale


def h(name: str, uid: str = "", version: int | None = 5) -> Held:
    return Held(("ns", name), uid or f"u-{name}", version)


@pytest.mark.parametrize(("cached", "listed", "at", "expected"), [
    ([], [], 10, []),
    ([h("a")], [h("a")], 10, []),
    ([h("a")], [], 10, [h("a")]),
    ([h("a"), h("b")], [h("b", version=9)], 10, [h("a")]),
    ([h("a")], [h("a", uid="new", version=8)], 10, [h("a")]),
    ([h("a", version=12)], [], 10, []),
    ([h("a", version=10)], [], 10, [h("a", version=10)]),
    ([h("a", version=None)], [], 10, [h("a", version=None)]),
    ([h("a")], [], None, [h("a")]),
    ([h("b"), h("a")], [], 10, [h("a"), h("b")]),
], ids=["nothing", "listed as cached", "an empty relisting proves every object gone",
        "only what the listing lacks", "another incarnation at the name",
        "cached after the listing (our write's answer) stays", "at the listing's version",
        "a version that is no integer: the listing wins",
        "a listing without a version: the listing wins", "in name order"])
def test_deleted(cached: list[Held], listed: list[Held], at: int | None,
                 expected: list[Held]) -> None:
    assert deleted(cached, listed, at) == expected


@pytest.mark.parametrize(("cached", "listed", "expected"), [
    ([], [], []),
    ([h("a")], [h("a")], []),
    ([], [h("a")], [h("a")]),
    ([h("a")], [h("a", version=6)], [h("a", version=6)]),
    ([h("a")], [h("a", uid="new")], [h("a", uid="new")]),
    ([h("a", version=None)], [h("a", version=None)], [h("a", version=None)]),
    ([], [h("b"), h("a")], [h("b"), h("a")]),
], ids=["nothing", "listed as cached", "new", "changed", "another incarnation",
        "a version that is no integer cannot be told unchanged", "in listing order"])
def test_stale(cached: list[Held], listed: list[Held], expected: list[Held]) -> None:
    assert stale(cached, listed) == expected


# ------------------------------------------------------------------- through the watch layer


def obj(kind: str, name: str, uid: str, version: str, owner: str = "x") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": uid,
                            "resourceVersion": version}
    if kind != "LeaderWorkerSet":
        meta["labels"] = {NAME_LABEL: owner}
    return {"apiVersion": "v1", "kind": kind, "metadata": meta, "spec": {}}


def runtime() -> tuple[ControllerRuntime, CollectorRegistry]:
    registry = CollectorRegistry()
    kube = KubeClient(client.ApiClient(client.Configuration(host="https://127.0.0.1:1")))
    return ControllerRuntime(kube, ControllerOptions(), registry), registry


def deletions(registry: CollectorRegistry, kind: str) -> float:
    return registry.get_sample_value("lws_operator_watch_relisting_deletions_total",
                                     {"kind": kind}) or 0.0


async def test_a_pod_missing_from_the_relisting_is_buried_and_wakes_its_set() -> None:
    run, registry = runtime()
    run.watches._observe("Pod", "ADDED", obj("Pod", "x-0", "p1", "5"))
    run.watches._observe("Pod", "ADDED", obj("Pod", "x-1", "p2", "6"))
    await run.queue.get()
    run.queue.done(("ns", "x"))
    await run.watches._replace("Pod", [obj("Pod", "x-1", "p2", "6")], "20")
    assert run.cache["Pod"].get("ns", "x-0") is None
    assert run.cache["Pod"].get("ns", "x-1") is not None
    assert [cached["metadata"]["uid"] for cached in run.cache.tombstones(("ns", "x"))] == ["p1"]
    assert len(run.queue) == 1  # a deletion wakes its set at once
    assert deletions(registry, "Pod") == 1
    assert registry.get_sample_value("lws_operator_watch_relistings_total",
                                     {"kind": "Pod"}) == 1


async def test_an_empty_relisting_of_the_owner_kind_departs_the_set() -> None:
    run, registry = runtime()
    run.watches._observe("LeaderWorkerSet", "ADDED", obj("LeaderWorkerSet", "x", "l1", "5"))
    await run.watches._replace("LeaderWorkerSet", [], "20")
    assert run.cache["LeaderWorkerSet"].get("ns", "x") is None
    assert run.cache.departed(("ns", "x")) is not None  # its cleanup pass reads it
    assert deletions(registry, "LeaderWorkerSet") == 1


async def test_a_replaced_incarnation_is_deleted_then_the_new_one_stored() -> None:
    run, registry = runtime()
    run.watches._observe("Service", "ADDED", obj("Service", "x", "s1", "5"))
    await run.watches._replace("Service", [obj("Service", "x", "s2", "15")], "20")
    stored = run.cache["Service"].get("ns", "x")
    assert stored is not None
    assert stored["metadata"]["uid"] == "s2"
    assert deletions(registry, "Service") == 1


async def test_an_object_cached_after_the_listing_stays_and_unchanged_ones_wake_nothing(
        ) -> None:
    run, registry = runtime()
    run.cache["StatefulSet"].upsert(obj("StatefulSet", "x-0", "w1", "25"))  # our create's answer
    run.cache["StatefulSet"].upsert(obj("StatefulSet", "x", "w0", "5"))
    await run.watches._replace("StatefulSet", [obj("StatefulSet", "x", "w0", "5")], "20")
    assert run.cache["StatefulSet"].get("ns", "x-0") is not None
    assert run.cache["StatefulSet"].get("ns", "x") is not None
    assert len(run.queue) == 0
    assert run.queue.coalescing() == {}
    assert deletions(registry, "StatefulSet") == 0
