"""DisaggregatedSets with ``lws-operator run`` processes (``make e2e-ds``): an operator killed in
the middle of a coordinated rollout, and a set taken over from the upstream controller.

Admission for the test namespace comes from webhooks in this process, confined to it; the
controllers run only in the processes started here, so "the operator is not running yet" is
literally true.
"""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import API, DS_API, DS_KIND, KIND, DisaggregatedSet, Role
from e2e.harness.clusters import Clusters
from e2e.harness.disaggregated import (
    PAUSE,
    RolloutMonitor,
    check_everything,
    install_crds,
    lws_name,
    system_labels,
    wait_converged,
    wait_gone,
)
from e2e.harness.replicas import Env, running_env
from e2e.kube import MERGE_PATCH, Kube, condition, wait_for

pytestmark = [pytest.mark.full, pytest.mark.skipif(
    os.environ.get("LWS_E2E_DS") != "full",
    reason="the DisaggregatedSet catalogue runs under `make e2e-ds` (LWS_E2E_DS=full)")]


@pytest_asyncio.fixture(loop_scope="session")
async def env(clusters: Clusters, tmp_path: Path) -> AsyncIterator[Env]:
    await asyncio.to_thread(install_crds, clusters.get("full"))
    async with running_env(clusters, tmp_path, suffix="ds") as out:
        try:
            yield out
        finally:
            for obj in await out.kube.list(DS_API, DS_KIND, out.namespace):
                await out.kube.delete(DS_API, DS_KIND, obj["metadata"]["name"], out.namespace)


def body(name: str, image: str, replicas: int = 3) -> dict[str, Any]:
    def role(role_name: str) -> Role:
        return (Role(role_name).replicas(replicas).size(1).image(image, name="model")
                .worker_annotations({READY_DELAY_ANNOTATION: "1s"}))
    return DisaggregatedSet(name).role(role("prefill")).role(role("decode")).build()


async def test_an_operator_killed_mid_rollout_finishes_it_coordinated(env: Env) -> None:
    """SIGKILL while new and old revisions both serve; the restarted operator completes the
    rollout, and the watch over the whole of it sees no split revision and no role above
    source + surge."""
    kube, ns = env.kube, env.namespace
    first = env.operator("ds-kill-1", "--leader-elect=false", "--workers", "2")
    await first.start()
    await kube.create(body("killed", PAUSE), ns)
    before = await wait_converged(kube, ns, "killed")
    async with RolloutMonitor(kube, ns, "killed") as monitor:
        await kube.patch(DS_API, DS_KIND, "killed", {"spec": body(
            "killed", "registry.k8s.io/pause:3.10")["spec"]}, ns, content_type=MERGE_PATCH)

        async def mid_rollout() -> bool:
            state = monitor.states[-1]
            old = sum(n for (_, rev, _), n in state.items() if rev == before.revision)
            new = sum(n for (_, rev, _), n in state.items() if rev != before.revision)
            return new >= 2 and 0 < old < 6

        await wait_for(mid_rollout, timeout=180, what="the rollout half way")
        await first.kill()
        await asyncio.sleep(1)
        second = env.operator("ds-kill-2", "--leader-elect=false", "--workers", "2")
        await second.start()
        after = await wait_converged(kube, ns, "killed", other_than=before.revision)
    assert monitor.violations({"prefill": 4, "decode": 4}) == []
    assert monitor.revisions() == [before.revision, after.revision]
    await check_everything(kube, ns, after)
    await kube.delete(DS_API, DS_KIND, "killed", ns)
    await wait_gone(kube, ns, "killed")


