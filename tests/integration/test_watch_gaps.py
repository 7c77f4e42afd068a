"""Deletions the operator's watches never saw, on a real kube-apiserver (``kube.gaps``).

kube-apiserver is stopped, objects are deleted through a second API server on the same etcd
while the operator cannot reach any, etcd is compacted, and kube-apiserver comes back: every
watch of the operator answers 410 Gone and kopf lists each kind again. A listing shows only
what exists, so the cache must find what was deleted by a resync; kopf's public API does not
say that it listed again, and an empty relisting shows nothing at all. Each case:

* the only Service is deleted: that kind's relisting is empty, the StatefulSets' is not (its
  events trigger the resync of every kind); the Service must be recreated;
* the set and everything of it are deleted, so every relisting is empty (no signal at all),
  then a set of the same name is created: its ADDED event over cached leftovers triggers the
  resync, and the new set must get children of its own, not be taken to have the old ones;
* the same deletion, with a request of the operator's own failing during the outage (as a
  Lease renewal would) and one answered after it: the cache forgets the deleted set.

After each case the operator's cache holds exactly what the API server lists, kind by kind.
The module runs its own api-tier cluster: restarting the API server and compacting etcd must
not disturb the shared one.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from e2e.cluster import LocalCluster, NodeLayout
from e2e.harness.admission import options_for, start_webhooks, stop_webhooks
from e2e.harness.launcher import Controllers, start_controllers
from e2e.kube import Kube, wait_for
from lws_operator.api.constants import NAME_LABEL
from lws_operator.kube.cache import cached_key, cached_uid
from lws_operator.kube.client import KubeClient
from lws_operator.kube.gaps import REASONS

pytestmark = pytest.mark.api
REPO = Path(__file__).resolve().parents[2]
API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
NAME = "gap"
# The kinds the operator caches here (nothing of the others exists on this tier), with the
# API version to list them by.
CACHED = {"LeaderWorkerSet": API, "StatefulSet": "apps/v1", "Service": "v1", "Pod": "v1",
          "ControllerRevision": "apps/v1", "Deployment": "apps/v1"}


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[LocalCluster]:
    if os.environ.get("LWS_E2E_KUBECONFIG"):
        pytest.skip("API server restarts need a local cluster of their own")
    directory = REPO / ".cluster" / f"watch-gaps-{os.getpid()}"
    cluster = LocalCluster(directory)
    cluster.up("api", NodeLayout(), timeout=180)
    try:
        cluster.install_crd()
        yield cluster
    finally:
        cluster.down()
        shutil.rmtree(directory, ignore_errors=True)


class Env:
    def __init__(self, cluster: LocalCluster, kube: Kube, ns: str, controllers: Controllers,
                 probe: KubeClient) -> None:
        self.cluster = cluster
        self.kube = kube
        self.ns = ns
        self.controllers = controllers
        self.probe = probe  # the test's own requests, apart from the operator's

    @property
    def runtime(self) -> Any:
        return self.controllers.runtime

    def counted(self, name: str, **labels: str) -> float:
        return self.controllers.registry.get_sample_value(name, labels) or 0.0

    def relistings(self) -> float:
        return sum(self.counted("lws_operator_watch_relistings_total", kind=kind)
                   for kind in CACHED)

    def triggers(self) -> dict[str, float]:
        return {reason: self.counted("lws_operator_cache_resync_triggers_total", reason=reason)
                for reason in REASONS}

    async def outage(self, change: Any, during: Any = None) -> None:
        """kube-apiserver stopped, ``change(side)`` made through a second API server, etcd
        compacted, kube-apiserver started again; ``during()`` runs while it is down."""
        cluster = self.cluster
        async with contextlib.AsyncExitStack() as stack:
            side_config = await asyncio.to_thread(stack.enter_context, cluster.side_apiserver())
            side = await Kube.connect(str(side_config))
            stack.push_async_callback(side.close)
            await asyncio.to_thread(cluster.stop_apiserver, kill=True)
            await change(side)
            if during is not None:
                await during()
            await asyncio.to_thread(cluster.compact_etcd)
        await asyncio.to_thread(cluster.start_apiserver)
        await self.recovered()

    async def watching(self) -> Counter[str]:
        """How many watches of each resource the API server serves now (only kopf's here)."""
        text = (await self.probe.raw("GET", "/metrics")).decode()
        found: Counter[str] = Counter()
        for line in text.splitlines():
            if line.startswith("apiserver_longrunning_requests{") and 'verb="WATCH"' in line:
                resource = line.split('resource="', 1)[1].split('"', 1)[0]
                found[resource] += int(float(line.rsplit(" ", 1)[1]))
        return found

    def every_watches(self) -> list[Any]:
        """The operator's watches: the LeaderWorkerSet controller's and, when it runs, the
        DisaggregatedSet controller's, which watches LeaderWorkerSets and Services too."""
        ds = self.runtime.disaggregated
        return [self.runtime.watches, *([ds.watches] if ds is not None else [])]

    async def recovered(self) -> None:
        """Until every kopf watcher watches its kind again (so it has listed it again: a watch
        that expired is listed before it is watched anew) and no resync is pending, three
        probes in a row: a watch may expire only after a few retries while the server starts.
        Watches are counted per watcher: the DisaggregatedSet controller's kopf watches
        LeaderWorkerSets and Services as well, so one watch of a kind back proved nothing
        about the other, whose retry may come seconds later. A LeaderWorkerSet watch still
        waiting to list again then took the set the test creates next for part of its
        listing, not an ADDED event, and the resync came as ``listed``, not ``leftovers``."""
        watches = self.every_watches()
        wanted = Counter(w[3] for each in watches for w in each.watched)
        streak = 0

        async def steady() -> bool:
            nonlocal streak
            served = await self.watching()
            if all(served[plural] >= n for plural, n in wanted.items()) \
                    and not any(each.gaps.pending for each in watches):
                streak += 1
            else:
                streak = 0
            return streak >= 3
        await wait_for(steady, timeout=180, interval=0.5,
                       what="kopf watching every kind again, no resync pending")

    async def ensure_set(self) -> dict[str, Any]:
        """The set (created if a previous test left none), with its children, cached."""
        lws = await self.kube.get(API, KIND, NAME, self.ns) or await self.lws()
        await self.children(lws["metadata"]["uid"])
        await self.cache_matches_cluster()
        return lws

    async def lws(self) -> dict[str, Any]:
        body = {"apiVersion": API, "kind": KIND, "metadata": {"name": NAME}, "spec": {
            "replicas": 1, "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
                "containers": [{"name": "worker", "image": "nginx:1"}]}}}}}
        return await self.kube.create(body, self.ns)

    async def children(self, owner_uid: str) -> tuple[dict[str, Any], dict[str, Any]]:
        """The set's headless Service and leader StatefulSet, once both exist and are owned by
        the set of UID ``owner_uid``."""
        async def owned() -> tuple[dict[str, Any], dict[str, Any]] | None:
            service = await self.kube.get("v1", "Service", NAME, self.ns)
            sts = await self.kube.get("apps/v1", "StatefulSet", NAME, self.ns)
            if service is None or sts is None:
                return None
            for obj in (service, sts):
                if owner_uid not in {r["uid"] for r in obj["metadata"].get(
                        "ownerReferences") or []}:
                    return None
            return service, sts
        found = await wait_for(owned, timeout=120, what=f"the Service and StatefulSet of "
                               f"{NAME} (uid {owner_uid})")
        assert found is not None
        return found

    async def cache_matches_cluster(self) -> None:
        """The operator's cache holds, kind by kind, exactly the (name, uid) of what the API
        server lists in the namespace (the operator's label selector applied)."""
        async def compare() -> dict[str, tuple[set[tuple[str, str]], set[tuple[str, str]]]]:
            differ = {}
            for kind, api in CACHED.items():
                listed = {(o["metadata"]["name"], o["metadata"]["uid"])
                          for o in await self.kube.list(api, kind, self.ns)
                          if kind == KIND or NAME_LABEL in (o["metadata"].get("labels") or {})}
                cached = {(cached_key(o)[1], cached_uid(o))
                          for o in self.runtime.cache[kind].in_namespace(self.ns)}
                if listed != cached:
                    differ[kind] = (listed, cached)
            return differ

        async def same() -> bool:
            return not await compare()
        try:
            await wait_for(same, timeout=60, what="the cache matching the cluster")
        except AssertionError as exc:
            raise AssertionError(f"{exc}: (listed, cached) {await compare()}") from None


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env(own_cluster: LocalCluster) -> AsyncIterator[Env]:
    kubeconfig = str(own_cluster.kubeconfig)
    kube = await Kube.connect(kubeconfig)
    ns = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    hooks = await start_webhooks(kubeconfig, options_for(ns))
    controllers = await start_controllers(kubeconfig, workers=2)
    probe = await KubeClient.connect(kubeconfig)
    try:
        yield Env(own_cluster, kube, ns, controllers, probe)
    finally:
        await asyncio.to_thread(own_cluster.ensure_apiserver)
        await probe.close()
        await controllers.close()
        await stop_webhooks(hooks)
        await kube.close()


