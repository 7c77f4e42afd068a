"""Group recreation end to end (upstream's handleRestartPolicy): a failed pod takes its whole group
down and back.

A container restart is injected the way a kubelet reports one (restartCount on a Running pod)
and a pod deletion with a plain delete; each must recreate every pod of that group (new UIDs)
and leave the other group untouched, with a RecreateGroup Event. With restartPolicy None
nothing but the failed pod changes.
"""

from __future__ import annotations

from typing import Any

import pytest

from e2e.cluster.faults import restart_container
from e2e.harness.builder import LeaderWorkerSet, P
from e2e.harness.launcher import Operator
from e2e.kube import is_ready, wait_for

pytestmark = pytest.mark.full



def lws(name: str, policy: str | None = None) -> dict[str, Any]:
    body = LeaderWorkerSet(name).replicas(2).size(3).image("engine:v1")
    return (body.restart_policy(policy) if policy else body).build()


async def ready_uids(op: Operator, name: str) -> dict[str, str] | None:
    pods = await op.kube.list("v1", "Pod", op.namespace, label_selector=f"{P}name={name}")
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    if len(live) != 6 or not all(is_ready(p) for p in live):
        return None
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in live}


async def settled_after(op: Operator, name: str, before: dict[str, str],
                        changed: set[str]) -> dict[str, str]:
    """Wait until the LWS is whole again with exactly the pods in ``changed`` replaced."""

    async def probe() -> dict[str, str] | None:
        now = await ready_uids(op, name)
        if now is None:
            return None
        replaced = {n for n in now if now[n] != before.get(n)}
        return now if replaced == changed else None

    after = await wait_for(probe, timeout=90, what=f"{name}: exactly {sorted(changed)} replaced")
    assert after is not None
    return after


async def recreate_events(op: Operator) -> list[str]:
    await op.recorded()  # every Event recorded so far written
    return [e["note"] for e in await op.kube.list("events.k8s.io/v1", "Event", op.namespace)
            if e["reason"] == "RecreateGroup"]


async def test_a_container_restart_recreates_its_group(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    await op.kube.create(lws("restarts"), ns)
    before = await wait_for(lambda: ready_uids(op, "restarts"), timeout=90, what="2 groups")
    assert before is not None
    await restart_container(op.kube, ns, "restarts-1-2")
    group_one = {"restarts-1", "restarts-1-1", "restarts-1-2"}
    await settled_after(op, "restarts", before, group_one)
    assert "Worker pod restarts-1-2 failed, deleted leader pod restarts-1 to recreate group 1" in (
        await recreate_events(op))


async def test_a_deleted_worker_recreates_its_group(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    await op.kube.create(lws("deletions"), ns)
    before = await wait_for(lambda: ready_uids(op, "deletions"), timeout=90, what="2 groups")
    assert before is not None
    await op.kube.delete("v1", "Pod", "deletions-0-1", ns)
    await settled_after(op, "deletions", before, {"deletions-0", "deletions-0-1", "deletions-0-2"})


async def test_restart_policy_none_replaces_only_the_pod(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    await op.kube.create(lws("tolerant", policy="None"), ns)
    before = await wait_for(lambda: ready_uids(op, "tolerant"), timeout=90, what="2 groups")
    assert before is not None
    await op.kube.delete("v1", "Pod", "tolerant-0-1", ns)
    await settled_after(op, "tolerant", before, {"tolerant-0-1"})
    assert not [n for n in await recreate_events(op) if "tolerant" in n]
