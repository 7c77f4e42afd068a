"""The events of a LeaderWorkerSet's children while it is being deleted or gone wake a pass only
when that pass would do something (``controllers.runtime.ControllerRuntime._changed``,
``LeaderWorkerSetReconciler.cleanup_due``): a retained pod's finalizer to remove, or with
Parallel a worker StatefulSet to delete. The set's own deletion always wakes one, a live set's
children wake passes as before, and the departed set is forgotten with its last object. The
events go through the watch layer's ``_observe`` into the real cache and work queue."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.aio import client
from prometheus_client import CollectorRegistry

from lws_operator.controllers.runtime import ControllerOptions, ControllerRuntime
from lws_operator.kube import watch
from lws_operator.kube.client import ApiException, KubeClient
from lws_operator.logic.failures.restart_budget import CLEANUP_FINALIZER
from tests.harness.lws_world import at_rest, built_world, manifest

DELETED_AT = "2026-01-01T00:11:00Z"


def runtime_over(body: dict[str, Any]) -> ControllerRuntime:
    """A runtime whose cache holds a set at rest (two groups of three), synced."""
    world = at_rest(built_world(body))
    kube = KubeClient(client.ApiClient(configuration=client.Configuration()))
    runtime = ControllerRuntime(kube, ControllerOptions(), CollectorRegistry())
    for kind, store in world.cache.stores.items():
        for obj in store.in_namespace(world.key[0]):
            runtime.cache[kind].upsert(obj)
        runtime.cache[kind].synced = True
    return runtime


def key_of(runtime: ControllerRuntime) -> tuple[str, str]:
    (key,) = runtime.cache["LeaderWorkerSet"].owners()
    return key


def changed(obj: dict[str, Any], version: int, **metadata: Any) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(version), **metadata}}


async def take_pass(runtime: ControllerRuntime) -> None:
    """A worker takes the queued key and finishes with it (the pass itself is not run)."""
    key = await runtime.queue.get()
    runtime.queue.done(key)


def woken(runtime: ControllerRuntime) -> bool:
    return bool(len(runtime.queue) or runtime.queue.coalescing())


async def delete_set(runtime: ControllerRuntime) -> None:
    key = key_of(runtime)
    lws = runtime.cache["LeaderWorkerSet"].get(*key)
    assert lws is not None
    runtime.watches._observe("LeaderWorkerSet", "DELETED", lws)
    assert woken(runtime)  # the set's own deletion: its cleanup pass
    await take_pass(runtime)


def children(runtime: ControllerRuntime, key: tuple[str, str]) -> list[tuple[str, dict[str, Any]]]:
    return [(kind, obj) for kind in ("Pod", "StatefulSet")
            for obj in runtime.cache[kind].owned_by(key)]


async def test_a_deleted_sets_terminating_and_deleted_children_wake_no_pass() -> None:
    runtime = runtime_over(manifest())
    key = key_of(runtime)
    await delete_set(runtime)
    for version, (kind, obj) in enumerate(children(runtime, key), start=10_000):
        runtime.watches._observe(kind, "MODIFIED", changed(obj, version,
                                                            deletionTimestamp=DELETED_AT))
        assert not woken(runtime), f"{kind} {obj['metadata']['name']} terminating"
    assert runtime.cache.departed(key) is not None
    for kind, obj in children(runtime, key):
        runtime.watches._observe(kind, "DELETED", obj)
        assert not woken(runtime), f"{kind} {obj['metadata']['name']} deleted"
    # Its last object gone, nothing of the set is kept.
    assert runtime.cache.departed(key) is None


async def test_a_set_being_deleted_wakes_no_pass_for_its_childrens_events_either() -> None:
    runtime = runtime_over(manifest())
    key = key_of(runtime)
    lws = runtime.cache["LeaderWorkerSet"].get(*key)
    assert lws is not None
    runtime.watches._observe("LeaderWorkerSet", "MODIFIED", changed(
        lws, 20_000, deletionTimestamp=DELETED_AT, finalizers=["foregroundDeletion"]))
    assert woken(runtime)
    await take_pass(runtime)
    (kind, obj), *_ = children(runtime, key)
    runtime.watches._observe(kind, "DELETED", obj)
    assert not woken(runtime)


async def test_a_retained_pod_of_a_deleted_set_wakes_a_pass() -> None:
    runtime = runtime_over(manifest())
    key = key_of(runtime)
    await delete_set(runtime)
    pod = runtime.cache["Pod"].owned_by(key)[0]
    runtime.watches._observe("Pod", "MODIFIED", changed(pod, 30_000,
                                                        finalizers=[CLEANUP_FINALIZER]))
    assert woken(runtime)  # its finalizer is the pass's to remove


async def test_parallel_wakes_a_pass_for_a_worker_statefulset_not_going() -> None:
    runtime = runtime_over(manifest(podTerminationPolicy="Parallel"))
    key = key_of(runtime)
    await delete_set(runtime)
    workers = [s for s in runtime.cache["StatefulSet"].owned_by(key)
               if s["metadata"]["name"] != key[1]]
    assert workers
    for version, sts in enumerate(workers, start=40_000):
        runtime.watches._observe("StatefulSet", "MODIFIED", changed(sts, version))
        assert woken(runtime)  # still to be deleted with the set
        await take_pass(runtime)
        runtime.watches._observe("StatefulSet", "MODIFIED", changed(
            sts, version + 100, deletionTimestamp=DELETED_AT))
        assert not woken(runtime)  # going
    pod = runtime.cache["Pod"].owned_by(key)[-1]
    runtime.watches._observe("Pod", "DELETED", pod)
    assert not woken(runtime)
    leader_sts = runtime.cache["StatefulSet"].get(*key)
    assert leader_sts is not None
    runtime.watches._observe("StatefulSet", "MODIFIED", changed(leader_sts, 49_000))
    assert not woken(runtime)  # the leader StatefulSet is the garbage collector's


async def test_a_live_sets_children_wake_passes_as_before() -> None:
    runtime = runtime_over(manifest())
    key = key_of(runtime)
    pod = runtime.cache["Pod"].owned_by(key)[-1]
    runtime.watches._observe("Pod", "MODIFIED", changed(pod, 50_000,
                                                        deletionTimestamp=DELETED_AT))
    assert runtime.queue.coalescing()  # joins the burst's pass
    runtime.watches._observe("Pod", "DELETED", pod)
    assert len(runtime.queue) == 1  # a deletion wakes one at once


VERSION_AFTER = "999999"  # a relisting's resourceVersion, after every cached object's


def server_answers(runtime: ControllerRuntime, monkeypatch: pytest.MonkeyPatch,
                   live: dict[str, Any] | None) -> list[str]:
    """The API server answers a GET of the set with ``live`` (None: gone); the paths asked."""
    asked: list[str] = []

    async def get(path: str) -> dict[str, Any] | None:
        asked.append(path)
        return live
    monkeypatch.setattr(runtime.watches.kube, "get", get)
    return asked


async def test_childrens_relisting_first_delivers_their_sets_deletion_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """After a gap, the StatefulSets relist before the set: the set is asked for, found gone
    and delivered deleted before its children, so no pass sees it live without them; its
    departed copy goes with its last object, whichever kind relists last."""
    runtime = runtime_over(manifest())
    key = key_of(runtime)
    asked = server_answers(runtime, monkeypatch, None)
    await runtime.watches._replace("StatefulSet", [], VERSION_AFTER)
    assert asked == [f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{key[0]}/"
                     f"leaderworkersets/{key[1]}"]
    assert runtime.cache["LeaderWorkerSet"].get(*key) is None
    assert runtime.cache.departing(key)
    assert runtime.cache.departed(key) is not None  # its pods are still cached
    await runtime.watches._replace("Pod", [], VERSION_AFTER)
    assert runtime.cache.departed(key) is None
    await runtime.watches._replace("LeaderWorkerSet", [], VERSION_AFTER)
    assert runtime.cache.departed(key) is None
    assert asked == asked[:1]  # the pods' owner was departing already: not asked again


async def test_a_set_the_server_still_has_stays_and_its_childrens_deletions_wake_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = runtime_over(manifest())
    key = key_of(runtime)
    lws = runtime.cache["LeaderWorkerSet"].get(*key)
    assert lws is not None
    server_answers(runtime, monkeypatch, lws)
    await runtime.watches._replace("StatefulSet", [], VERSION_AFTER)
    assert runtime.cache["LeaderWorkerSet"].get(*key) is lws
    assert not runtime.cache.departing(key)
    assert woken(runtime)  # its StatefulSets are to be created again


async def test_a_sets_relisting_first_then_its_childrens_forgets_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = runtime_over(manifest())
    key = key_of(runtime)
    asked = server_answers(runtime, monkeypatch, None)
    await runtime.watches._replace("LeaderWorkerSet", [], VERSION_AFTER)
    assert runtime.cache.departed(key) is not None
    await runtime.watches._replace("Pod", [], VERSION_AFTER)
    assert runtime.cache.departed(key) is not None  # its StatefulSets are still cached
    await runtime.watches._replace("StatefulSet", [], VERSION_AFTER)
    assert runtime.cache.departed(key) is None
    assert asked == []


async def test_a_set_asked_for_while_the_server_is_not_ready_is_asked_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after an API server restart, custom resources answer 503 for a while: the set's
    children wait for its answer."""
    runtime = runtime_over(manifest())
    key = key_of(runtime)
    answers: list[ApiException | None] = [ApiException(status=503), ApiException(status=429),
                                          None]

    async def get(path: str) -> dict[str, Any] | None:
        answer = answers.pop(0)
        if answer is not None:
            raise answer
        return None
    monkeypatch.setattr(runtime.watches.kube, "get", get)
    monkeypatch.setattr(watch, "CONFIRM_DELAY", 0.0)
    await runtime.watches._replace("StatefulSet", [], VERSION_AFTER)
    assert answers == []
    assert runtime.cache.departing(key)