async def delete_everything(side: Kube, ns: str) -> None:
    """The set and every object of it, as the garbage collector would (this tier has none)."""
    assert await side.delete(API, KIND, NAME, ns) is not None
    for kind, api in CACHED.items():
        if kind != KIND:
            for obj in await side.list(api, kind, ns):
                if NAME_LABEL in (obj["metadata"].get("labels") or {}):
                    await side.delete(api, kind, obj["metadata"]["name"], ns)


async def test_a_service_deleted_while_watches_were_down_is_recreated(env: Env) -> None:
    """The only Service goes: the Service kind's relisting is empty."""
    lws = await env.ensure_set()
    service, _ = await env.children(lws["metadata"]["uid"])
    relisted = env.relistings()

    async def delete_service(side: Kube) -> None:
        assert await side.delete("v1", "Service", NAME, env.ns) is not None
        assert await side.list("v1", "Service", env.ns) == []
    await env.outage(delete_service)

    again, _ = await env.children(lws["metadata"]["uid"])
    assert again["metadata"]["uid"] != service["metadata"]["uid"]
    assert env.relistings() > relisted  # some kind's relisting was not empty
    assert env.counted("lws_operator_cache_resync_dropped_total", kind="Service") >= 1
    await env.cache_matches_cluster()


async def test_a_set_recreated_after_every_relisting_was_empty_gets_its_own_children(
        env: Env) -> None:
    await env.ensure_set()
    before = env.triggers()

    await env.outage(lambda side: delete_everything(side, env.ns))
    assert env.runtime.cache[KIND].get(env.ns, NAME) is not None  # nothing said it went
    assert env.triggers() == before  # every relisting was empty

    new = await env.lws()
    await env.children(new["metadata"]["uid"])
    assert env.triggers()["leftovers"] > before["leftovers"]
    await env.cache_matches_cluster()


async def test_the_cache_forgets_a_deleted_set_once_our_own_client_finds_the_server_back(
        env: Env) -> None:
    await env.ensure_set()
    before = env.triggers()
    client = env.controllers.client
    lease = f"/apis/coordination.k8s.io/v1/namespaces/{env.ns}/leases"

    async def refused() -> None:  # a Lease renewal while the server is away
        with pytest.raises(Exception):  # noqa: B017, PT011 - the client's connection error
            await client.request("GET", lease, timeout=5)
        assert client.reachability.away

    await env.outage(lambda side: delete_everything(side, env.ns), during=refused)
    assert env.runtime.cache[KIND].get(env.ns, NAME) is not None
    assert env.triggers() == before

    await client.request("GET", lease)  # the next renewal is answered
    async def forgotten() -> bool:
        return env.runtime.cache[KIND].get(env.ns, NAME) is None
    await wait_for(forgotten, timeout=60, what="the deleted set forgotten")
    assert env.triggers()["reconnected"] > before["reconnected"]
    await env.cache_matches_cluster()
