"""``kubectl lws restart`` and ``kubectl lws recover`` end to end, through the real console
script: a restart recreates exactly the named group; a group stopped by its restart budget
(maxGroupRestarts 0) comes back with ``recover``. Without ``--yes`` and without a terminal,
both refuse and change nothing."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from e2e.cluster.faults import restart_container
from e2e.harness.builder import LeaderWorkerSet, P
from e2e.harness.converge import get_lws, group_pods, pods_of, uids
from e2e.harness.launcher import Operator
from e2e.kube import condition, is_ready, wait_for

pytestmark = pytest.mark.full

NAME = "act"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def act_set(ready_set: Callable[..., Awaitable[str]]) -> str:
    """2 groups of 2 with no restart budget: the first failure stops a group."""
    return await ready_set(LeaderWorkerSet(NAME).replicas(2).size(2).image("engine:v1")
                           .template(maxGroupRestarts=0).build(), pods=4)


async def settled(op: Operator, before: dict[str, str], changed: set[str]) -> dict[str, str]:
    """Wait until the 4 pods are live and Ready with exactly ``changed`` replaced."""

    async def probe() -> dict[str, str] | None:
        pods = await pods_of(op, NAME)
        live = uids(pods)
        if len(pods) != 4 or len(live) != 4 or not all(is_ready(p) for p in pods):
            return None
        replaced = {n for n, u in live.items() if before.get(n) != u}
        return live if replaced == changed else None

    got = await wait_for(probe, timeout=90, what=f"exactly {sorted(changed)} replaced")
    assert got is not None
    return got


async def test_restart_recreates_only_that_group(operator: Operator, act_set: str,
                                                 kubectl_lws: Any) -> None:
    before = uids(await pods_of(operator, NAME))
    refused = await kubectl_lws("restart", NAME, "1")
    assert refused.code == 1
    assert "refusing: stdin is not a terminal" in refused.err
    assert "--yes" in refused.err
    assert uids(await pods_of(operator, NAME)) == before

    ran = await kubectl_lws("restart", NAME, "1", "--yes")
    assert ran.code == 0, ran.err
    assert ran.out.startswith(f"Deleted leader pod {operator.namespace}/{NAME}-1 (uid "
                              f"{before[NAME + '-1']}) of group 1 with foreground propagation")
    print(ran.out)
    await settled(operator, before, group_pods(NAME, 1, 2))

    missing = await kubectl_lws("restart", NAME, "7", "--yes")
    assert missing.code == 1
    assert "group 7 has no leader pod" in missing.err


async def test_recover_brings_back_an_exhausted_group(operator: Operator, act_set: str,
                                                      kubectl_lws: Any) -> None:
    before = uids(await pods_of(operator, NAME))
    not_exhausted = await kubectl_lws("recover", NAME, "0", "--yes")
    assert not_exhausted.code == 1
    assert "group 0 has not exhausted its restart budget" in not_exhausted.err

    await restart_container(operator.kube, operator.namespace, f"{NAME}-0-1")

    async def stopped() -> dict[str, Any] | None:
        ran = await kubectl_lws("tree", NAME, "-o", "json")
        tree = json.loads(ran.out)
        group = next(g for g in tree["groups"] if g["index"] == "0")
        return tree if group["state"] == "RestartBudgetExhausted" else None

    tree = await wait_for(stopped, timeout=60, what="group 0 shown as exhausted by the tree")
    assert tree is not None
    assert [g["state"] for g in tree["groups"]] == ["RestartBudgetExhausted", "Ready"]
    assert condition(await get_lws(operator, NAME), "Degraded") == "True"
    text = await kubectl_lws("tree", NAME)
    print(text.out)
    restart = await kubectl_lws("restart", NAME, "0", "--yes")
    assert restart.code == 1
    assert "use `kubectl lws recover`" in restart.err

    refused = await kubectl_lws("recover", NAME, "0")
    assert refused.code == 1
    assert "refusing: stdin is not a terminal" in refused.err
    leader = next(p for p in await pods_of(operator, NAME)
                  if p["metadata"]["name"] == f"{NAME}-0")
    assert P + "recover" not in (leader["metadata"].get("annotations") or {})

    ran = await kubectl_lws("recover", NAME, "0", "-y")
    assert ran.code == 0, ran.err
    assert ran.out.startswith(f"Annotated leader pod {operator.namespace}/{NAME}-0 of group 0 "
                              f"with {P}recover=true")
    print(ran.out)
    await settled(operator, before, group_pods(NAME, 0, 2))

    async def recovered() -> bool:
        return condition(await get_lws(operator, NAME), "Degraded") == "False"

    await wait_for(recovered, what="Degraded=False")
