"""Hash group identity end to end (LWS docs "Group Identity", "Group Replacement", the Hash-mode
rollout trace): the leader Deployment, random group keys and host names, the
group-ready readiness gate, replacement pacing under PostTermination and Immediate, scale-down
that sheds the broken group, and the restart budget carried across a replacement.

Pacing is checked on snapshots polled through each scenario: a group "holds capacity" while it
is ungated and live, or tearing down (some pod left, leader terminating or gone). PostTermination
promises that a replacement never schedules onto capacity its predecessor still holds.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.cluster.faults import fail_pod
from e2e.cluster.stages import STOP_AFTER_GRACE_ANNOTATION
from e2e.harness.converge import converged, get_lws, pods_of, remove
from e2e.harness.launcher import Operator, start_controllers
from e2e.kube import condition, is_ready, polling, wait_for

pytestmark = pytest.mark.full

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"
GATE = P + "group-replacement"
READY_GATE = P + "group-ready"
# Five whole 8-GPU nodes: rack-3 and one more; a group of size 2 takes two of them.
SMALL_POOL = ["gpu-node-011", "gpu-node-012", "gpu-node-013", "gpu-node-014", "gpu-node-015"]


def hash_lws(name: str, replicas: int = 2, size: int = 3, *, image: str = "engine:v1",
             grace: int | None = None, whole_nodes: bool = False,
             template: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    pod: dict[str, Any] = {"containers": [{"name": "engine", "image": image}]}
    meta: dict[str, Any] = {}
    if grace is not None:
        # Pods take their whole grace period to stop, so tearing down is observable.
        pod["terminationGracePeriodSeconds"] = grace
        meta = {"annotations": {STOP_AFTER_GRACE_ANNOTATION: "true"}}
    if whole_nodes:
        pod["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
        pod["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{
                "key": "kubernetes.io/hostname", "operator": "In", "values": SMALL_POOL}]}]}}}
    lwt: dict[str, Any] = {"size": size, "workerTemplate": {"metadata": meta, "spec": pod},
                           **(template or {})}
    return {"apiVersion": API, "kind": KIND, "metadata": {"name": name},
            "spec": {"replicas": replicas, "groupIdentity": "Hash",
                     "leaderWorkerTemplate": lwt, **spec}}


def labels(pod: dict[str, Any]) -> dict[str, str]:
    return dict(pod["metadata"].get("labels") or {})


def is_leader(pod: dict[str, Any]) -> bool:
    return labels(pod).get(P + "worker-index") == "0"


def terminating(pod: dict[str, Any]) -> bool:
    return bool(pod["metadata"].get("deletionTimestamp"))


def gated(pod: dict[str, Any]) -> bool:
    return any(g.get("name") == GATE for g in pod["spec"].get("schedulingGates") or [])


def key_of(pod: dict[str, Any]) -> str:
    return labels(pod)[P + "group-key"]


def revision_of(pod: dict[str, Any]) -> str:
    return labels(pod)[P + "template-revision-hash"]


class Groups:
    """One snapshot of a Hash LeaderWorkerSet's groups, by group key."""

    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        live_leaders = {key_of(p): p for p in pods if is_leader(p) and not terminating(p)}
        self.leaders = live_leaders
        self.tearing_down = {key_of(p) for p in pods if key_of(p) not in live_leaders}
        self.gated = {k for k, p in live_leaders.items() if gated(p)}
        self.ungated = set(live_leaders) - self.gated

    def ready(self, size: int) -> set[str]:
        """Group keys whose leader and all workers are live and Ready."""
        out = set()
        for key in self.ungated:
            members = [p for p in self.pods if key_of(p) == key and not terminating(p)]
            if len(members) == size and all(is_ready(p) for p in members):
                out.add(key)
        return out

    def holding(self) -> int:
        """Groups holding capacity: live and ungated, or tearing down."""
        return len(self.ungated) + len(self.tearing_down)


def describe(s: Groups, old_keys: set[str]) -> str:
    """A snapshot as the LWS docs' trace table writes a stage: old and new groups, each
    tearing down, gated, Ready or progressing."""
    ready = s.ready(2)

    def mark(key: str) -> str:
        if key in s.tearing_down:
            return "torn"
        if key in s.gated:
            return "gated"
        return "ready" if key in ready else "progressing"

    keys = sorted({*s.leaders, *s.tearing_down})
    old = [f"{k[:4]} {mark(k)}" for k in keys if k in old_keys]
    new = [f"{k[:4]} {mark(k)}" for k in keys if k not in old_keys]
    return f"old [{', '.join(old)}] new [{', '.join(new)}]"


