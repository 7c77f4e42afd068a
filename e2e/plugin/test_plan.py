"""``kubectl lws plan`` end to end: the real console script against a live set configured as
the LWS docs' rolling-update example (4 groups, maxUnavailable 2, maxSurge 2), and a Hash set as the
LWS docs' Hash-mode example (2 groups, maxUnavailable 1, maxSurge 1). The plan is the docs'
trace, and nothing is written: every object of the set keeps its resourceVersion."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from e2e.harness.builder import LeaderWorkerSet, P
from e2e.harness.converge import wait_converged
from e2e.harness.launcher import Operator

pytestmark = pytest.mark.full

NAME = "plan-guide"
SYMBOL = {"updated": "✅", "old": "❎", "updating": "⏳", "old-not-ready": "❌"}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def guide_set(ready_set: Callable[..., Awaitable[str]]) -> str:
    name = await ready_set(LeaderWorkerSet(NAME).replicas(4).size(2).image("engine:v1")
                           .rolling_update(maxUnavailable=2, maxSurge=2).build(), pods=8)
    return name


@pytest_asyncio.fixture(loop_scope="session")
async def at_rest(operator: Operator, guide_set: str) -> None:
    """The set converged and at rest (its last status write done), so that any change of a
    resourceVersion during a test is a write of the test's own doing."""
    await wait_converged(operator.kube, operator.namespace, NAME, 4, 2, "engine:v1")


async def versions(op: Operator) -> dict[str, str]:
    """kind/name -> resourceVersion of the set and everything labelled with its name."""
    out = {}
    lws = await op.kube.get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", NAME,
                            op.namespace)
    assert lws is not None
    out[f"LeaderWorkerSet/{NAME}"] = lws["metadata"]["resourceVersion"]
    for api, kind in (("v1", "Pod"), ("apps/v1", "StatefulSet"), ("v1", "Service")):
        for obj in await op.kube.list(api, kind, op.namespace, label_selector=f"{P}name={NAME}"):
            out[f"{kind}/{obj['metadata']['name']}"] = obj["metadata"]["resourceVersion"]
    sts = await op.kube.get("apps/v1", "StatefulSet", NAME, op.namespace)
    assert sts is not None
    out[f"StatefulSet/{NAME}"] = sts["metadata"]["resourceVersion"]
    return out


def trace(plan: dict[str, Any]) -> list[tuple[int, int, str]]:
    return [(s["partition"], s["replicas"], "".join(SYMBOL[g] for g in s["groups"]))
            for s in plan["steps"]]


async def test_an_image_change_plans_the_guides_rollout_and_writes_nothing(
        operator: Operator, at_rest: None, kubectl_lws: Any) -> None:
    before = await versions(operator)
    assert sum(key.startswith("Pod/") for key in before) == 8
    assert sum(key.startswith("StatefulSet/") for key in before) == 5
    ran = await kubectl_lws("plan", NAME, "--set-image", "engine=engine:v2", "-o", "json")
    assert ran.code == 0, ran.err
    plan = json.loads(ran.out)
    assert plan["rollout"] is True
    assert plan["templateDifference"].startswith(".spec.leaderWorkerTemplate.workerTemplate")
    assert (plan["maxUnavailable"], plan["maxSurge"], plan["partition"]) == (2, 2, 0)
    # The LWS docs' table, with the groups of one batch turning Ready together.
    assert trace(plan) == [
        (0, 4, "✅✅✅✅"), (4, 6, "❎❎❎❎⏳⏳"), (2, 6, "❎❎⏳⏳⏳⏳"), (0, 6, "⏳⏳⏳⏳✅✅"),
        (0, 6, "⏳⏳✅✅✅✅"), (0, 4, "⏳⏳✅✅"), (0, 4, "✅✅✅✅")]
    assert plan["complete"] is True
    assert plan["minAvailable"] == 2

    one = json.loads((await kubectl_lws("plan", NAME, "--set-image", "engine:v2",
                                        "--ready-order", "one", "-o", "json")).out)
    assert trace(one)[3:5] == [(2, 6, "❎❎⏳⏳✅⏳"), (0, 6, "⏳⏳⏳⏳✅✅")]  # docs' stages 4, 5

    text = await kubectl_lws("plan", NAME, "--size", "3")
    assert text.code == 0, text.err
    assert text.out.startswith(f"Rolling update of {operator.namespace}/{NAME}: the templates "
                               "change (first difference: .spec.leaderWorkerTemplate.size)")
    assert "Nothing was written." in text.out
    assert "STAGE  PARTITION  REPLICAS  R-0 R-1 R-2 R-3 R-4* R-5*  AVAILABLE  DESCRIPTION" \
        in text.out
    print(text.out)
    assert await versions(operator) == before


