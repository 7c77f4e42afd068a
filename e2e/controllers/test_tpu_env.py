"""End to end on the full tier: the TPU environment of every pod.

Upstream's TPU template (the sample's) in both subgroup policy types, then a ``subdomainPolicy``
change each way; every pod's environment is compared with the exact list upstream's
accelerators/tpu.go, AddLWSVariables (pod_utils.go) and the
LWS docs give: the three LWS variables first, then ``TPU_WORKER_HOSTNAMES``, ``TPU_WORKER_ID``,
``TPU_NAME``, ``TPU_PROCESS_ADDRESSES`` and ``TPU_PROCESS_PORT`` (8476). When the leader requests
TPUs it is TPU worker 0 and its host name comes first; workers are 1..size-1. The expected
values are computed from that text by ``e2e.harness.tpu`` (shared with test_upstream_samples.py),
not by ``lws_operator.logic.mutation.tpu``.

Before the fix the pod cache dropped the leader's containers, so the operator never marked the
worker template ``leader-requests-tpus``: workers of the sample got ids 0..2 and host lists
without their leader, and the same after every roll.

The upstream sample itself, applied unchanged, is test_upstream_samples.py's: it checks the exact
environment of all 12 pods, that each runs on a TPU host, and ``leader-requests-tpus`` on every
worker pod and worker StatefulSet template, so this module no longer applies it.

Capacity: the pods select ``cloud.google.com/gke-tpu-topology: 4x4`` and
``cloud.google.com/gke-tpu-accelerator: tpu-v5-lite-podslice``, which the default kwok TPU pool
carries, and each requests ``google.com/tpu: 4``, a whole host; the cases here need four at a
time, all of the default layout's four. This module adds eight more for its own duration (named
apart from the other modules' nodes), so a roll's new pods need not wait for the old ones'
hosts, rather than growing the layout every test pays for.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from e2e.harness.launcher import Operator
from e2e.harness.tpu import EnvVar, extra_tpu_nodes, lws_env, settled, slice_env
from e2e.kube import MERGE_PATCH, wait_for

pytestmark = pytest.mark.full

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"
# Upstream's sample, as the repository keeps it (test_upstream_samples.py checks the copy).
SAMPLE = Path(__file__).parent / "upstream_samples" / "leaderworkerset_tpu.yaml"
EXTRA_NODES = [f"tpu-env-node-{i:03d}" for i in range(8)]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def tpu_pool(operator: Operator) -> AsyncIterator[Operator]:
    """The operator, with eight more 4-chip TPU hosts in the sample's 4x4 pool while the module
    runs."""
    async with extra_tpu_nodes(operator.kube, EXTRA_NODES):
        yield operator


def expected_env(lws: str, ns: str, group: int, worker: int, size: int, subdomain: str,
                 tpu: tuple[list[int], int] | None) -> list[EnvVar]:
    """Upstream's three LWS variables, then (``tpu`` = the pod's slice as worker
    indices, where 0 is the leader, and its id within it) the five of upstream's
    accelerators/tpu.go for its one TPU container."""
    env = lws_env(lws, ns, group, worker, size, subdomain)
    if tpu is None:
        return env
    members, tpu_id = tpu
    return [*env, *slice_env(f"{lws}-{group}", subdomain, members, tpu_id)]


def env_of(pod: dict[str, Any]) -> list[list[EnvVar]]:
    """Each container's env, exactly as the pod has it."""
    return [c.get("env") or [] for c in pod["spec"]["containers"]]


def position(pod: dict[str, Any]) -> tuple[int, int]:
    labels = pod["metadata"]["labels"]
    return int(labels[P + "group-index"]), int(labels[P + "worker-index"])


async def remove(op: Operator, name: str) -> None:
    await op.kube.delete(API, KIND, name, op.namespace)

    async def gone() -> bool:
        return (await op.kube.get(API, KIND, name, op.namespace) is None
                and not await op.kube.list("v1", "Pod", op.namespace,
                                           label_selector=f"{P}name={name}"))

    await wait_for(gone, timeout=120, what=f"{name} and its pods to be gone")


def sample() -> dict[str, Any]:
    return dict(yaml.safe_load(SAMPLE.read_text()))


def small(name: str, replicas: int, size: int, **template: Any) -> dict[str, Any]:
    """The sample's TPU template in a smaller set."""
    body = sample()
    body["metadata"]["name"] = name
    body["spec"]["replicas"] = replicas
    body["spec"]["leaderWorkerTemplate"]["size"] = size
    body["spec"]["leaderWorkerTemplate"].update(template)
    return body