async def snapshot(op: Operator, name: str) -> Groups:
    return Groups(await pods_of(op, name))


async def ready_groups(op: Operator, name: str, replicas: int, size: int,
                       revision: str | None = None) -> Groups | None:
    groups = await snapshot(op, name)
    ready = groups.ready(size)
    if (len(groups.leaders) == replicas and ready == set(groups.leaders)
            and not groups.tearing_down
            and (revision is None or all(revision_of(p) == revision
                                         for p in groups.leaders.values()))):
        return groups
    return None


async def settle(op: Operator, name: str, replicas: int, size: int,
                 revision: str | None = None, timeout: float = 120,  # noqa: ASYNC109
                 ) -> Groups:
    async def probe() -> Groups | None:
        return await ready_groups(op, name, replicas, size, revision)

    out = await wait_for(probe, timeout=timeout, what=f"{name}: {replicas} Hash groups Ready")
    assert out is not None
    return out


@contextlib.asynccontextmanager
async def recording(op: Operator, name: str) -> AsyncIterator[list[Groups]]:
    """Snapshots of the groups every 0.2 s for the duration of the block."""
    seen: list[Groups] = []

    async def probe() -> None:
        seen.append(await snapshot(op, name))

    async with polling(probe):
        yield seen


def env_of(pod: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e.get("value", "") for e in pod["spec"]["containers"][0].get("env") or []}


async def test_hash_groups_get_random_keys_host_names_and_a_group_ready_gate(
        operator: Operator) -> None:
    op = operator
    name = "hashed"
    await op.kube.create(hash_lws(name, replicas=2, size=3, rolloutStrategy={
        "type": "RollingUpdate",
        "rollingUpdateConfiguration": {"maxUnavailable": "50%", "maxSurge": 1}}), op.namespace)
    try:
        groups = await settle(op, name, replicas=2, size=3)
        deployment = await op.kube.get("apps/v1", "Deployment", name, op.namespace)
        assert deployment is not None
        assert deployment["spec"]["replicas"] == 2
        assert deployment["spec"]["strategy"]["rollingUpdate"] == {
            "maxUnavailable": "50%", "maxSurge": 1}
        assert deployment["metadata"]["ownerReferences"][0]["kind"] == KIND
        assert await op.kube.get("apps/v1", "StatefulSet", name, op.namespace) is None
        for key, leader in groups.leaders.items():
            assert len(key) == 40
            assert int(key, 16) >= 0
            host = f"{name}-{key[:8]}"
            assert labels(leader)[P + "group-index"] == key[:8]
            assert leader["metadata"]["name"].startswith(f"{name}-")
            assert leader["metadata"]["name"] != host
            assert leader["spec"]["hostname"] == host
            assert leader["spec"]["subdomain"] == name
            assert not gated(leader)
            assert {"conditionType": READY_GATE} in leader["spec"]["readinessGates"]
            assert condition(leader, READY_GATE) == "True"
            sts = await op.kube.get("apps/v1", "StatefulSet", host, op.namespace)
            assert sts is not None
            assert sts["metadata"]["ownerReferences"][0]["uid"] == leader["metadata"]["uid"]
            workers = sorted(p["metadata"]["name"] for p in groups.pods
                             if key_of(p) == key and not is_leader(p))
            assert workers == [f"{host}-1", f"{host}-2"]
            address = f"{host}.{name}.{op.namespace}"
            assert env_of(leader)["LWS_LEADER_ADDRESS"] == address
            for worker in (p for p in groups.pods if key_of(p) == key and not is_leader(p)):
                assert env_of(worker)["LWS_LEADER_ADDRESS"] == address
                assert worker["spec"]["subdomain"] == name
        service = await op.kube.get("v1", "Service", name, op.namespace)
        assert service is not None
        assert service["spec"]["publishNotReadyAddresses"] is True

        async def available() -> dict[str, Any] | None:
            got = await get_lws(op, name)
            status = got.get("status") or {}
            return got if (condition(got, "Available") == "True"
                           and status.get("readyReplicas") == 2
                           and status.get("replicas") == 2) else None

        await wait_for(available, timeout=30, what="LWS Available with 2 ready groups")
    finally:
        await remove(op, name)


