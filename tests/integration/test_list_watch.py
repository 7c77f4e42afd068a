"""The operator's own list-and-watch (``kube.list_watch``) against a real kube-apiserver: it
watches from the listing the cache was primed from (no second listing), resumes a stream the
server ends where it ended, and reads events longer than aiohttp's line limit. ConfigMaps stand
in for the cached kinds: the watch is the same for any collection. Listing again after the
watch expired (410 Gone, the whole listing then handed to the cache to replace its store) needs
a watch the server lets expire: ``test_watch_gaps.py`` does that, with every kind the operator
caches watched this way."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.cluster import LocalCluster
from e2e.kube import Kube, wait_for
from lws_operator.kube.client import KubeClient
from lws_operator.kube.list_watch import ListWatch

pytestmark = pytest.mark.api

LABEL = "lws-test/list-watch"


class Seen(list[tuple[str | None, str, str]]):
    """What a watch observed, in order: (event type, name, resourceVersion); ``last`` holds
    the last object observed of each name."""

    def __init__(self) -> None:
        super().__init__()
        self.last: dict[str, dict[str, Any]] = {}
        self.relisted: list[list[str]] = []  # the names of each relisting, whole


def config_map(name: str, namespace: str, data: str = "1") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": {LABEL: "yes"}},
            "data": {"value": data}}


@contextlib.asynccontextmanager
async def watching(cluster: LocalCluster, namespace: str, version: str | None,
                   server_timeout: int = 300) -> AsyncIterator[tuple[ListWatch, Seen]]:
    """A ListWatch of the namespace's labelled ConfigMaps, resumed from ``version`` (None:
    it lists first), running until the block ends; yields it and what it observed."""
    kube = await KubeClient.connect(str(cluster.kubeconfig))
    seen = Seen()

    def observe(kind: str, event_type: str | None, obj: dict[str, Any]) -> None:
        assert kind == "ConfigMap"
        meta = obj["metadata"]
        seen.append((event_type, meta["name"], meta["resourceVersion"]))
        seen.last[meta["name"]] = obj

    async def replace(kind: str, items: list[dict[str, Any]], version: str | None) -> None:
        seen.relisted.append([item["metadata"]["name"] for item in items])

    watch = ListWatch(kube, "ConfigMap", f"/api/v1/namespaces/{namespace}/configmaps", LABEL,
                      observe, replace, chunk_size=2, server_timeout=server_timeout)
    watch.resume(version)
    task = asyncio.create_task(watch.run())
    try:
        yield watch, seen
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await kube.close()


async def listed_version(kube: Kube, cluster: LocalCluster, namespace: str) -> str:
    client = await KubeClient.connect(str(cluster.kubeconfig))
    try:
        listing = await client.request("GET", f"/api/v1/namespaces/{namespace}/configmaps",
                                       query={"labelSelector": LABEL})
    finally:
        await client.close()
    return str(listing["metadata"]["resourceVersion"])


async def test_a_watch_resumed_from_the_priming_listing_sees_every_change_and_lists_nothing(
        kube: Kube, lws_crd: LocalCluster, namespace: str) -> None:
    await kube.create(config_map("a", namespace), namespace)
    version = await listed_version(kube, lws_crd, namespace)
    async with watching(lws_crd, namespace, version) as (watch, seen):
        await wait_for(lambda: _true(watch.watching.is_set()), what="the watch open")
        b = await kube.create(config_map("b", namespace), namespace)
        a = await kube.patch("v1", "ConfigMap", "a", {"data": {"value": "2"}}, namespace)
        await kube.delete("v1", "ConfigMap", "b", namespace)
        await wait_for(lambda: _true(len(seen) >= 3), what="three events")
        assert [(t, n) for t, n, _ in seen] == [("ADDED", "b"), ("MODIFIED", "a"),
                                               ("DELETED", "b")]
        assert seen[0][2] == b["metadata"]["resourceVersion"]
        assert seen[1][2] == a["metadata"]["resourceVersion"]
        assert watch.lists == 0


async def test_a_stream_the_server_ends_is_resumed_where_it_ended(
        kube: Kube, lws_crd: LocalCluster, namespace: str) -> None:
    version = await listed_version(kube, lws_crd, namespace)
    async with watching(lws_crd, namespace, version, server_timeout=1) as (watch, seen):
        for i in range(4):  # across several streams of a second each
            await kube.create(config_map(f"c{i}", namespace), namespace)
            await asyncio.sleep(0.7)
        await wait_for(lambda: _true(len(seen) >= 4), what="four events")
        await asyncio.sleep(1.5)  # one more stream: nothing is delivered twice
        assert [(t, n) for t, n, _ in seen] == [("ADDED", f"c{i}") for i in range(4)]
        assert watch.lists == 0


async def test_an_event_longer_than_aiohttps_line_limit_is_read_whole(
        kube: Kube, lws_crd: LocalCluster, namespace: str) -> None:
    version = await listed_version(kube, lws_crd, namespace)
    big = "x" * 300_000  # a watch event of about 300 KB; aiohttp's readline stops at 128 KiB
    async with watching(lws_crd, namespace, version) as (watch, seen):
        await wait_for(lambda: _true(watch.watching.is_set()), what="the watch open")
        await kube.create(config_map("big", namespace, big), namespace)
        await kube.create(config_map("small", namespace), namespace)
        await wait_for(lambda: _true(len(seen) >= 2), what="both events")
        assert [(t, n) for t, n, _ in seen] == [("ADDED", "big"), ("ADDED", "small")]
        assert seen.last["big"]["data"]["value"] == big
        assert seen.relisted == []


async def _true(value: bool) -> bool:
    return value
