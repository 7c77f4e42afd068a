"""A deferred status write through the controller's real pass (``LeaderWorkerSetReconciler``,
runner and executor): the pass that defers makes no request and asks to be looked at again
when the write is due; the pass then writes the counters of that moment; a set deleted
meanwhile leaves nothing pending and its due pass writes nothing (logic.status.pacing)."""

from __future__ import annotations

from typing import Any

from lws_operator.controllers.leaderworkerset import (
    UNDER_WAY_RECOUNT,
    WATCH_GAP_REQUEUE,
    LeaderWorkerSetReconciler,
)
from lws_operator.logic.reconcile.snapshot import Memory
from lws_operator.logic.status.pacing import BUDGET_RATE, BUSIEST_LONGEST, LONGEST, longest
from tests.harness.lws_world import CLOCK, NOW, World, at_rest, built_world, manifest


class Recording:
    """A client that answers every request with nothing (the cache keeps what it held) and
    records it as ``METHOD path``, with the body."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, Any]] = []

    async def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        self.requests.append((f"{method} {path}", kwargs.get("body")))
        return {}


class NoEvents:
    def record(self, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("no Event is expected")


def _not_ready(pod: dict[str, Any]) -> None:
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "False"


def _setup() -> tuple[World, Recording, LeaderWorkerSetReconciler, list[float]]:
    """Two groups, group 1 not ready (the status says so), then group 0 turns not ready too:
    only ``readyReplicas`` changes (1 -> 0, still Progressing)."""
    world = at_rest(built_world(manifest(), states={"1/0": _not_ready}))
    pod = world.cache["Pod"].get("ns", "sample-0")
    assert pod is not None
    pod = {**pod, "metadata": {**pod["metadata"], "resourceVersion": "900"},
           "status": {**pod["status"], "conditions": [dict(c) for c in
                                                      pod["status"]["conditions"]]}}
    _not_ready(pod)
    world.cache["Pod"].upsert(pod)
    kube, clock = Recording(), [CLOCK]
    reconciler = LeaderWorkerSetReconciler(kube, world.cache, NoEvents(),  # type: ignore[arg-type]
                                           now=lambda: NOW, clock=lambda: clock[0])
    return world, kube, reconciler, clock


async def test_the_deferring_pass_requeues_at_the_due_time_and_that_pass_writes() -> None:
    world, kube, reconciler, clock = _setup()
    assert await reconciler.reconcile(world.key) == LONGEST
    assert kube.requests == []
    assert reconciler.memory[world.key].status_deferral is not None
    clock[0] += LONGEST
    assert await reconciler.reconcile(world.key) is None
    ((request, body),) = kube.requests
    assert request == "PATCH /apis/leaderworkerset.x-k8s.io/v1/namespaces/ns/leaderworkersets/" \
                      "sample/status"
    assert body["status"]["readyReplicas"] == 0
    assert reconciler.memory.get(world.key, Memory()) == Memory()


async def test_a_set_deleted_while_a_write_waits_leaves_nothing_pending() -> None:
    world, kube, reconciler, clock = _setup()
    assert await reconciler.reconcile(world.key) == LONGEST
    lws = world.cache["LeaderWorkerSet"].get(*world.key)
    assert lws is not None
    world.cache["LeaderWorkerSet"].delete(lws)
    clock[0] += LONGEST
    await reconciler.reconcile(world.key)  # the due pass
    assert world.key not in reconciler.memory
    assert kube.requests == []


async def test_a_set_being_deleted_while_a_write_waits_gets_no_status_write() -> None:
    """Foreground deletion (or another's finalizer) keeps the set cached with its
    deletionTimestamp: its due pass only cleans up, and writes no status."""
    world, kube, reconciler, clock = _setup()
    assert await reconciler.reconcile(world.key) == LONGEST
    lws = world.cache["LeaderWorkerSet"].get(*world.key)
    assert lws is not None
    world.cache["LeaderWorkerSet"].upsert({**lws, "metadata": {
        **lws["metadata"], "resourceVersion": "9999",
        "deletionTimestamp": "2026-01-01T00:10:05Z", "finalizers": ["foregroundDeletion"]}})
    clock[0] += LONGEST
    await reconciler.reconcile(world.key)  # the due pass
    assert world.key not in reconciler.memory
    assert kube.requests == []


async def test_no_pass_decides_while_the_watch_of_pods_or_statefulsets_is_not_open() -> None:
    """After a watch gap the cache of one kind may lag another's (``reconcile``): the pass
    waits, writing nothing, and runs once the watches are open again."""
    world, kube, reconciler, _clock = _setup()
    reconciler.caches_current = lambda: False
    assert await reconciler.reconcile(world.key) == WATCH_GAP_REQUEUE
    assert kube.requests == []
    reconciler.caches_current = lambda: True
    assert await reconciler.reconcile(world.key) == LONGEST


def _more_sets(world: World, count: int, *, under_way: bool) -> None:
    """``count`` more sets in the cache, their stored status a create under way
    (``Progressing``) or at rest (``Available``)."""
    lws = world.cache["LeaderWorkerSet"].get(*world.key)
    assert lws is not None
    condition = "Progressing" if under_way else "Available"
    for n in range(count):
        name = f"other-{condition.lower()}-{n}"
        world.cache["LeaderWorkerSet"].upsert({
            **lws, "metadata": {**lws["metadata"], "name": name, "uid": f"uid-{name}"},
            "status": {"conditions": [{"type": condition, "status": "True"}]}})


async def test_many_sets_under_way_share_a_budget_of_counters_writes() -> None:
    """The deferring pass's wait stretches with the sets under way, the set itself included
    (``pacing.longest``); sets at rest do not count; the count is taken again once
    ``UNDER_WAY_RECOUNT`` has passed, not on every pass."""
    world, kube, reconciler, clock = _setup()
    _more_sets(world, 59, under_way=True)
    _more_sets(world, 200, under_way=False)
    assert await reconciler.reconcile(world.key) == longest(60) == 60 / BUDGET_RATE
    assert kube.requests == []
    _more_sets(world, 500, under_way=True)  # not counted yet: the count is under a second old
    clock[0] += UNDER_WAY_RECOUNT / 2
    assert await reconciler.reconcile(world.key) == 60 / BUDGET_RATE - UNDER_WAY_RECOUNT / 2
    clock[0] += UNDER_WAY_RECOUNT
    assert await reconciler.reconcile(world.key) == BUSIEST_LONGEST - 1.5 * UNDER_WAY_RECOUNT
    clock[0] += BUSIEST_LONGEST
    assert await reconciler.reconcile(world.key) is None
    ((request, _body),) = kube.requests
    assert request.endswith("/leaderworkersets/sample/status")
