"""Failure handling end to end (LWS docs "Failure Handling and Restart Policies", "Pod Termination
Policy"): pod failures and node failures, the restart budget and its recovery, the
restart backoff, RecreateGroupAfterStart's unschedulable state, Parallel termination.

Faults are injected as a kubelet or the node lifecycle would show them (e2e/cluster/faults.py).
Every test removes its LeaderWorkerSet and waits for its pods to be gone, so no pod retained by
our cleanup finalizer outlives the operator of this module.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from e2e.cluster.faults import fail_pod, restart_container, set_node_ready
from e2e.cluster.stages import STOP_AFTER_GRACE_ANNOTATION
from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.converge import get_lws, pods_of, remove
from e2e.harness.launcher import Operator
from e2e.kube import condition, is_ready, wait_for

pytestmark = pytest.mark.full

FINALIZER = P + "cleanup"


def lws(name: str, replicas: int = 2, size: int = 3, *, pod: dict[str, Any] | None = None,
        template: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    return (LeaderWorkerSet(name).replicas(replicas).size(size).image("engine:v1")
            .worker_pod(**(pod or {})).template(**(template or {})).spec(**spec).build())


def group_of(pod: dict[str, Any]) -> str:
    return str(pod["metadata"]["labels"][P + "group-index"])


async def ready_groups(op: Operator, name: str, replicas: int,
                       size: int) -> dict[str, str] | None:
    """Pod name -> UID once exactly ``replicas`` whole groups are live and Ready."""
    live = [p for p in await pods_of(op, name) if not p["metadata"].get("deletionTimestamp")]
    if len(live) != replicas * size or not all(is_ready(p) for p in live):
        return None
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in live}


async def settle(op: Operator, name: str, replicas: int = 2, size: int = 3,
                 changed: set[str] | None = None, before: dict[str, str] | None = None,
                 timeout: float = 90,  # noqa: ASYNC109 - a deadline, passed to wait_for
                 ) -> dict[str, str]:
    """Wait until every group is Ready; with ``before``, until exactly ``changed`` (pod names)
    have new UIDs."""

    async def probe() -> dict[str, str] | None:
        now = await ready_groups(op, name, replicas, size)
        if now is None or before is None:
            return now
        replaced = {n for n in now if now[n] != before.get(n)}
        return now if replaced == changed else None

    out = await wait_for(probe, timeout=timeout, what=f"{name} Ready, {sorted(changed or ())}")
    assert out is not None
    return out


def group_pods(name: str, group: int, size: int = 3) -> set[str]:
    return {f"{name}-{group}", *(f"{name}-{group}-{i}" for i in range(1, size))}


async def events(op: Operator, reason: str, name: str) -> list[dict[str, Any]]:
    """The Events of ``reason`` about the set, every Event recorded so far written."""
    await op.recorded()
    return [e for e in await op.kube.list("events.k8s.io/v1", "Event", op.namespace)
            if e["reason"] == reason and e["regarding"]["name"] == name]


def retained(pod: dict[str, Any]) -> bool:
    meta = pod["metadata"]
    return bool(meta.get("deletionTimestamp")) and FINALIZER in (meta.get("finalizers") or [])


async def fail_group(op: Operator, name: str, group: int) -> None:
    """Several failures in one group at once: a worker and the leader restart, another worker
    fails (which its StatefulSet answers by deleting it)."""
    await asyncio.gather(restart_container(op.kube, op.namespace, f"{name}-{group}-1"),
                         restart_container(op.kube, op.namespace, f"{name}-{group}"),
                         fail_pod(op.kube, op.namespace, f"{name}-{group}-2"))


async def test_a_failed_pod_recreates_its_group(operator: Operator) -> None:
    op = operator
    await op.kube.create(lws("failing"), op.namespace)
    try:
        before = await settle(op, "failing")
        await fail_pod(op.kube, op.namespace, "failing-1-1")
        await settle(op, "failing", changed=group_pods("failing", 1), before=before)
        assert len(await events(op, "RecreateGroup", "failing")) == 1
    finally:
        await remove(op, "failing")


async def test_budget_stops_a_failing_group_and_recover_restarts_it(operator: Operator) -> None:
    """maxGroupRestarts 2 under repeated multi-pod failures: exactly two recreations (no restart
    storm), then the group is stopped and kept, Degraded, the other group untouched; editing
    the budget does not bring it back, the recover annotation does, with a fresh count."""
    op, name = operator, "budget"
    await op.kube.create(lws(name, template={"maxGroupRestarts": 2}), op.namespace)
    try:
        before = await settle(op, name)
        group_zero = {n: u for n, u in before.items() if n in group_pods(name, 0)}
        for round_ in (1, 2):
            await fail_group(op, name, 1)
            before = await settle(op, name, changed=group_pods(name, 1), before=before)
            counts = json.loads((await get_lws(op, name))["metadata"]["annotations"][
                P + "group-restart-counts"])
            assert list(counts.values()) == [round_]
            assert next(iter(counts)).endswith("/1")
        await fail_group(op, name, 1)

        async def stopped() -> list[dict[str, Any]] | None:
            pods = [p for p in await pods_of(op, name) if group_of(p) == "1"]
            done = [p for p in pods if retained(p)
                    and p["status"].get("phase") in ("Succeeded", "Failed")]
            return pods if pods and len(done) == len(pods) else None

        kept = await wait_for(stopped, timeout=60, what="group 1 stopped and retained")
        assert kept is not None
        leader = next(p for p in kept if p["metadata"]["name"] == f"{name}-1")
        assert leader["metadata"]["annotations"][P + "group-restart-budget-exhausted"] == "true"

        async def degraded() -> dict[str, Any] | None:
            got = await get_lws(op, name)
            cond = next((c for c in got.get("status", {}).get("conditions") or []
                         if c["type"] == "Degraded"), None)
            return cond if cond and cond["status"] == "True" else None

        cond = await wait_for(degraded, what="Degraded=True")
        assert cond is not None
        assert cond["reason"] == "ReplicaRestartBudgetExceeded"
        assert len(await events(op, "RecreateGroup", name)) == 2
        assert len(await events(op, "ReplicaRestartBudgetExceeded", name)) == 1
        live = {p["metadata"]["name"]: p["metadata"]["uid"] for p in await pods_of(op, name)
                if group_of(p) == "0"}
        assert live == group_zero  # the other group kept running throughout

        # A bigger budget does not recover the group: the pass that saw the edit (status at
        # the new generation) leaves the retained leader where it was.
        patched = await op.kube.patch(API, KIND, name, {"spec": {"leaderWorkerTemplate": {
            "maxGroupRestarts": 5}}}, op.namespace)

        async def seen() -> bool:
            got = await get_lws(op, name)
            return bool(got.get("status", {}).get("observedGeneration")
                        == patched["metadata"]["generation"])

        await wait_for(seen, what="the edit observed")
        still = await op.kube.get("v1", "Pod", f"{name}-1", op.namespace)
        assert still is not None
        assert still["metadata"]["uid"] == leader["metadata"]["uid"]
        assert retained(still)

        await op.kube.patch("v1", "Pod", f"{name}-1", {"metadata": {"annotations": {
            P + "recover": "true"}}}, op.namespace)
        after = await settle(op, name, changed=group_pods(name, 1), before=before)
        assert {n: u for n, u in after.items() if n in group_pods(name, 0)} == group_zero
        got = await get_lws(op, name)
        annotations = got["metadata"].get("annotations") or {}
        counts = json.loads(annotations.get(P + "group-restart-counts", "{}"))
        assert not [k for k in counts if k.endswith("/1")]

        async def recovered() -> bool:
            return condition(await get_lws(op, name), "Degraded") == "False"

        await wait_for(recovered, what="Degraded=False")
        assert len(await events(op, "GroupRecovered", name)) == 1
    finally:
        await remove(op, name)


async def test_counts_no_group_can_spend_are_dropped(operator: Operator) -> None:
    """A count survives the recreation it records; once a rollout has moved every group to a
    new revision the old revision's count goes (and the counted-leaders record with it), and a
    count of a group scaled away goes once the scale-down is done."""
    op, name = operator, "pruned"
    await op.kube.create(lws(name, replicas=2, size=2, template={"maxGroupRestarts": 3}),
                         op.namespace)

    async def annotations() -> dict[str, str]:
        return (await get_lws(op, name))["metadata"].get("annotations") or {}

    try:
        before = await settle(op, name, size=2)
        await fail_pod(op.kube, op.namespace, f"{name}-1-1")
        await settle(op, name, size=2, changed=group_pods(name, 1, 2), before=before)
        [old_key] = json.loads((await annotations())[P + "group-restart-counts"])
        assert old_key.endswith("/1")
        assert list(json.loads((await annotations())[P + "group-restart-counted-leaders"])) \
            == [old_key]
        # A new image: every group is replaced on a new revision.
        await op.kube.patch(API, KIND, name, {"spec": {"leaderWorkerTemplate": {
            "workerTemplate": {"spec": {"containers": [
                {"name": "engine", "image": "engine:v2"}]}}}}}, op.namespace)

        async def pruned() -> bool:
            got = await annotations()
            return not ({P + "group-restart-counts", P + "group-restart-counted-leaders"}
                        & set(got))

        await wait_for(pruned, timeout=120, what="the old revision's count dropped")
        # A count of the current revision on the group a scale-down removes goes with it.
        current = await settle(op, name, size=2)
        await fail_pod(op.kube, op.namespace, f"{name}-1-1")
        await settle(op, name, size=2, changed=group_pods(name, 1, 2), before=current)
        [new_key] = json.loads((await annotations())[P + "group-restart-counts"])
        assert new_key.endswith("/1")
        assert new_key.split("/")[0] != old_key.split("/")[0]
        await op.kube.patch(API, KIND, name, {"spec": {"replicas": 1}}, op.namespace)
        await wait_for(pruned, timeout=120, what="the scaled-away group's count dropped")
    finally:
        await remove(op, name)


async def test_scale_down_and_deletion_release_retained_groups(operator: Operator) -> None:
    """maxGroupRestarts 0: the first failure stops the group. Scale-down releases the retained
    group it removes; deleting the LeaderWorkerSet releases the rest."""
    op, name = operator, "nobudget"
    await op.kube.create(lws(name, replicas=3, template={"maxGroupRestarts": 0}), op.namespace)
    try:
        await settle(op, name, replicas=3)
        await restart_container(op.kube, op.namespace, f"{name}-2-1")
        await restart_container(op.kube, op.namespace, f"{name}-1-2")

        async def both_kept() -> bool:
            pods = await pods_of(op, name)
            return {group_of(p) for p in pods if retained(p)} == {"1", "2"}

        await wait_for(both_kept, what="groups 1 and 2 retained")
        assert not await events(op, "RecreateGroup", name)
        await op.kube.patch(API, KIND, name, {"spec": {"replicas": 2}}, op.namespace)

        async def group_two_gone() -> bool:
            groups = {group_of(p) for p in await pods_of(op, name)}
            return groups == {"0", "1"}

        await wait_for(group_two_gone, what="retained group 2 released by the scale-down")
        kept = [p for p in await pods_of(op, name) if group_of(p) == "1"]
        assert kept
        assert all(retained(p) for p in kept)
    finally:
        await remove(op, name)  # fails if the retained group 1 is not released


async def test_backoff_defers_a_recreation_until_the_group_is_old_enough(
        operator: Operator) -> None:
    """restartBackoff base 15 s: a worker deleted right after the group started recreates the
    group only once its leader is 15 s old, with a GroupRestartBackoff Event meanwhile."""
    op, name = operator, "backoff"
    await op.kube.create(lws(name, replicas=1, template={
        "restartBackoff": {"baseSeconds": 15, "capSeconds": 60}}), op.namespace)
    try:
        before = await settle(op, name, replicas=1)
        leader = await op.kube.get("v1", "Pod", f"{name}-0", op.namespace)
        assert leader is not None
        await op.kube.delete("v1", "Pod", f"{name}-0-1", op.namespace)

        async def deferred() -> list[dict[str, Any]]:
            return await events(op, "GroupRestartBackoff", name)

        [event] = await wait_for(deferred, what="GroupRestartBackoff")
        assert "restart count 0" in event["note"]
        # The leader stays while the delay runs.
        still = await op.kube.get("v1", "Pod", f"{name}-0", op.namespace)
        assert still is not None
        assert still["metadata"]["uid"] == leader["metadata"]["uid"]
        after = await settle(op, name, replicas=1, changed=group_pods(name, 0), before=before)
        assert after[f"{name}-0"] != leader["metadata"]["uid"]
        [recreate] = await events(op, "RecreateGroup", name)
        created = dt.datetime.fromisoformat(leader["metadata"]["creationTimestamp"])
        when = dt.datetime.fromisoformat(recreate["eventTime"])
        assert (when - created).total_seconds() >= 15
        counts = json.loads((await get_lws(op, name))["metadata"]["annotations"][
            P + "group-restart-counts"])
        assert list(counts.values()) == [1]
    finally:
        await remove(op, name)


async def test_after_start_waits_for_an_unschedulable_group(operator: Operator) -> None:
    """RecreateGroupAfterStart: a leader restart while its worker cannot be scheduled does not
    recreate the group; it is reported by a GroupUnschedulable Warning and on Progressing."""
    op, name = operator, "unplaceable"
    worker = {"containers": [{"name": "engine", "image": "engine:v1", "resources": {
        "limits": {"nvidia.com/gpu": 64}}}]}
    await op.kube.create(lws(name, replicas=1, size=2, template={
        "restartPolicy": "RecreateGroupAfterStart",
        "leaderTemplate": {"spec": {"containers": [{"name": "engine", "image": "engine:v1"}]}},
        "workerTemplate": {"spec": worker}}), op.namespace)
    try:
        async def leader_up_worker_stuck() -> dict[str, Any] | None:
            pods = {p["metadata"]["name"]: p for p in await pods_of(op, name)}
            leader, stuck = pods.get(f"{name}-0"), pods.get(f"{name}-0-1")
            if not (is_ready(leader) and stuck and condition(stuck, "PodScheduled") == "False"):
                return None
            return leader

        leader = await wait_for(leader_up_worker_stuck, what="leader Ready, worker unschedulable")
        assert leader is not None
        await restart_container(op.kube, op.namespace, f"{name}-0")

        async def warned() -> list[dict[str, Any]]:
            return await events(op, "GroupUnschedulable", name)

        [event] = await wait_for(warned, what="GroupUnschedulable")
        assert event["type"] == "Warning"
        assert f"{name}-0-1 cannot be scheduled" in event["note"]

        async def progressing() -> dict[str, Any] | None:
            got = await get_lws(op, name)
            cond = next((c for c in got.get("status", {}).get("conditions") or []
                         if c["type"] == "Progressing"), None)
            return cond if cond and cond["reason"] == "GroupUnschedulable" else None

        cond = await wait_for(progressing, what="Progressing reason GroupUnschedulable")
        assert cond is not None
        assert cond["message"] == "1 of 1 replicas cannot be scheduled"
        now = await op.kube.get("v1", "Pod", f"{name}-0", op.namespace)
        assert now is not None
        assert now["metadata"]["uid"] == leader["metadata"]["uid"]
        assert not now["metadata"].get("deletionTimestamp")
        assert not await events(op, "RecreateGroup", name)
    finally:
        await remove(op, name)


async def test_a_not_ready_node_recreates_its_groups_once(operator: Operator) -> None:
    """A node goes NotReady: once taint eviction deletes its pods, each group that had a pod
    there is rebuilt once, on other nodes; the other groups are untouched."""
    op, name = operator, "nodefail"
    await op.kube.create(lws(name, replicas=3), op.namespace)
    node = ""
    try:
        before = await settle(op, name, replicas=3)
        pods = await pods_of(op, name)
        node = next(p["spec"]["nodeName"] for p in pods if p["metadata"]["name"] == f"{name}-0-1")
        hit = {group_of(p) for p in pods if p["spec"]["nodeName"] == node}
        changed = set().union(*(group_pods(name, int(g)) for g in hit))
        await set_node_ready(op.kube, node, ready=False)
        await settle(op, name, replicas=3, changed=changed, before=before, timeout=150)
        # A group whose leader was evicted is rebuilt by the leader StatefulSet (no Event);
        # one that lost only workers is recreated by us: never more than once.
        notes = [e["note"] for e in await events(op, "RecreateGroup", name)]
        recreated = [n.rsplit(" ", 1)[-1] for n in notes]
        assert len(recreated) == len(set(recreated))
        assert set(recreated) <= hit
        workers_only = {group_of(p) for p in pods if p["spec"]["nodeName"] == node} - {
            group_of(p) for p in pods if p["spec"]["nodeName"] == node
            and p["metadata"]["labels"][P + "worker-index"] == "0"}
        assert workers_only <= set(recreated)
        moved = [p for p in await pods_of(op, name) if group_of(p) in hit]
        assert all(p["spec"]["nodeName"] != node for p in moved)
    finally:
        if node:
            await set_node_ready(op.kube, node, ready=True)
        await remove(op, name)


# ----------------------------------------------------------------------- termination policy

GRACE = 6


def slow_to_stop(name: str, policy: str) -> dict[str, Any]:
    """Pods that use their whole (6 s) grace period to stop, as the documented workloads do."""
    body = lws(name, replicas=1, pod={"terminationGracePeriodSeconds": GRACE},
               podTerminationPolicy=policy)
    body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"] = {
        "annotations": {STOP_AFTER_GRACE_ANNOTATION: "true"}}
    return body


def _ts(value: str) -> float:
    return dt.datetime.fromisoformat(value).timestamp()


async def deletion_requests(op: Operator, name: str, pods: set[str],
                            action: Callable[[], Awaitable[Any]]) -> dict[str, float]:
    """Run ``action``, then watch ``pods`` (by their current UIDs) until all are gone; for each,
    when its deletion was requested (deletionTimestamp minus the grace period)."""
    uids = {p["metadata"]["uid"]: p["metadata"]["name"] for p in await pods_of(op, name)
            if p["metadata"]["name"] in pods}
    seen: dict[str, float] = {}
    await action()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        current = {p["metadata"]["uid"]: p for p in await pods_of(op, name)}
        for uid, pod_name in uids.items():
            pod = current.get(uid)
            if pod is not None and pod["metadata"].get("deletionTimestamp"):
                seen.setdefault(pod_name, _ts(pod["metadata"]["deletionTimestamp"]) - GRACE)
        if not set(uids) & set(current):
            break
        await asyncio.sleep(0.25)
    assert set(seen) == pods, f"saw only {sorted(seen)} terminating"
    return seen


def worker_lag(requests: dict[str, float], leader: str) -> float:
    """How long after the leader's deletion the last worker's deletion was requested."""
    return max(t for n, t in requests.items() if n != leader) - requests[leader]


@pytest.mark.parametrize("policy", ["Sequential", "Parallel"])
async def test_termination_policy_orders_leader_and_workers(operator: Operator,
                                                            policy: str) -> None:
    """A deleted leader (as kubectl, an eviction or a rollout deletes it): Sequential deletes
    the workers only once the leader is gone (a whole grace period later), Parallel at once.
    Deleting the LeaderWorkerSet follows the same order. The group rebuild time is printed."""
    op, name = operator, f"stop-{policy.lower()}"
    await op.kube.create(slow_to_stop(name, policy), op.namespace)
    try:
        before = await settle(op, name, replicas=1)
        group = group_pods(name, 0)
        started = time.monotonic()
        requests = await deletion_requests(
            op, name, group, lambda: op.kube.delete("v1", "Pod", f"{name}-0", op.namespace))
        await settle(op, name, replicas=1, changed=group, before=before, timeout=120)
        rebuilt = time.monotonic() - started
        lag = worker_lag(requests, f"{name}-0")
        # deletionTimestamps have a resolution of one second.
        if policy == "Sequential":
            assert lag >= GRACE - 1
        else:
            assert lag <= 2
        requests = await deletion_requests(
            op, name, group, lambda: op.kube.delete(API, KIND, name, op.namespace))
        deletion_lag = worker_lag(requests, f"{name}-0")
        if policy == "Sequential":
            assert deletion_lag >= GRACE - 1
        else:
            assert deletion_lag <= 2
        print(f"\n{policy}: group rebuilt in {rebuilt:.1f}s after its leader was deleted "
              f"(grace {GRACE}s; workers deleted {lag:.0f}s after the leader; on LWS deletion "
              f"{deletion_lag:.0f}s)")
    finally:
        await remove(op, name)


@pytest.mark.parametrize("policy", ["Sequential", "Parallel"])
async def test_a_recreated_group_stops_its_workers_with_the_leader(operator: Operator,
                                                                   policy: str) -> None:
    """A restart-triggered recreation deletes the leader with foreground propagation, so the
    garbage collector deletes the workers at once even under Sequential; Parallel deletes
    their StatefulSet itself as soon as the leader terminates. The group comes back whole
    either way; the rebuild time is printed."""
    op, name = operator, f"recreate-{policy.lower()}"
    await op.kube.create(slow_to_stop(name, policy), op.namespace)
    try:
        before = await settle(op, name, replicas=1)
        group = group_pods(name, 0)
        started = time.monotonic()
        requests = await deletion_requests(
            op, name, group, lambda: restart_container(op.kube, op.namespace, f"{name}-0-2"))
        await settle(op, name, replicas=1, changed=group, before=before, timeout=120)
        lag = worker_lag(requests, f"{name}-0")
        print(f"\n{policy}, restart-triggered: group rebuilt in "
              f"{time.monotonic() - started:.1f}s (workers deleted {lag:.0f}s after the leader)")
        assert lag <= 2
        assert len(await events(op, "RecreateGroup", name)) == 1
    finally:
        await remove(op, name)