async def worker_template_annotations(op: Operator, leader: str) -> dict[str, str]:
    sts = await op.kube.get("apps/v1", "StatefulSet", leader, op.namespace)
    assert sts is not None
    return dict(sts["spec"]["template"]["metadata"]["annotations"])


async def test_leader_worker_subgroups(tpu_pool: Operator) -> None:
    """Size 4 in subgroups of 2, every pod on TPUs: the leader and worker 1 are one slice,
    workers 2 and 3 another (the LWS docs' LeaderWorker partitioning; upstream's accelerators/tpu.go
    with subgroups)."""
    op, ns = tpu_pool, tpu_pool.namespace
    body = small("tpu-leader-worker", 1, 4, subGroupPolicy={
        "subGroupPolicyType": "LeaderWorker", "subGroupSize": 2})
    await op.kube.create(body, ns)
    try:
        pods = await settled(op, "tpu-leader-worker", 1, 4)
        slices = {0: ([0, 1], 0), 1: ([0, 1], 1), 2: ([2, 3], 0), 3: ([2, 3], 1)}
        for pod in pods:
            group, worker = position(pod)
            assert pod["metadata"]["labels"][P + "subgroup-index"] == str(worker // 2)
            assert env_of(pod) == [expected_env("tpu-leader-worker", ns, group, worker, 4,
                                                "tpu-leader-worker", slices[worker])]
        annotations = await worker_template_annotations(op, "tpu-leader-worker-0")
        assert annotations[P + "leader-requests-tpus"] == "true"
    finally:
        await remove(op, "tpu-leader-worker")


async def test_leader_excluded_subgroups(tpu_pool: Operator) -> None:
    """Size 5 in subgroups of 2, LeaderExcluded, a CPU leader (a LeaderExcluded leader that
    requests TPUs is rejected at admission, as upstream does): workers 1-2 and 3-4 are the
    slices, ids counted from the first worker; the leader has no TPU variables."""
    op, ns = tpu_pool, tpu_pool.namespace
    body = small("tpu-leader-excluded", 1, 5, subGroupPolicy={
        "subGroupPolicyType": "LeaderExcluded", "subGroupSize": 2})
    leader = copy.deepcopy(body["spec"]["leaderWorkerTemplate"]["workerTemplate"])
    leader["spec"].pop("nodeSelector")
    leader["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}
    body["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = leader
    await op.kube.create(body, ns)
    try:
        pods = await settled(op, "tpu-leader-excluded", 1, 5)
        for pod in pods:
            group, worker = position(pod)
            labels = pod["metadata"]["labels"]
            if worker == 0:
                assert P + "subgroup-index" not in labels
                tpu = None
            else:
                assert labels[P + "subgroup-index"] == str((worker - 1) // 2)
                first = 1 if worker <= 2 else 3
                tpu = ([first, first + 1], (worker - 1) % 2)
            assert env_of(pod) == [expected_env("tpu-leader-excluded", ns, group, worker, 5,
                                                "tpu-leader-excluded", tpu)]
        annotations = await worker_template_annotations(op, "tpu-leader-excluded-0")
        assert P + "leader-requests-tpus" not in annotations
    finally:
        await remove(op, "tpu-leader-excluded")


async def test_subdomain_policy_change_rolls_to_the_right_env(tpu_pool: Operator) -> None:
    """Shared, then UniquePerReplica (each group its own subdomain, named after its leader),
    then Shared again: after each roll every pod's hosts are under its new subdomain."""
    op, ns = tpu_pool, tpu_pool.namespace
    name = "tpu-subdomain"
    await op.kube.create(small(name, 2, 2), ns)
    try:
        key: str | None = None
        for policy in ("Shared", "UniquePerReplica", "Shared"):
            if key is not None:
                await op.kube.patch(API, KIND, name, {"spec": {"networkConfig": {
                    "subdomainPolicy": policy}}}, ns, content_type=MERGE_PATCH)
            pods = await settled(op, name, 2, 2, after=key)
            for pod in pods:
                group, worker = position(pod)
                subdomain = name if policy == "Shared" else f"{name}-{group}"
                assert pod["spec"]["subdomain"] == subdomain
                assert env_of(pod) == [expected_env(name, ns, group, worker, 2, subdomain,
                                                    ([0, 1], worker))], (policy, pod["metadata"])
            key = pods[0]["metadata"]["labels"][P + "template-revision-hash"]
    finally:
        await remove(op, name)
