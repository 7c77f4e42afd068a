"""A LeaderWorkerSet with a kept revision history handed to the upstream Go controller and back
restarts nothing (``logic.identity.history``; docs/migrating.md).

Our controllers roll a set through three templates, so it keeps three revisions (numbered, with
their change causes, recorded fully Ready). Then they stop and the upstream manager (the real
binary, ``e2e.harness.upstream``) runs the set: it deletes the revisions beyond its two and must
touch no pod and no StatefulSet. Then it stops and our controllers take the set over again: they
must not mind the missing revisions, touch no pod either, and keep the current revision recorded.
"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest

from e2e.harness.admission import options_for, start_webhooks, stop_webhooks
from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.clusters import Clusters
from e2e.harness.disaggregated import install_crds
from e2e.harness.launcher import Controllers, start_controllers
from e2e.harness.upstream import UpstreamController, binary, source_dir
from e2e.kube import MERGE_PATCH, Kube, is_ready, polling, wait_for
from lws_operator.api.constants import CHANGE_CAUSE_ANNOTATION, FULLY_READY_ANNOTATION

pytestmark = pytest.mark.full

NAME = "handed"
REPLICAS, SIZE = 2, 2


async def revisions(kube: Kube, ns: str) -> list[dict[str, Any]]:
    """The set's own ControllerRevisions (not its StatefulSets'), by number."""
    found = await kube.list("apps/v1", "ControllerRevision", ns,
                            label_selector=f"{P}name={NAME}")
    return sorted((r for r in found if not r["metadata"].get("deletionTimestamp")
                   and r["metadata"]["ownerReferences"][0]["kind"] == KIND),
                  key=lambda r: r["revision"])


async def observed(kube: Kube, ns: str) -> dict[str, Any]:
    """What a restart would change: pod UIDs, StatefulSet templates and keys."""
    pods = [p for p in await kube.list("v1", "Pod", ns, label_selector=f"{P}name={NAME}")
            if not p["metadata"].get("deletionTimestamp")]
    sets = await kube.list("apps/v1", "StatefulSet", ns, label_selector=f"{P}name={NAME}")
    return {"pods": sorted((p["metadata"]["name"], p["metadata"]["uid"]) for p in pods),
            "statefulsets": {s["metadata"]["name"]: (
                s["metadata"]["labels"].get(P + "template-revision-hash"), s["spec"]["template"])
                for s in sets}}


async def rolled_out(kube: Kube, ns: str, image: str, count: int) -> None:
    """Every pod Ready on ``image``, ``count`` revisions, the last recorded fully Ready."""

    async def done() -> bool:
        pods = [p for p in await kube.list("v1", "Pod", ns, label_selector=f"{P}name={NAME}")
                if not p["metadata"].get("deletionTimestamp")]
        kept = await revisions(kube, ns)
        return (len(pods) == REPLICAS * SIZE and all(is_ready(p) for p in pods)
                and {c["image"] for p in pods for c in p["spec"]["containers"]} == {image}
                and len(kept) == count
                and FULLY_READY_ANNOTATION in (kept[-1]["metadata"].get("annotations") or {}))

    await wait_for(done, timeout=120, what=f"{NAME} rolled out on {image}")


async def settle(controllers: Controllers) -> None:
    runtime = controllers.runtime

    async def idle() -> bool:
        return runtime.cache.synced and len(runtime.queue) == 0 and not runtime.queue.processing()

    await wait_for(idle, timeout=60, what="the operator's passes to settle")


async def test_a_set_with_history_handed_to_upstream_and_back_restarts_nothing(
        clusters: Clusters, tmp_path: Path) -> None:
    source = source_dir()
    if source is None:
        pytest.skip("the upstream controller's binary is not here (set LWS_UPSTREAM_DIR)")
    manager = await asyncio.to_thread(binary, source)
    cluster = clusters.get("full")
    await asyncio.to_thread(install_crds, cluster)
    kubeconfig = str(cluster.kubeconfig)
    kube = await Kube.connect(kubeconfig)
    ns = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    hooks = await start_webhooks(kubeconfig, options_for(ns))
    ours = await start_controllers(kubeconfig, workers=2)
    upstream = UpstreamController(manager, kubeconfig, tmp_path / "upstream")
    try:
        await kube.create(LeaderWorkerSet(NAME).replicas(REPLICAS).size(SIZE)
                          .image("engine:v1").annotations({CHANGE_CAUSE_ANNOTATION: "v1"})
                          .build(), ns)
        await rolled_out(kube, ns, "engine:v1", 1)
        for version in ("v2", "v3"):
            await kube.patch(API, KIND, NAME, {
                "metadata": {"annotations": {CHANGE_CAUSE_ANNOTATION: version}},
                "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [
                    {"name": "engine", "image": f"engine:{version}"}]}}}}},
                ns, content_type=MERGE_PATCH)
            await rolled_out(kube, ns, f"engine:{version}", int(version[1:]))
        await settle(ours)
        before = await observed(kube, ns)
        kept = await revisions(kube, ns)
        current = kept[-1]["metadata"]["labels"][P + "template-revision-hash"]
        await ours.close()

        # Upstream's turn: the extra revisions go, nothing else changes.
        seen: list[dict[str, Any]] = []

        async def record() -> None:
            seen.append(await observed(kube, ns))

        await upstream.start()
        async with polling(record, interval=1.0):

            async def truncated() -> bool:
                left = await revisions(kube, ns)
                return [r["metadata"]["labels"][P + "template-revision-hash"]
                        for r in left] == [current]

            await wait_for(truncated, timeout=60, what="upstream to delete the extra revisions")
            await asyncio.sleep(5)  # time for a rollout or a recreation to show
        await upstream.stop()
        assert seen
        for snapshot in seen:
            assert snapshot == before, "the upstream controller changed a pod or a StatefulSet"

        # Ours again, with one revision left: nothing changes, the history goes on from it.
        seen.clear()
        ours = await start_controllers(kubeconfig, workers=2)
        async with polling(record, interval=1.0):
            await settle(ours)
            await asyncio.sleep(5)
            await settle(ours)
        assert seen
        for snapshot in seen:
            assert snapshot == before, "taken back, the operator changed a pod or a StatefulSet"
        (left,) = await revisions(kube, ns)
        assert left["metadata"]["labels"][P + "template-revision-hash"] == current
        assert left["metadata"]["annotations"][CHANGE_CAUSE_ANNOTATION] == "v3"
        assert FULLY_READY_ANNOTATION in left["metadata"]["annotations"]
    except BaseException:
        if upstream.process is not None:
            print(upstream.log()[-20000:])
        raise
    finally:
        await upstream.stop()
        await ours.close()
        await kube.delete(API, KIND, NAME, ns)
        await stop_webhooks(hooks)
        await kube.delete("v1", "Namespace", ns)
        await kube.close()
