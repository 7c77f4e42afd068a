"""Unmutated pods recreated once the operator's pod webhook serves them, on the full tier.

A LeaderWorkerSet stored while the pod webhook does not serve its namespace gets its leader
pods unmutated (``PodsNotMutated``). Once the webhook serves the namespace, the operator
deletes those pods, one group at a time, so the leader StatefulSet recreates them through the
webhook; the set becomes Ready, with a ``RecreatingUnmutatedPods`` Event per group. A set in a
namespace the webhook never serves keeps its pods: nothing is deleted.

The controllers and the webhooks run in this process, the webhooks registered by URL, confined
to the first namespace and started only after both sets reported their pods unmutated; the
controllers learn of the webhook as ``lws-operator run`` wires them
(``WebhookRuntime.add_pod_webhook_listener``, ``follow_pod_webhook``).
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from typing import Any

import pytest

from e2e.cluster import LocalCluster
from e2e.harness.admission import is_mutated, options_for, start_webhooks, stop_webhooks
from e2e.harness.clusters import Clusters
from e2e.harness.launcher import start_controllers
from e2e.kube import Kube, condition, is_ready, wait_for
from lws_operator.api.defaults import apply_defaults
from lws_operator.logic.mutation.recreation import SETTLE

pytestmark = pytest.mark.full

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"


def sample(name: str, replicas: int = 2, size: int = 2) -> dict[str, Any]:
    # As the defaulting webhook would have stored it: it does not serve the namespace yet.
    return apply_defaults({
        "apiVersion": API, "kind": KIND, "metadata": {"name": name},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size, "workerTemplate": {
            "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]}}}},
    })


async def pods_of(kube: Kube, name: str, ns: str) -> list[dict[str, Any]]:
    return [p for p in await kube.list("v1", "Pod", ns, label_selector=f"{P}name={name}")
            if not p["metadata"].get("deletionTimestamp")]


async def not_mutated(kube: Kube, name: str, ns: str, count: int) -> dict[str, Any]:
    """Until the set reports ``count`` pods unmutated; its Progressing condition."""
    async def probe() -> dict[str, Any] | None:
        lws = await kube.get(API, KIND, name, ns)
        pods = await pods_of(kube, name, ns)
        for cond in ((lws or {}).get("status") or {}).get("conditions") or []:
            if (cond["type"] == "Progressing" and cond["reason"] == "PodsNotMutated"
                    and len(pods) == count and cond["message"].startswith(f"{count} pods")):
                return dict(cond)
        return None

    cond = await wait_for(probe, timeout=90, what=f"{ns}/{name}: PodsNotMutated")
    assert cond is not None
    return cond


async def events(kube: Kube, name: str, ns: str) -> list[tuple[str, str, str]]:
    return [(e["type"], e["reason"], e.get("note") or "")
            for e in await kube.list("events.k8s.io/v1", "Event", ns)
            if e["regarding"].get("name") == name]


async def test_unmutated_pods_are_recreated_once_the_webhook_serves(clusters: Clusters) -> None:
    cluster: LocalCluster = clusters.get("full")
    await asyncio.to_thread(cluster.install_crd)
    kube = await Kube.connect(str(cluster.kubeconfig))
    served, unserved = f"t-{uuid.uuid4().hex[:10]}", f"t-{uuid.uuid4().hex[:10]}"
    for ns in (served, unserved):
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    controllers = await start_controllers(str(cluster.kubeconfig))
    hooks = None
    follow: asyncio.Task[None] | None = None
    try:
        # Before the webhooks: both sets get their leaders unmutated.
        await kube.create(sample("early"), served)
        await kube.create(sample("left-out"), unserved)
        await not_mutated(kube, "early", served, 2)
        await not_mutated(kube, "left-out", unserved, 2)
        left_out_before = {p["metadata"]["uid"] for p in await pods_of(kube, "left-out",
                                                                      unserved)}
        early_before = {p["metadata"]["uid"] for p in await pods_of(kube, "early", served)}

        # The webhooks start, confined to the first namespace; the controllers learn of it.
        hooks = await start_webhooks(str(cluster.kubeconfig), options_for(served))
        hooks.runtime.add_pod_webhook_listener(controllers.runtime.pod_webhook_changed)
        follow = asyncio.create_task(hooks.runtime.follow_pod_webhook(hooks.stop))

        async def ready() -> list[dict[str, Any]] | None:
            lws = await kube.get(API, KIND, "early", served)
            pods = await pods_of(kube, "early", served)
            if (condition(lws, "Available") == "True" and len(pods) == 4
                    and all(is_ready(p) and is_mutated(p) for p in pods)):
                return pods
            return None

        pods = await wait_for(ready, timeout=180, what=f"{served}/early to be Ready")
        assert pods is not None
        # Recreated: the leaders are new pods, mutated, and the set says nothing more of them.
        assert not early_before & {p["metadata"]["uid"] for p in pods}
        lws = await kube.get(API, KIND, "early", served)
        assert lws is not None
        progressing = next(c for c in lws["status"]["conditions"] if c["type"] == "Progressing")
        assert progressing["reason"] != "PodsNotMutated"
        await controllers.runtime.events.flush()
        recorded = await events(kube, "early", served)
        recreating = sorted(note for _, reason, note in recorded
                            if reason == "RecreatingUnmutatedPods")
        assert len(recreating) == 2, recorded
        assert recreating[0].startswith("Deleting 1 pod of group early-0 (early-0)")
        assert recreating[1].startswith("Deleting 1 pod of group early-1 (early-1)")
        assert all("attempt 1 of 3" in note for note in recreating)
        assert not [r for r in recorded if r[1] == "UnmutatedPodsNotRecreated"]

        # The namespace the webhook never serves: long past the settle time, nothing deleted,
        # no Event of a recreation, the condition as before.
        await asyncio.sleep(SETTLE + 2)
        controllers.runtime.queue.add((unserved, "left-out"))
        await asyncio.sleep(2)
        after = await kube.list("v1", "Pod", unserved, label_selector=f"{P}name=left-out")
        assert {p["metadata"]["uid"] for p in after} == left_out_before
        assert not [p for p in after if p["metadata"].get("deletionTimestamp")]
        await controllers.runtime.events.flush()
        reasons = [reason for _, reason, _ in await events(kube, "left-out", unserved)]
        assert reasons.count("PodsNotMutated") == 1
        assert not {"RecreatingUnmutatedPods", "UnmutatedPodsNotRecreated"} & set(reasons)
        cond = await not_mutated(kube, "left-out", unserved, 2)
        assert f"does not serve namespace {unserved}" in cond["message"]
    finally:
        for ns, name in ((served, "early"), (unserved, "left-out")):
            with contextlib.suppress(Exception):
                await kube.delete(API, KIND, name, ns)
        await controllers.close()
        if hooks is not None:
            await stop_webhooks(hooks)
        if follow is not None:
            await asyncio.wait_for(follow, 10)
        for ns in (served, unserved):
            await kube.delete("v1", "Namespace", ns)
        await kube.close()