async def test_replicas_alone_is_no_rollout(operator: Operator, at_rest: None,
                                            kubectl_lws: Any) -> None:
    before = await versions(operator)
    ran = await kubectl_lws("plan", NAME, "--replicas", "6", "-o", "json")
    assert ran.code == 0, ran.err
    plan = json.loads(ran.out)
    assert plan["rollout"] is False
    assert trace(plan) == [(0, 4, "✅✅✅✅"), (0, 6, "✅✅✅✅⏳⏳"), (0, 6, "✅✅✅✅✅✅")]

    # A whole manifest (from stdin) whose templates are the live ones: no rollout either.
    live = await operator.kube.get("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet", NAME,
                                   operator.namespace)
    assert live is not None
    manifest = {"apiVersion": live["apiVersion"], "kind": live["kind"],
                "metadata": {"name": NAME}, "spec": {**live["spec"], "replicas": 3}}
    same = await kubectl_lws("plan", NAME, "-f", "-", "-o", "json", stdin=json.dumps(manifest))
    assert same.code == 0, same.err
    assert json.loads(same.out)["rollout"] is False
    text = await kubectl_lws("plan", NAME, "--replicas", "6")
    assert f"No rollout for {operator.namespace}/{NAME}: the templates are unchanged, no group "\
        "is replaced (replicas 4 → 6: groups are added or removed)." in text.out

    refused = json.loads((await kubectl_lws("plan", NAME, "--replicas", "-1", "-o",
                                            "json")).out)
    assert "spec.replicas" in refused["refusedByAdmission"]
    assert refused["steps"] is None
    nothing = await kubectl_lws("plan", NAME)
    assert nothing.code == 2
    assert "nothing to plan" in nothing.err
    assert await versions(operator) == before


HASH_NAME = "plan-hash"


async def hash_versions(op: Operator) -> dict[str, str]:
    """kind/name -> resourceVersion of the Hash set, its leader Deployment and everything
    labelled with its name."""
    out = {}
    for api, kind in (("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"),
                      ("apps/v1", "Deployment")):
        obj = await op.kube.get(api, kind, HASH_NAME, op.namespace)
        assert obj is not None, kind
        out[f"{kind}/{HASH_NAME}"] = obj["metadata"]["resourceVersion"]
    for api, kind in (("v1", "Pod"), ("apps/v1", "StatefulSet"), ("v1", "Service"),
                      ("apps/v1", "ReplicaSet")):
        for obj in await op.kube.list(api, kind, op.namespace,
                                      label_selector=f"{P}name={HASH_NAME}"):
            out[f"{kind}/{obj['metadata']['name']}"] = obj["metadata"]["resourceVersion"]
    return out


async def test_a_hash_set_plans_the_guides_hash_trace_and_writes_nothing(
        operator: Operator, ready_set: Callable[..., Awaitable[str]],
        kubectl_lws: Any) -> None:
    """LWS docs, "Hash Mode": 2 groups of 2, maxUnavailable 1, maxSurge 1, PostTermination. The
    plan is the docs' five-stage trace, old groups named by their live keys, the new ones
    G-1, G-2; nothing is written."""
    body = (LeaderWorkerSet(HASH_NAME).replicas(2).size(2).image("engine:v1")
            .rolling_update(maxUnavailable=1, maxSurge=1).build())
    body["spec"]["groupIdentity"] = "Hash"
    await ready_set(body, pods=4)
    leaders = [p for p in await operator.kube.list(
        "v1", "Pod", operator.namespace,
        label_selector=f"{P}name={HASH_NAME},{P}worker-index=0")]
    keys = {p["metadata"]["labels"][f"{P}group-key"][:8] for p in leaders}
    assert len(keys) == 2
    before = await hash_versions(operator)
    ran = await kubectl_lws("plan", HASH_NAME, "--set-image", "engine=engine:v2", "-o", "json")
    assert ran.code == 0, ran.err
    plan = json.loads(ran.out)
    assert plan["rollout"] is True
    assert plan["groupIdentity"] == "Hash"
    assert plan["groupReplacementPolicy"] == "PostTermination"
    assert plan["deployment"] == {"maxUnavailable": 1, "maxSurge": 1}
    states = [([g["state"] for g in s["oldGroups"]], [g["state"] for g in s["newGroups"]],
               s["available"]) for s in plan["steps"]]
    assert states == [
        (["ready", "ready"], [], 2),
        (["ready", "tearing"], ["starting", "gated"], 1),
        (["ready"], ["starting", "starting"], 1),
        (["tearing"], ["ready", "starting"], 1),
        ([], ["ready", "ready"], 2)]
    assert {g["name"] for g in plan["steps"][0]["oldGroups"]} == keys
    assert [g["name"] for g in plan["steps"][-1]["newGroups"]] == ["G-1", "G-2"]
    assert plan["complete"] is True

    text = await kubectl_lws("plan", HASH_NAME, "--set-image", "engine:v2")
    assert text.code == 0, text.err
    assert "STAGE  OLD GROUPS" in text.out
    assert "Nothing was written." in text.out
    assert "G-2 stays SchedulingGated until" in text.out
    print(text.out)
    assert await hash_versions(operator) == before
