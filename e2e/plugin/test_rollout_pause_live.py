"""``kubectl lws rollout pause|resume`` on a LeaderWorkerSet end to end, through the real console
script: pausing writes the annotation (twice is an error), ``why`` names the pause (a warning at
rest, blocking once a template change waits), a template changed while paused starts nowhere
(the leader StatefulSet's partition over every ordinal, no pod of the new revision), and the
resume rolls it out."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.converge import converged, get_lws, pods_of
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH, wait_for

pytestmark = pytest.mark.full

NAME = "pausable"
PAUSED = "lws-operator.dev/paused"
RESOURCE = f"leaderworkerset.leaderworkerset.x-k8s.io/{NAME}"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def pausable(ready_set: Callable[..., Awaitable[str]]) -> str:
    return await ready_set(LeaderWorkerSet(NAME).replicas(2).size(2).image("engine:v1")
                           .rolling_update(maxUnavailable=1, maxSurge=1).build(), pods=4)


async def test_pause_holds_a_template_change_and_resume_rolls_it_out(
        operator: Operator, pausable: str, kubectl_lws: Any) -> None:
    op, ns = operator, operator.namespace
    missing = await kubectl_lws("rollout", "pause", "no-such-set")
    assert missing.code == 1
    assert 'leaderworkerset or disaggregatedset "no-such-set" not found' in missing.err

    ran = await kubectl_lws("rollout", "pause", NAME)
    assert (ran.code, ran.out) == (0, f"{RESOURCE} paused\n"), ran.err
    assert (await get_lws(op, NAME))["metadata"]["annotations"][PAUSED] == "true"
    again = await kubectl_lws("rollout", "pause", NAME)
    assert (again.code, again.err) == (1, f"error: {RESOURCE} is already paused\n")

    at_rest = await kubectl_lws("why", NAME, "-o", "json")
    assert at_rest.code == 0, at_rest.out  # a warning only: nothing rolls
    (finding,) = json.loads(at_rest.out)["findings"]
    assert (finding["cause"], finding["blocking"]) == ("RolloutPaused", False)

    old = {p["metadata"]["labels"][P + "template-revision-hash"]
           for p in await pods_of(op, NAME)}
    await op.kube.patch(API, KIND, NAME, {"spec": {"leaderWorkerTemplate": {"workerTemplate": {
        "spec": {"containers": [{"name": "engine", "image": "engine:v2"}]}}}}}, ns,
        content_type=MERGE_PATCH)

    async def paused_condition() -> bool:
        got = await get_lws(op, NAME)
        return any(c["type"] == "Progressing" and c["reason"] == "RolloutPaused"
                   for c in (got.get("status") or {}).get("conditions") or [])

    await wait_for(paused_condition, timeout=30, what="Progressing RolloutPaused")
    sts = await op.kube.get("apps/v1", "StatefulSet", NAME, ns)
    assert sts is not None
    assert (sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"],
            sts["spec"]["replicas"]) == (2, 2), "the new revision starts nowhere, not surged"
    assert {p["metadata"]["labels"][P + "template-revision-hash"]
            for p in await pods_of(op, NAME)} == old

    blocked = await kubectl_lws("why", NAME)
    assert blocked.code == 1, blocked.out
    assert "Blocked by: RolloutPaused: the rollout is paused" in blocked.out
    assert f"fix: kubectl lws rollout resume {NAME} -n {ns}" in blocked.out

    resumed = await kubectl_lws("rollout", "resume", NAME)
    assert (resumed.code, resumed.out) == (0, f"{RESOURCE} resumed\n"), resumed.err
    assert PAUSED not in ((await get_lws(op, NAME))["metadata"].get("annotations") or {})
    pods = await converged(op, NAME, replicas=2, size=2, timeout=120)
    new = {p["metadata"]["labels"][P + "template-revision-hash"] for p in pods}
    assert len(new) == 1
    assert new != old
    not_paused = await kubectl_lws("rollout", "resume", NAME)
    assert (not_paused.code, not_paused.err) == (1, f"error: {RESOURCE} is not paused\n")
