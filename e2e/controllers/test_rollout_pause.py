"""Pause and resume a LeaderWorkerSet's rollout (``lws-operator.dev/paused``) end to end, with
the controllers in ``lws-operator run`` processes so that one can be killed mid-pause.

Four groups of two, maxUnavailable 1 and maxSurge 1, a new template whose pods turn Ready 4 s
after they start: unpaused, the partition moves down a group every few seconds. The test pauses
as soon as the rollout has started (the partition below 4), then checks at every poll that the
leader StatefulSet's partition and replicas stay where the pause found them, for 10 s, across a
SIGKILL of the operator and a new one taking over, and for 10 s more after. Paused, a scale to
6 is followed: the new groups start on the old revision (the partition raised over them). The
resume completes the rollout: six groups Ready on the new revision, the set Available.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.replicas import Env
from e2e.kube import MERGE_PATCH, condition, is_ready, polling, wait_for

pytestmark = [pytest.mark.full, pytest.mark.replicas(suffix="pause", drain_timeout=60)]

NAME = "paused"
SIZE = 2
PAUSED = "lws-operator.dev/paused"


def body() -> dict[str, Any]:
    return (LeaderWorkerSet(NAME).replicas(4).size(SIZE).image("engine:v1")
            .rolling_update(maxUnavailable=1, maxSurge=1).build())


async def test_pause_mid_rollout_holds_across_a_restart_scales_and_resumes(env: Env) -> None:
    kube, ns = env.kube, env.namespace
    first = env.operator("pause-1", "--leader-elect=false", "--workers", "2")
    await first.start()
    await kube.create(body(), ns)

    async def lws() -> dict[str, Any]:
        got = await kube.get(API, KIND, NAME, ns)
        assert got is not None
        return got

    async def pods() -> list[dict[str, Any]]:
        return [p for p in await kube.list("v1", "Pod", ns, label_selector=f"{P}name={NAME}")
                if not p["metadata"].get("deletionTimestamp")]

    async def leader_rollout() -> tuple[int, int]:
        sts = await kube.get("apps/v1", "StatefulSet", NAME, ns)
        assert sts is not None
        spec = sts["spec"]
        return spec["updateStrategy"]["rollingUpdate"]["partition"], spec["replicas"]

    async def settled(replicas: int, other_than: str | None = None) -> str | None:
        """The one revision every group runs once ``replicas`` groups are Ready on it and the
        set says so (and it is not ``other_than``), else None."""
        got, live = await lws(), await pods()
        keys = {p["metadata"]["labels"][P + "template-revision-hash"] for p in live}
        if (condition(got, "Available") == "True" and len(live) == replicas * SIZE
                and all(is_ready(p) for p in live) and len(keys) == 1
                and (got.get("status") or {}).get("updatedReplicas") == replicas):
            key = keys.pop()
            return key if key != other_than else None
        return None

    old = await wait_for(lambda: settled(4), timeout=120, what="4 groups Ready")
    await kube.patch(API, KIND, NAME, {"spec": {"leaderWorkerTemplate": {"workerTemplate": {
        "metadata": {"annotations": {READY_DELAY_ANNOTATION: "4s"}},
        "spec": {"containers": [{"name": "engine", "image": "engine:v2"}]}}}}}, ns,
        content_type=MERGE_PATCH)

    async def started() -> bool:
        """The leader StatefulSet on the new revision and its partition below 4: a group is
        being replaced (at rest before the change, the partition was 0 already)."""
        sts = await kube.get("apps/v1", "StatefulSet", NAME, ns)
        assert sts is not None
        return (sts["metadata"]["labels"][P + "template-revision-hash"] != old
                and sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] < 4)

    await wait_for(started, timeout=60, interval=0.1, what="the rollout under way")
    await kube.patch(API, KIND, NAME, {"metadata": {"annotations": {PAUSED: "true"}}}, ns,
                     content_type=MERGE_PATCH)

    async def paused_condition() -> dict[str, Any] | None:
        for cond in (await lws()).get("status", {}).get("conditions") or []:
            if cond["type"] == "Progressing" and cond["reason"] == "RolloutPaused":
                return dict(cond)
        return None

    cond = await wait_for(paused_condition, timeout=30, what="Progressing RolloutPaused")
    assert cond is not None
    assert cond["status"] == "Unknown"
    held = await leader_rollout()
    assert 0 < held[0] < 4, f"paused mid-rollout: {held}"
    seen: list[tuple[int, int]] = []

    async def probe() -> None:
        seen.append(await leader_rollout())

    async with polling(probe, interval=0.5):
        await asyncio.sleep(10)  # unpaused, a group is replaced every few seconds
        await first.kill()
        second = env.operator("pause-2", "--leader-elect=false", "--workers", "2")
        await second.start()
        await asyncio.sleep(10)
    print(f"\n[pause] held {held} for {len(seen)} polls across the restart: "
          f"{sorted(set(seen))}", flush=True)
    assert set(seen) == {held}, "partition and replicas held across the restart"
    assert await paused_condition() is not None

    # Scaled while paused: followed, the new groups on the running revision.
    await kube.patch(API, KIND, NAME, {"spec": {"replicas": 6}}, ns, content_type=MERGE_PATCH)

    async def scaled() -> bool:
        partition, replicas = await leader_rollout()
        live = {p["metadata"]["name"]: p for p in await pods()}
        return (partition, replicas) == (6, 6) and all(
            f"{NAME}-{g}" in live and is_ready(live[f"{NAME}-{g}"]) for g in (4, 5))

    await wait_for(scaled, timeout=90, what="scaled to 6 while paused")
    for group in (5,):  # ordinal 4 is the surge group, already on the new revision
        leader = next(p for p in await pods() if p["metadata"]["name"] == f"{NAME}-{group}")
        assert leader["metadata"]["labels"][P + "template-revision-hash"] == old, \
            "a group added while paused starts on the running revision"

    # Resumed: the rollout completes.
    await kube.patch(API, KIND, NAME, {"metadata": {"annotations": {PAUSED: None}}}, ns,
                     content_type=MERGE_PATCH)
    new = await wait_for(lambda: settled(6, other_than=old), timeout=240,
                         what="the rollout completed after the resume")
    assert new != old
    assert await leader_rollout() == (0, 6)
    assert second.failures() == [], second.log_tail()


async def test_a_paused_hash_set_holds_its_group_replacement(env: Env) -> None:
    """Hash groups: the pause pauses the leader Deployment, so no further group is torn down
    or added while paused (the live group keys and their revisions hold for 10 s, where
    unpaused a group is replaced every few seconds); the resume completes the rollout."""
    kube, ns, name = env.kube, env.namespace, "hashed"
    operator = env.operator("pause-hash", "--leader-elect=false", "--workers", "2")
    await operator.start()
    await kube.create(LeaderWorkerSet(name).replicas(4).size(SIZE).image("engine:v1")
                      .spec(groupIdentity="Hash")
                      .rolling_update(maxUnavailable=1, maxSurge=1).build(), ns)

    async def groups() -> dict[str, str]:
        """Live leaders' group key -> revision."""
        return {p["metadata"]["labels"][P + "group-key"]:
                p["metadata"]["labels"][P + "template-revision-hash"]
                for p in await kube.list("v1", "Pod", ns, label_selector=f"{P}name={name}")
                if not p["metadata"].get("deletionTimestamp")
                and p["metadata"]["labels"].get(P + "worker-index") == "0"}

    async def ready_on_one_revision(other_than: str | None = None) -> str | None:
        got = await kube.get(API, KIND, name, ns)
        live = await kube.list("v1", "Pod", ns, label_selector=f"{P}name={name}")
        live = [p for p in live if not p["metadata"].get("deletionTimestamp")]
        keys = {p["metadata"]["labels"][P + "template-revision-hash"] for p in live}
        if (condition(got, "Available") == "True" and len(live) == 4 * SIZE
                and all(is_ready(p) for p in live) and len(keys) == 1):
            key = keys.pop()
            return key if key != other_than else None
        return None

    old = await wait_for(ready_on_one_revision, timeout=120, what="4 Hash groups Ready")
    await kube.patch(API, KIND, name, {"spec": {"leaderWorkerTemplate": {"workerTemplate": {
        "metadata": {"annotations": {READY_DELAY_ANNOTATION: "4s"}},
        "spec": {"containers": [{"name": "engine", "image": "engine:v2"}]}}}}}, ns,
        content_type=MERGE_PATCH)

    async def under_way() -> bool:
        return any(revision != old for revision in (await groups()).values())

    await wait_for(under_way, timeout=60, interval=0.1, what="a group on the new revision")
    await kube.patch(API, KIND, name, {"metadata": {"annotations": {PAUSED: "true"}}}, ns,
                     content_type=MERGE_PATCH)

    async def deployment_paused() -> bool:
        got = await kube.get("apps/v1", "Deployment", name, ns)
        return bool(((got or {}).get("spec") or {}).get("paused"))

    await wait_for(deployment_paused, timeout=30, what="the leader Deployment paused")
    await asyncio.sleep(2)  # what the Deployment started before its pause lands
    held = await groups()
    seen: list[dict[str, str]] = []

    async def probe() -> None:
        seen.append(await groups())

    async with polling(probe, interval=0.5):
        await asyncio.sleep(10)
    assert all(s == held for s in seen), f"groups changed while paused: {seen}"
    assert old in held.values(), f"paused mid-rollout: {held}"

    await kube.patch(API, KIND, name, {"metadata": {"annotations": {PAUSED: None}}}, ns,
                     content_type=MERGE_PATCH)
    new = await wait_for(lambda: ready_on_one_revision(other_than=old), timeout=240,
                         what="the Hash rollout completed after the resume")
    assert new != old
    assert not await deployment_paused()
