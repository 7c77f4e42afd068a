"""Deletions in a watch gap, on the full tier: each is delivered by a relisting and acted on.

kube-apiserver is stopped, so the operator's watches break; while it is down, a worker
StatefulSet, the headless Service and the ControllerRevision of one set are deleted, and a
second set is deleted whole, through another kube-apiserver on the same etcd; etcd is compacted
past every watch's resourceVersion and kube-apiserver started again. Every watch of the operator
resumes from a resourceVersion that no longer exists (410 Gone), lists its kind again, and the
relisting replaces the cache (``kube.watch._replace``): what it lacks is delivered as a
deletion. Then:

* the worker StatefulSet, the Service and the ControllerRevision are recreated (new UIDs), and
  nothing else of the set is touched: every other object keeps its UID (the deleted worker
  StatefulSet's pods, which the garbage collector removes with it, aside);
* nothing of the deleted set stays in the operator's caches (objects, tombstones, its departed
  copy) or in its metrics.

The module runs its own full-tier cluster: an API server restarted over a compacted etcd leaves
marks that later modules of a shared cluster tripped over (``test_apiserver_faults.py``).
kube-controller-manager's garbage collector can stall after such a restart (an owner deleted
while its watches were down); once convergence stalls with orphans present, it is restarted, as
``test_apiserver_faults.py`` does, and that is printed. ``make test`` runs this module.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio

from e2e.cluster import LocalCluster, NodeLayout
from e2e.harness.apiserver_faults import (
    API,
    KIND,
    NAME_LABEL,
    WATCHED_KINDS,
    Desired,
    assert_at_rest,
    converge,
    lws,
    orphans,
    tolerant,
)
from e2e.harness.clusters import Clusters, private_cluster
from e2e.harness.launcher import Operator, running_operator
from e2e.kube import Kube, wait_for

pytestmark = pytest.mark.full
IMAGE = "engine:v1"
KEPT, GONE = "w", "d"
STALL = 60.0  # a liveness deadline before kube-controller-manager is restarted
CONVERGE = 180.0  # a liveness deadline, not a measurement


@pytest.fixture(scope="module")
def own_cluster(clusters: Clusters) -> Iterator[LocalCluster]:
    if clusters.external:
        pytest.skip("API server restarts need a local cluster of their own")
    with private_cluster("chaos-watch-gaps", "full", NodeLayout(gpu_nodes=4, tpu_nodes=0),
                         timeout=240, crd=True) as cluster:
        yield cluster


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def op(own_cluster: LocalCluster) -> AsyncIterator[Operator]:
    try:
        async with running_operator(own_cluster) as operator:
            yield operator
    finally:
        await asyncio.to_thread(own_cluster.ensure_apiserver)


async def uids(kube: Kube, namespace: str) -> dict[tuple[str, str], str]:
    """(kind, name) -> UID of every object of the namespace the operator owns or writes."""
    return {(kind, o["metadata"]["name"]): o["metadata"]["uid"]
            for api_version, kind in WATCHED_KINDS
            for o in await kube.list(api_version, kind, namespace)}


async def converge_or_restart_kcm(op: Operator, want: Desired, what: str) -> None:
    try:
        await converge(op.kube, op.namespace, want, STALL, what)
        return
    except AssertionError:
        found = await tolerant(lambda: orphans(op.kube, op.namespace))
        if not found:  # slow, not stalled (a loaded machine): the liveness deadline goes on
            await converge(op.kube, op.namespace, want, CONVERGE, what)
            return
    print(f"[watch-gaps] {what}: garbage collection stalled on {found}: restarting "
          "kube-controller-manager")
    await asyncio.to_thread(op.cluster.restart_component, "kube-controller-manager")
    await converge(op.kube, op.namespace, want, CONVERGE, what)


def leftovers(op: Operator, name: str) -> list[str]:
    """What the operator still holds of the set ``name``: cached objects, tombstones, its
    departed copy, metric samples."""
    owner = (op.namespace, name)
    cache = op.runtime.cache
    found = [f"{kind} {o['metadata']['name']}" for kind, store in cache.stores.items()
             for o in store.owned_by(owner)]
    if cache.tombstones(owner):
        found.append(f"{len(cache.tombstones(owner))} tombstones")
    if cache.departed(owner) is not None:
        found.append("its departed copy")
    found += [f"{sample.name}{sample.labels}" for family in op.registry.collect()
              for sample in family.samples
              if sample.labels.get("namespace") == op.namespace
              and sample.labels.get("name") == name]
    return found


async def test_deletions_in_a_watch_gap_are_recreated_and_nothing_else_is_touched(
        op: Operator) -> None:
    kube, ns, cluster = op.kube, op.namespace, op.cluster
    for name in (KEPT, GONE):
        await kube.create(lws(name, 2, IMAGE), ns)
    await converge_or_restart_kcm(op, Desired({KEPT: (2, IMAGE), GONE: (2, IMAGE)}), "initial")
    assert leftovers(op, GONE)  # the check below sees what a set leaves
    revisions = await lws_revisions(kube, ns)
    assert len(revisions) == 1
    deleted = {("StatefulSet", f"{KEPT}-1"), ("Service", KEPT),
               ("ControllerRevision", revisions[0])}
    before = await uids(kube, ns)
    relistings = sum(v for _, v in _samples(op, "lws_operator_watch_relistings_total"))

    async with contextlib.AsyncExitStack() as stack:
        side_config = await asyncio.to_thread(stack.enter_context, cluster.side_apiserver())
        side = await Kube.connect(str(side_config))
        stack.push_async_callback(side.close)
        await asyncio.to_thread(cluster.stop_apiserver, kill=True)
        assert await side.delete("apps/v1", "StatefulSet", f"{KEPT}-1", ns) is not None
        assert await side.delete("v1", "Service", KEPT, ns) is not None
        assert await side.delete("apps/v1", "ControllerRevision", revisions[0], ns) is not None
        assert await side.delete(API, KIND, GONE, ns) is not None
        await asyncio.to_thread(cluster.compact_etcd)
    await asyncio.to_thread(cluster.start_apiserver)
    back = time.monotonic()

    recreated: dict[tuple[str, str], float] = {}
    while len(recreated) < len(deleted) and time.monotonic() - back < CONVERGE:
        now = await tolerant(lambda: current(kube, ns, revisions[0]))
        for kind, name in deleted - set(recreated):
            if now is not None and now.get((kind, name), before[(kind, name)]) \
                    != before[(kind, name)]:
                recreated[(kind, name)] = time.monotonic() - back
        await asyncio.sleep(0.1)
    print("\n[watch-gaps] recreated after kube-apiserver answered again: "
          + ", ".join(f"{kind} {name} {took:.2f}s" for (kind, name), took in
                      sorted(recreated.items(), key=lambda item: item[1])))
    assert set(recreated) == deleted, f"not recreated: {deleted - set(recreated)}"

    await converge_or_restart_kcm(op, Desired({KEPT: (2, IMAGE)}, gone={GONE}), "after the gap")
    assert sum(v for _, v in _samples(op, "lws_operator_watch_relistings_total")) > relistings
    by_kind = dict((labels["kind"], value) for labels, value in _samples(
        op, "lws_operator_watch_relisting_deletions_total"))
    print(f"[watch-gaps] deletions delivered by relistings: {by_kind}")
    for kind in ("StatefulSet", "Service", "ControllerRevision", "LeaderWorkerSet"):
        assert by_kind.get(kind, 0) >= 1, kind

    after = await uids(kube, ns)
    # Owned by the deleted worker StatefulSet, so removed with it: its pod and its revision.
    replaced_workers = {key for key in before
                        if key[0] in ("Pod", "ControllerRevision")
                        and key[1].startswith(f"{KEPT}-1-")}
    kept = {key: uid for key, uid in before.items()
            if key[1] == KEPT or key[1].startswith(f"{KEPT}-")}
    touched = {key for key, uid in kept.items()
               if key not in deleted | replaced_workers and after.get(key) != uid}
    assert not touched, f"recreated or gone besides what was deleted: {sorted(touched)}"

    await wait_for(lambda: _true(not leftovers(op, GONE)), timeout=60,
                   what=f"nothing of {GONE} left in the caches or metrics")


async def current(kube: Kube, namespace: str, revision: str) -> dict[tuple[str, str], str]:
    """``uids``, with the kept set's ControllerRevision under the name ``revision`` of the
    deleted one (a recreated revision may take another name).

    Two listings, and the operator may create the revision between them. The revisions are
    listed first: one created in between is only in the second listing, and is counted on
    the next poll."""
    names = await lws_revisions(kube, namespace)
    found = await uids(kube, namespace)
    revisions = [found[key] for name in names if (key := ("ControllerRevision", name)) in found]
    return {**found, **({("ControllerRevision", revision): revisions[0]} if revisions else {})}


async def lws_revisions(kube: Kube, namespace: str) -> list[str]:
    """The names of the kept set's own ControllerRevisions (its StatefulSets' carry its name
    label too)."""
    return [r["metadata"]["name"] for r in await kube.list(
                "apps/v1", "ControllerRevision", namespace,
                label_selector=f"{NAME_LABEL}={KEPT}")
            if any(ref.get("kind") == KIND for ref in r["metadata"].get("ownerReferences") or [])]


async def _true(value: bool) -> bool:
    return value


def _samples(op: Operator, name: str) -> list[tuple[dict[str, str], float]]:
    return [(sample.labels, sample.value) for family in op.registry.collect()
            for sample in family.samples if sample.name == name]


async def test_the_namespace_is_at_rest_after_the_gap(op: Operator) -> None:
    """After the gap the operator converged without churn: nothing changes any more."""
    assert await assert_at_rest(op.kube, op.namespace, 5.0, "after the gap") > 0