async def versions(op: Operator, name: str) -> dict[str, str]:
    """kind/name -> resourceVersion of everything the operator writes for one set (the LWS,
    its Deployment, ControllerRevisions, Services, worker StatefulSets), and each pod's
    group-ready condition: an unchanged map means the operator wrote nothing for it."""
    selector = f"{P}name={name}"
    out: dict[str, str] = {}
    lws = await get_lws(op, name)
    out[f"LeaderWorkerSet/{name}"] = lws["metadata"]["resourceVersion"]
    for api, kind in (("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
                      ("apps/v1", "ControllerRevision"), ("v1", "Service")):
        for obj in await op.kube.list(api, kind, op.namespace, label_selector=selector):
            out[f"{kind}/{obj['metadata']['name']}"] = obj["metadata"]["resourceVersion"]
    for pod in await pods_of(op, name):
        for c in pod["status"].get("conditions") or []:
            if c["type"] == READY_GATE:
                out[f"Pod/{pod['metadata']['uid']}"] = f"{c['status']}@{c['lastTransitionTime']}"
    return out


async def test_a_hash_set_at_rest_and_a_restarted_operator_write_nothing(
        operator: Operator) -> None:
    """Passes over a settled Hash set (woken by pod label changes) write nothing for it, and a
    second operator instance priming its caches against it (a restart, an upgrade) writes
    nothing and replaces no pod. Checked on the objects: the operator's own counters also count
    other namespaces' sets, which earlier modules may leave terminating."""
    op = operator
    name = "hash-rest"
    await op.kube.create(hash_lws(name, replicas=2, size=2), op.namespace)
    try:
        groups = await settle(op, name, replicas=2, size=2)

        async def stable() -> dict[str, str] | None:
            """The versions once they held for 2 s (status catches up after the pods)."""
            first = await versions(op, name)
            await asyncio.sleep(2)
            return first if await versions(op, name) == first else None

        before = await wait_for(stable, timeout=60, what="the set to stop changing")
        for pod in groups.pods:  # wakes a pass per pod event
            await op.kube.patch("v1", "Pod", pod["metadata"]["name"],
                                {"metadata": {"labels": {"poke": "1"}}}, op.namespace)
        await asyncio.sleep(3)
        assert await versions(op, name) == before
        second = await start_controllers(op.kubeconfig, workers=2)

        async def primed() -> bool:
            runtime = second.runtime
            return (runtime.cache.synced and len(runtime.queue) == 0
                    and not runtime.queue.processing())

        await wait_for(primed, timeout=60, what="the second instance's passes")
        await asyncio.sleep(2)
        await second.close()
        assert await versions(op, name) == before
        after = await snapshot(op, name)
        assert {p["metadata"]["uid"] for p in after.pods} == {
            p["metadata"]["uid"] for p in groups.pods}
    finally:
        await remove(op, name)


async def test_a_group_of_one_has_no_gate_and_no_worker_statefulset(operator: Operator) -> None:
    op = operator
    name = "hashed-single"
    await op.kube.create(hash_lws(name, replicas=2, size=1), op.namespace)
    try:
        groups = await settle(op, name, replicas=2, size=1)
        for leader in groups.leaders.values():
            assert not leader["spec"].get("readinessGates")
        statefulsets = await op.kube.list("apps/v1", "StatefulSet", op.namespace,
                                          label_selector=f"{P}name={name}")
        assert statefulsets == []
    finally:
        await remove(op, name)


async def test_the_guides_hash_rollout_trace(operator: Operator) -> None:
    """2 replicas, maxUnavailable 1, maxSurge 1, PostTermination: the replacement stays gated
    while the group it replaces tears down; never more than replicas + maxSurge groups hold
    capacity; the rollout ends with two new, Ready groups."""
    op = operator
    name = "hash-trace"
    strategy = {"type": "RollingUpdate",
                "rollingUpdateConfiguration": {"maxUnavailable": 1, "maxSurge": 1}}
    await op.kube.create(hash_lws(name, replicas=2, size=2, grace=3,
                                  rolloutStrategy=strategy), op.namespace)
    try:
        before = await settle(op, name, replicas=2, size=2)
        old_keys = set(before.leaders)
        old_revision = revision_of(next(iter(before.leaders.values())))
        async with recording(op, name) as seen:
            await op.kube.patch(API, KIND, name, {"spec": {"leaderWorkerTemplate": {
                "workerTemplate": {"spec": {"containers": [
                    {"name": "engine", "image": "engine:v2"}]}}}}}, op.namespace)

            async def rolled() -> Groups | None:
                groups = await ready_groups(op, name, 2, 2)
                return groups if groups and not set(groups.leaders) & old_keys else None

            after = await wait_for(rolled, timeout=180, what="rollout to two new groups")
            assert after is not None
        new_revision = revision_of(next(iter(after.leaders.values())))
        assert new_revision != old_revision
        assert not set(after.leaders) & old_keys  # identities are never reused
        timeline = [describe(s, old_keys) for s in seen]
        timeline = [t for i, t in enumerate(timeline) if i == 0 or t != timeline[i - 1]]
        print("Hash rollout stages:", *timeline, sep="\n  ")
        assert max(s.holding() for s in seen) <= 3, timeline
        def new_keys(s: Groups) -> set[str]:
            return {k for k, p in s.leaders.items() if revision_of(p) == new_revision}

        # The Deployment controller decides how its two ReplicaSets step (kube-controller-manager
        # may scale the old one down together with the surge or only once the surge is Ready),
        # so the stages are checked as the guarantees the docs' table illustrates:
        # stage 2, a replacement waits gated while an old group tears down;
        assert any(s.tearing_down & old_keys and new_keys(s) & s.gated for s in seen), timeline
        # stages 2-4, availability never drops below replicas - maxUnavailable = 1 group;
        assert all(s.ready(2) for s in seen), timeline
        # and a replacement is admitted only as capacity frees: never more than
        # replicas + maxSurge = 3 groups hold capacity (checked above).
        # The status counters follow the groups within the operator's status coalescing window
        # (counters wait until the set is still), so they are awaited, not read at once.
        await converged(op, name, replicas=2, size=2, timeout=30)

    finally:
        await remove(op, name)


async def _make_unready(op: Operator, pod: str) -> None:
    """A worker whose readiness probe fails: Ready False while Running."""
    current = await op.kube.get("v1", "Pod", pod, op.namespace)
    assert current is not None
    conditions = [c for c in current["status"]["conditions"]
                  if c["type"] not in ("Ready", "ContainersReady")]
    conditions += [{"type": "Ready", "status": "False"},
                   {"type": "ContainersReady", "status": "False"}]
    statuses = [{**s, "ready": False} for s in current["status"].get("containerStatuses") or []]
    await op.kube.patch("v1", "Pod", pod, {"status": {"conditions": conditions,
                                                      "containerStatuses": statuses}},
                        op.namespace, subresource="status")


async def test_scale_down_removes_the_broken_group(operator: Operator) -> None:
    op = operator
    name = "hash-scale"
    await op.kube.create(hash_lws(name, replicas=3, size=2, template={
        "restartPolicy": "None"}), op.namespace)
    try:
        groups = await settle(op, name, replicas=3, size=2)
        broken = sorted(groups.leaders)[1]
        host = f"{name}-{broken[:8]}"
        await _make_unready(op, f"{host}-1")

        async def leader_unready() -> bool:
            leader = await op.kube.get("v1", "Pod", groups.leaders[broken]["metadata"]["name"],
                                       op.namespace)
            return (leader is not None and condition(leader, READY_GATE) == "False"
                    and not is_ready(leader))

        await wait_for(leader_unready, timeout=30, what="broken group's leader not Ready")
        healthy = {p["metadata"]["uid"] for p in groups.pods if key_of(p) != broken}
        await op.kube.patch(API, KIND, name, {"spec": {"replicas": 2}}, op.namespace)
        after = await settle(op, name, replicas=2, size=2)
        assert broken not in after.leaders
        assert {p["metadata"]["uid"] for p in after.pods} == healthy
    finally:
        await remove(op, name)


async def _replacement_timeline(op: Operator, name: str, policy: str) -> tuple[
        list[Groups], set[str], set[str]]:
    """Fill four of five whole nodes with two groups of two, fail a worker, and record until
    the group is replaced and Ready again. Returns the snapshots, the failed group's pod names
    and the leaders from before."""
    await op.kube.create(hash_lws(name, replicas=2, size=2, grace=4, whole_nodes=True,
                                  groupReplacementPolicy=policy), op.namespace)
    groups = await settle(op, name, replicas=2, size=2)
    victim = sorted(groups.leaders)[0]
    old_pods = {p["metadata"]["name"] for p in groups.pods if key_of(p) == victim}
    before = {p["metadata"]["name"] for p in groups.leaders.values()}
    async with recording(op, name) as seen:
        await fail_pod(op.kube, op.namespace, f"{name}-{victim[:8]}-1")

        async def replaced() -> Groups | None:
            now = await ready_groups(op, name, 2, 2)
            return now if now and victim not in now.leaders else None

        await wait_for(replaced, timeout=120, what=f"{name}: failed group replaced")
    return seen, old_pods, before


def _scheduled_while_predecessor_lived(seen: list[Groups], old_pods: set[str],
                                       before: set[str]) -> bool:
    """Whether a new leader had a node while a pod of the failed group still existed."""
    for s in seen:
        if not {p["metadata"]["name"] for p in s.pods} & old_pods:
            continue
        if any(leader["spec"].get("nodeName") for leader in s.leaders.values()
               if leader["metadata"]["name"] not in before):
            return True
    return False


async def test_post_termination_waits_for_the_predecessor_on_a_full_cluster(
        operator: Operator) -> None:
    op = operator
    name = "hash-post"
    try:
        seen, old_pods, before = await _replacement_timeline(op, name, "PostTermination")
        assert not _scheduled_while_predecessor_lived(seen, old_pods, before)
        assert any(s.gated and s.tearing_down for s in seen)  # it did wait, gated
    finally:
        await remove(op, name)


async def test_immediate_schedules_the_replacement_at_once(operator: Operator) -> None:
    op = operator
    name = "hash-now"
    try:
        seen, old_pods, before = await _replacement_timeline(op, name, "Immediate")
        assert _scheduled_while_predecessor_lived(seen, old_pods, before)
    finally:
        await remove(op, name)


async def count_moved(op: Operator, name: str, old: str, revision: str,
                      count: int) -> dict[str, int] | None:
    """The restart counts once group ``old`` is replaced by a Ready group that carries
    ``count`` on ``revision``, and nothing else does."""
    now = await ready_groups(op, name, 1, 2)
    if not now or old in now.leaders:
        return None
    got = await get_lws(op, name)
    raw = (got["metadata"].get("annotations") or {}).get(P + "group-restart-counts")
    found = json.loads(raw) if raw else {}
    (new,) = now.leaders
    return found if found == {f"{revision}/{new[:8]}": count} else None


async def test_the_restart_budget_follows_the_replacement(operator: Operator) -> None:
    op = operator
    name = "hash-budget"
    await op.kube.create(hash_lws(name, replicas=1, size=2, template={
        "maxGroupRestarts": 5, "restartBackoff": {"baseSeconds": 1, "capSeconds": 1}}),
        op.namespace)
    try:
        counts: dict[str, int] = {}
        for round_ in (1, 2):
            groups = await settle(op, name, replicas=1, size=2)
            (key,) = groups.leaders
            revision = revision_of(groups.leaders[key])
            await asyncio.sleep(1.5)  # past the backoff, measured from the leader's creation
            await fail_pod(op.kube, op.namespace, f"{name}-{key[:8]}-1")

            found = await wait_for(functools.partial(count_moved, op, name, key, revision, round_),
                                   timeout=90, what=f"count {round_} moved to the replacement")
            assert found is not None
            counts = found
        assert list(counts.values()) == [2]
    finally:
        await remove(op, name)


async def test_hash_groups_with_native_gang_scheduling(operator: Operator) -> None:
    """Replica-level gangs in Hash mode: one PodGroup per group, named with the group key's
    prefix; a leader leaves the gate only once admitted and its PodGroup exists."""
    op = operator
    name = "hash-gang"
    body = hash_lws(name, replicas=2, size=2)
    body["spec"]["scheduling"] = {}
    await op.kube.create(body, op.namespace)
    try:
        groups = await settle(op, name, replicas=2, size=2)
        pod_groups = [g for g in await op.kube.list(
            "scheduling.k8s.io/v1beta1", "PodGroup", op.namespace,
            label_selector=f"{P}name={name}") if not g["metadata"].get("deletionTimestamp")]
        names = {g["metadata"]["name"] for g in pod_groups}
        assert len(names) == 2
        for key in groups.leaders:
            members = [p for p in groups.pods if key_of(p) == key]
            (group_name,) = {p["spec"]["schedulingGroup"]["podGroupName"] for p in members}
            assert group_name in names
            assert f"-{key[:8]}-" in group_name
    finally:
        await remove(op, name)
