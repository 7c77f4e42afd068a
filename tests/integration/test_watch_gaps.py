"""Deletions the operator's watches never saw, on a real kube-apiserver: a relisting replaces
the cache (``kube.watch._replace``, ``logic.runtime.relisting``).

The module runs its own api-tier cluster, whose kube-apiserver serves Services without a watch
cache (``--watch-cache-sizes=services#0``): a Service watch is then served by etcd itself, and
expires as soon as etcd is compacted past its resourceVersion, while the watches of every other
kind resume from the API server's watch cache. Each case:

* a single kind's watch expires alone, with an empty relisting: the operator is cut off from
  the API server (a proxy between them drops every connection and refuses new ones), the only
  Service is deleted, etcd is compacted, the operator reconnects. Only the Service watch
  expires; its relisting is empty, which no signal would have shown; the Service must be
  delivered as a deletion and recreated;
* everything of a set is deleted while kube-apiserver is down (through a second API server on
  the same etcd), etcd is compacted and kube-apiserver restarted: every watch expires and every
  relisting is empty; nothing of the set stays in the caches or the group metrics, and a set
  of the same name created next gets children of its own.

After each case the operator's cache holds exactly what the API server lists, kind by kind.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

import pytest
import pytest_asyncio

from e2e.cluster import LocalCluster
from e2e.cluster.launcher import free_port
from e2e.harness.admission import options_for, start_webhooks, stop_webhooks
from e2e.harness.clusters import private_cluster
from e2e.harness.launcher import Controllers, start_controllers
from e2e.kube import Kube, wait_for
from lws_operator.api.constants import NAME_LABEL
from lws_operator.kube.cache import cached_key, cached_uid

pytestmark = pytest.mark.api
API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
NAME = "gap"
# The kinds the operator caches here (nothing of the others exists on this tier), with the
# API version to list them by.
CACHED = {"LeaderWorkerSet": API, "StatefulSet": "apps/v1", "Service": "v1", "Pod": "v1",
          "ControllerRevision": "apps/v1", "Deployment": "apps/v1"}


class Cut:
    """A TCP proxy in front of kube-apiserver that can cut its clients off: every connection
    dropped, new ones refused, the API server itself untouched (its watch caches go on)."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream = upstream_port
        self.port = free_port()
        self.server: asyncio.Server | None = None
        self.writers: set[asyncio.StreamWriter] = set()

    async def open(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", self.port)

    async def close(self) -> None:
        """Drop every connection and refuse new ones."""
        if self.server is not None:
            self.server.close()
            self.server = None
        for writer in list(self.writers):
            writer.transport.abort()
        self.writers.clear()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream)
        except OSError:
            writer.transport.abort()
            return
        self.writers.update((writer, up_writer))

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError, asyncio.CancelledError):
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            dst.transport.abort()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))
        self.writers.difference_update((writer, up_writer))


@pytest.fixture(scope="module")
def own_cluster() -> Iterator[LocalCluster]:
    if os.environ.get("LWS_E2E_KUBECONFIG"):
        pytest.skip("API server restarts need a local cluster of their own")
    with private_cluster("watch-gaps", "api", apiserver_flags=["--watch-cache-sizes=services#0"],
                         crd=True) as cluster:
        yield cluster