def upstream_child(ds: dict[str, Any], role: dict[str, Any], revision: str,
                   legacy: bool) -> dict[str, Any]:
    """The child LeaderWorkerSet as upstream's lws_manager.go creates it: the role's spec with
    its replicas, the role's metadata labels under the five system labels (four for the
    pre-slices form, named ``<ds>-<rev>-<role>``), the same labels merged into the pod
    templates, one controller ownerReference."""
    name = ds["metadata"]["name"]
    labels = system_labels(name, 0, revision, role["name"])
    if legacy:
        labels.pop("disaggregatedset.x-k8s.io/slice")
        labels["app"] = f"{name}-{role['name']}"
    spec = copy.deepcopy(role["spec"])
    lwt = spec["leaderWorkerTemplate"]
    for which in ("workerTemplate", "leaderTemplate"):
        if which in lwt:
            meta = lwt[which].setdefault("metadata", {})
            meta["labels"] = {**(meta.get("labels") or {}), **labels}
    role_meta = role.get("metadata") or {}
    return {
        "apiVersion": API, "kind": KIND,
        "metadata": {
            "name": (f"{name}-{revision}-{role['name']}" if legacy
                     else lws_name(name, 0, revision, role["name"])),
            "labels": {**(role_meta.get("labels") or {}), **labels},
            **({"annotations": dict(role_meta["annotations"])}
               if role_meta.get("annotations") else {}),
            "ownerReferences": [{"apiVersion": DS_API, "kind": DS_KIND, "name": name,
                                 "uid": ds["metadata"]["uid"], "controller": True}]},
        "spec": spec,
    }


async def available(kube: Kube, ns: str, name: str, replicas: int) -> dict[str, Any]:
    """Wait until the set's status says every role has ``replicas`` groups, all ready and
    updated to the target revision, Available, for the current generation."""

    async def probe() -> dict[str, Any] | None:
        got = await kube.get(DS_API, DS_KIND, name, ns)
        status = (got or {}).get("status") or {}
        if got is None or status.get("observedGeneration") != got["metadata"]["generation"]:
            return None
        statuses = [{"name": r["name"], "replicas": replicas, "readyReplicas": replicas,
                     "updatedReplicas": replicas} for r in got["spec"]["roles"]]
        if status.get("roleStatuses") == statuses and condition(got, "Available") == "True":
            return got
        return None

    out = await wait_for(probe, timeout=240, what=f"{name} Available")
    assert out is not None
    return out


@pytest.mark.parametrize("legacy", [False, True], ids=["slice-aware", "pre-slices"])
async def test_a_set_made_by_the_upstream_controller_is_taken_over_without_a_rollout(
        env: Env, legacy: bool) -> None:
    """The set and its children as the upstream controller leaves them (slice-aware names, or
    the pre-slices ``<ds>-<rev>-<role>`` of its previous release; its 8-hex revision label,
    which is not ours), made while no operator of ours runs; then the operator starts: no new
    LeaderWorkerSet, names and UIDs kept, no RollingUpdateStarted, and the status counts the
    adopted revision's groups as updated (it is the target). Upstream's upgrade e2e."""
    kube, ns = env.kube, env.namespace
    theirs = "0badf00d"
    await kube.create(body("inherited", PAUSE, replicas=2), ns)
    stored = await kube.get(DS_API, DS_KIND, "inherited", ns)
    assert stored is not None
    made = {}
    for role in stored["spec"]["roles"]:
        child = await kube.create(upstream_child(stored, role, theirs, legacy=legacy), ns)
        made[child["metadata"]["name"]] = child["metadata"]["uid"]
    async with RolloutMonitor(kube, ns, "inherited") as monitor:
        op = env.operator("ds-takeover", "--leader-elect=false", "--workers", "2")
        await op.start()
        await available(kube, ns, "inherited", 2)
        await asyncio.sleep(10)  # a quiet window: nothing may start late
    assert monitor.revisions() == [theirs]
    live = {o["metadata"]["name"]: o["metadata"]["uid"]
            for o in await kube.list(API, KIND, ns)}
    assert live == made
    events = [e for e in await kube.list("v1", "Event", ns)
              if (e.get("involvedObject") or {}).get("name") == "inherited"]
    assert not [e for e in events if e.get("reason") == "RollingUpdateStarted"], events
    if not legacy:
        got = await wait_converged(kube, ns, "inherited")
        assert got.revision == theirs
        assert got.uids() == made
        await check_everything(kube, ns, got)
    await kube.delete(DS_API, DS_KIND, "inherited", ns)
    await wait_gone(kube, ns, "inherited")
