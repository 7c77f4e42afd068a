"""Rollout stall detection end to end: the LWS docs' resource deadlock on a full GPU cluster.

Four groups of four pods with 8 GPUs each fill all 16 GPU nodes. Halving the GPUs per pod while
doubling the replicas in one update (default maxUnavailable 1) deadlocks: the new groups cannot
be scheduled while the old ones hold every GPU. The LeaderWorkerSet must say so
(``Progressing=False``, ``RolloutStalled``, a Warning Event with the remedies), and applying the
LWS docs' Ordinal remedy (maxUnavailable 100%) must get the rollout through.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH, condition, is_ready, wait_for

pytestmark = pytest.mark.full

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"


def template(gpus: int) -> dict[str, Any]:
    return {"spec": {"containers": [{"name": "engine", "image": "engine:v1", "resources": {
        "limits": {"nvidia.com/gpu": str(gpus)}}}]}}


async def gpus_in_use(op: Operator) -> int:
    total = 0
    for pod in await op.kube.list("v1", "Pod"):
        for container in pod["spec"]["containers"]:
            total += int(((container.get("resources") or {}).get("limits") or {}).get(
                "nvidia.com/gpu", 0))
    return total


async def test_the_resource_deadlock_is_reported_and_the_remedy_works(
    operator: Operator,
) -> None:
    op, ns = operator, operator.namespace

    async def gpus_free() -> bool:
        return await gpus_in_use(op) == 0

    await wait_for(gpus_free, timeout=120, what="earlier tests' GPU pods to be gone")
    await op.kube.create({
        "apiVersion": API, "kind": KIND, "metadata": {"name": "full"},
        "spec": {"replicas": 4, "leaderWorkerTemplate": {"size": 4,
                                                         "workerTemplate": template(8)}},
    }, ns)

    async def lws() -> dict[str, Any]:
        got = await op.kube.get(API, KIND, "full", ns)
        assert got is not None
        return got

    async def available() -> bool:
        return condition(await lws(), "Available") == "True"

    await wait_for(available, timeout=120, what="4 groups x 4 pods x 8 GPUs on 16 nodes")
    await op.kube.patch(API, KIND, "full", {"spec": {"replicas": 8, "leaderWorkerTemplate": {
        "workerTemplate": template(4)}}}, ns, content_type=MERGE_PATCH)

    async def stalled() -> dict[str, Any] | None:
        got = await lws()
        for cond in got["status"].get("conditions") or []:
            if cond["type"] == "Progressing" and cond["reason"] == "RolloutStalled":
                return dict(cond)
        return None

    cond = await wait_for(stalled, timeout=90, what="Progressing=False, RolloutStalled")
    assert cond is not None
    assert cond["status"] == "False"
    assert "Insufficient nvidia.com/gpu" in cond["message"]
    assert "Update in two steps" in cond["message"]
    assert condition(await lws(), "UpdateInProgress") == "True"
    await op.recorded()  # the pass that wrote the condition queued the Event
    warnings = [e for e in await op.kube.list("events.k8s.io/v1", "Event", ns)
                if e["reason"] == "RolloutStalled"]
    assert [e["type"] for e in warnings] == ["Warning"]
    assert warnings[0]["note"] == cond["message"]

    # The LWS docs' Ordinal remedy: maxUnavailable 100% drops the partition to 0 at once.
    await op.kube.patch(API, KIND, "full", {"spec": {"rolloutStrategy": {
        "rollingUpdateConfiguration": {"maxUnavailable": "100%"}}}}, ns,
        content_type=MERGE_PATCH)

    async def recovered() -> bool:
        got = await lws()
        pods = [p for p in await op.kube.list("v1", "Pod", ns, label_selector=f"{P}name=full")
                if not p["metadata"].get("deletionTimestamp")]
        return (condition(got, "Available") == "True" and len(pods) == 32
                and all(is_ready(p) for p in pods))

    await wait_for(recovered, timeout=180, what="8 groups x 4 pods x 4 GPUs after the remedy")
    assert (await stalled()) is None
    await op.kube.delete(API, KIND, "full", ns)