class Env:
    def __init__(self, cluster: LocalCluster, kube: Kube, ns: str, controllers: Controllers,
                 cut: Cut) -> None:
        self.cluster = cluster
        self.kube = kube
        self.ns = ns
        self.controllers = controllers
        self.cut = cut

    @property
    def runtime(self) -> Any:
        return self.controllers.runtime

    def counted(self, name: str, **labels: str) -> float:
        return self.controllers.registry.get_sample_value(name, labels) or 0.0

    def relistings(self) -> dict[str, float]:
        return {kind: self.counted("lws_operator_watch_relistings_total", kind=kind)
                for kind in CACHED}

    def deletions(self, kind: str) -> float:
        return self.counted("lws_operator_watch_relisting_deletions_total", kind=kind)

    async def watching(self) -> None:
        """Until every watch of the operator is open again."""
        async def open_() -> bool:
            return all(w.watching.is_set() for w in self.runtime.watches.own.values())
        await wait_for(open_, timeout=120, interval=0.2, what="every watch open again")

    async def apiserver_outage(self, change: Callable[[Kube], Awaitable[None]]) -> None:
        """kube-apiserver stopped, ``change(side)`` made through a second API server, etcd
        compacted, kube-apiserver started again."""
        cluster = self.cluster
        async with contextlib.AsyncExitStack() as stack:
            side_config = await asyncio.to_thread(stack.enter_context, cluster.side_apiserver())
            side = await Kube.connect(str(side_config))
            stack.push_async_callback(side.close)
            await asyncio.to_thread(cluster.stop_apiserver, kill=True)
            await change(side)
            await asyncio.to_thread(cluster.compact_etcd)
        await asyncio.to_thread(cluster.start_apiserver)

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
        try:
            found = await wait_for(owned, timeout=120, what=f"the Service and StatefulSet of "
                                   f"{NAME} (uid {owner_uid})")
        except AssertionError as exc:
            owners = {}
            for api, kind in (("v1", "Service"), ("apps/v1", "StatefulSet")):
                obj = await self.kube.get(api, kind, NAME, self.ns)
                owners[kind] = None if obj is None else [
                    r["uid"] for r in obj["metadata"].get("ownerReferences") or []]
            raise AssertionError(f"{exc}; owners of what is there: {owners}") from None
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

    def metric_samples_of(self, name: str) -> list[str]:
        """Every sample of the operator's registry labelled with the set ``name`` here."""
        return [f"{sample.name}{sample.labels}"
                for family in self.controllers.registry.collect()
                for sample in family.samples
                if sample.labels.get("namespace") == self.ns
                and sample.labels.get("name") == name]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def env(own_cluster: LocalCluster, tmp_path_factory: pytest.TempPathFactory
              ) -> AsyncIterator[Env]:
    kubeconfig = str(own_cluster.kubeconfig)
    state = own_cluster.state()
    assert state is not None
    cut = Cut(state.ports["apiserver"])
    await cut.open()
    proxied = tmp_path_factory.mktemp("watch-gaps") / "kubeconfig"
    proxied.write_text(own_cluster.kubeconfig.read_text().replace(
        f"127.0.0.1:{state.ports['apiserver']}", f"127.0.0.1:{cut.port}"))
    kube = await Kube.connect(kubeconfig)
    ns = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    hooks = await start_webhooks(kubeconfig, options_for(ns))
    controllers = await start_controllers(str(proxied), workers=2)
    try:
        yield Env(own_cluster, kube, ns, controllers, cut)
    finally:
        await asyncio.to_thread(own_cluster.ensure_apiserver)
        if cut.server is None:
            await cut.open()
        await controllers.close()
        await cut.close()
        await stop_webhooks(hooks)
        await kube.close()


async def test_a_watch_expiring_alone_with_an_empty_relisting_delivers_the_deletion(
        env: Env) -> None:
    lws = await env.ensure_set()
    service, _ = await env.children(lws["metadata"]["uid"])
    await env.watching()
    relisted = env.relistings()
    deleted = env.deletions("Service")

    await env.cut.close()  # the operator cannot reach the API server
    assert await env.kube.delete("v1", "Service", NAME, env.ns) is not None
    assert await env.kube.list("v1", "Service", env.ns) == []
    await asyncio.to_thread(env.cluster.compact_etcd)
    await env.cut.open()

    again, _ = await env.children(lws["metadata"]["uid"])
    assert again["metadata"]["uid"] != service["metadata"]["uid"]
    assert env.deletions("Service") == deleted + 1
    now = env.relistings()
    # Every Service watch expired (the DisaggregatedSet controller's watches Services too).
    assert now["Service"] > relisted["Service"]
    others = {kind: now[kind] - relisted[kind] for kind in CACHED if kind != "Service"}
    assert not any(others.values()), f"other watches expired too: {others}"
    await env.cache_matches_cluster()


async def delete_everything(side: Kube, ns: str) -> None:
    """The set and every object of it, as the garbage collector would (this tier has none)."""
    assert await side.delete(API, KIND, NAME, ns) is not None
    for kind, api in CACHED.items():
        if kind != KIND:
            for obj in await side.list(api, kind, ns):
                if NAME_LABEL in (obj["metadata"].get("labels") or {}):
                    await side.delete(api, kind, obj["metadata"]["name"], ns)


async def test_a_set_deleted_with_everything_while_the_server_was_down_leaves_nothing(
        env: Env) -> None:
    await env.ensure_set()
    assert env.metric_samples_of(NAME)  # its group metrics, before

    await env.apiserver_outage(lambda side: delete_everything(side, env.ns))

    async def forgotten() -> bool:
        return env.runtime.cache[KIND].get(env.ns, NAME) is None
    await wait_for(forgotten, timeout=120, what="the deleted set forgotten")
    await env.cache_matches_cluster()
    assert env.deletions(KIND) >= 1

    def left() -> list[str]:
        cache = env.runtime.cache
        return [*env.metric_samples_of(NAME),
                *(["tombstones"] if cache.tombstones((env.ns, NAME)) else []),
                *(["departed copy"] if cache.departed((env.ns, NAME)) is not None else [])]

    async def nothing_left() -> bool:
        return not left()
    try:
        await wait_for(nothing_left, timeout=30,
                       what="the deleted set's metrics, tombstones and departed copy gone")
    except AssertionError:
        raise AssertionError(f"left of the deleted set: {left()}") from None

    new = await env.lws()  # a namesake gets children of its own
    await env.children(new["metadata"]["uid"])
    await env.cache_matches_cluster()
