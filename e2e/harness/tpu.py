"""What the full-tier tests of the TPU environment and of upstream's samples share
(test_tpu_env.py, test_upstream_samples.py): TPU hosts added for a while, waiting for a set to
settle, and the environment upstream's accelerators/tpu.go and AddLWSVariables (pod_utils.go)
give a pod.

The expected environment is computed here from upstream's rules, never by
``lws_operator.logic``: the tests compare the operator's pods against it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from e2e.cluster.nodes import HOSTNAME_LABEL, NodeLayout, node_manifests
from e2e.harness.launcher import Operator
from e2e.kube import Kube, condition, is_ready, wait_for

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"
TPU = "google.com/tpu"
TPU_PORT = 8476  # upstream's tpu.go: the first TPU container's process port

EnvVar = dict[str, str]


@asynccontextmanager
async def extra_tpu_nodes(kube: Kube, names: Sequence[str]) -> AsyncIterator[None]:
    """Nodes ``names``, each a 4-chip TPU host like the default layout's (same pool, topology
    and accelerator labels), Ready inside the block and deleted after it."""
    created = []
    try:
        for name, node in zip(names, node_manifests(NodeLayout(gpu_nodes=0,
                                                               tpu_nodes=len(names))),
                              strict=True):
            node["metadata"]["name"] = name
            node["metadata"]["labels"][HOSTNAME_LABEL] = name
            await kube.create(node)
            created.append(name)

        async def ready() -> bool:
            nodes = [await kube.get("v1", "Node", n) for n in names]
            return all(condition(node, "Ready") == "True" for node in nodes)

        await wait_for(ready, timeout=60, what="the extra TPU nodes to be Ready")
        yield
    finally:
        for name in created:
            await kube.delete("v1", "Node", name)


async def settled(op: Operator, name: str, replicas: int, size: int,
                  after: str | None = None) -> list[dict[str, Any]]:
    """The pods once every group is ready on the leader StatefulSet's revision (one other than
    ``after``, when given: a roll has finished) and the status says so (``replicas``,
    ``readyReplicas``, ``updatedReplicas``, Available); none of them being deleted."""

    async def probe() -> list[dict[str, Any]] | None:
        lws = await op.kube.get(API, KIND, name, op.namespace)
        sts = await op.kube.get("apps/v1", "StatefulSet", name, op.namespace)
        if lws is None or sts is None:
            return None
        key = sts["metadata"]["labels"].get(P + "template-revision-hash")
        status = lws.get("status") or {}
        pods = await op.kube.list("v1", "Pod", op.namespace, label_selector=f"{P}name={name}")
        if (key != after and status.get("readyReplicas") == replicas
                and status.get("updatedReplicas") == replicas
                and status.get("replicas") == replicas
                and condition(lws, "Available") == "True" and len(pods) == replicas * size
                and all(is_ready(p) and not p["metadata"].get("deletionTimestamp")
                        and p["metadata"]["labels"].get(P + "template-revision-hash") == key
                        for p in pods)):
            return pods
        return None

    pods = await wait_for(probe, timeout=180, what=f"{name} to settle")
    assert pods is not None
    return pods


def requests_tpus(template: dict[str, Any]) -> list[int]:
    """Positions (regular containers first, then init containers) of the containers asking for
    a non-zero ``google.com/tpu`` in limits or, without limits, requests (upstream's tpu.go)."""
    spec = template.get("spec") or {}
    out = []
    for i, c in enumerate([*(spec.get("containers") or []), *(spec.get("initContainers") or [])]):
        resources = c.get("resources") or {}
        amounts = resources.get("limits") or {}
        if TPU not in amounts:
            amounts = resources.get("requests") or {}
        if str(amounts.get(TPU, "0")) not in ("0", ""):
            out.append(i)
    return out


def lws_env(lws: str, ns: str, group: int, worker: int, size: int,
            subdomain: str | None = None) -> list[EnvVar]:
    """Upstream's AddLWSVariables (pod_utils.go): the three variables every container gets first
    (subdomain ``lws`` by default: the Shared policy)."""
    return [{"name": "LWS_LEADER_ADDRESS", "value": f"{lws}-{group}.{subdomain or lws}.{ns}"},
            {"name": "LWS_GROUP_SIZE", "value": str(size)},
            {"name": "LWS_WORKER_INDEX", "value": str(worker)}]


def slice_env(leader: str, subdomain: str, members: Sequence[int], tpu_worker: int,
              count: int = 1, position: int = 0) -> list[EnvVar]:
    """Upstream's tpu.go for TPU container ``position`` of ``count`` in the pod that is TPU
    worker ``tpu_worker`` of a slice made of the pods ``members`` (worker indices in the group of
    leader pod ``leader``; 0 is the leader), in upstream's order."""
    hosts = [f"{leader}.{subdomain}" if k == 0 else f"{leader}-{k}.{subdomain}"
             for k in members for _ in range(count)]
    ports = [TPU_PORT + j for j in range(count)]
    addresses = [f"{h}:{ports[i % count]}" for i, h in enumerate(hosts)]
    return [{"name": "TPU_WORKER_HOSTNAMES", "value": ",".join(hosts)},
            {"name": "TPU_WORKER_ID", "value": str(tpu_worker * count + position)},
            {"name": "TPU_NAME", "value": leader},
            {"name": "TPU_PROCESS_ADDRESSES", "value": ",".join(addresses)},
            {"name": "TPU_PROCESS_PORT", "value": str(ports[position])}]


def tpu_env(lws: str, group: int, worker: int, size: int, count: int, position: int,
            leader_requests: bool, subdomain: str | None = None) -> list[EnvVar]:
    """Upstream's tpu.go, no subgroups, for TPU container ``position`` of ``count`` in pod
    ``worker`` of ``group`` (subdomain ``lws`` by default: the Shared policy): the whole group is
    one slice, its leader the first member when it requests TPUs itself."""
    members = list(range(size) if leader_requests or worker == 0 else range(1, size))
    return slice_env(f"{lws}-{group}", subdomain or lws, members, members.index(worker), count,
                     position)
