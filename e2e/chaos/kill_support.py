"""Shared by the operator-kill and leader-failover runs (issue 11, items 1 and 4): real
``lws-operator run`` processes that a test SIGKILLs, a confined test namespace, and the checks of
"converged" that every iteration ends with.

The operator processes run the controllers (cluster-wide, as a user runs them) and serve their
webhooks in Service mode, registered nowhere: admission for the test namespace comes from
webhooks in the test process, confined to it. Killing an operator therefore stops exactly the
controllers, never the admission of other namespaces of the shared cluster.

"Converged" is judged from the API alone: every group index ``0..replicas-1`` exists once with
``size`` live, Ready pods named as the StatefulSets name them, all on one template revision and
the expected image, nothing left terminating, and a status that says so for the current
generation.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import Clusters
from e2e.bench.webhook_latency import confined_namespaces
from e2e.cluster import LocalCluster
from e2e.kube import Kube, condition, is_ready, wait_for
from e2e.operator_process import ReplicaProcess

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"
REVISION = P + "template-revision-hash"
COUNTS = P + "group-restart-counts"
READY_DELAY = "e2e.lws-operator.dev/ready-delay"


@dataclass
class Env:
    """A test namespace with confined admission, and the operator processes started for it."""

    cluster: LocalCluster
    kube: Kube
    namespace: str
    operator_namespace: str
    logs: Path
    processes: list[ReplicaProcess] = field(default_factory=list)

    def operator(self, name: str, *extra_args: str) -> ReplicaProcess:
        """A new operator process (not started); its log is ``operator-<name>.log``."""
        op = ReplicaProcess(name, str(self.cluster.kubeconfig), self.operator_namespace,
                             self.logs / f"operator-{name}.log", list(extra_args))
        self.processes.append(op)
        return op


@contextlib.asynccontextmanager
async def running_env(clusters: Clusters, logs: Path) -> AsyncIterator[Env]:
    """The full-tier cluster with the CRD, a fresh namespace with our webhooks confined to it,
    a second one for the operators; at the end everything created there is deleted (with an
    operator running, since our finalizer may hold retained pods) and the operators stopped."""
    cluster = clusters.get("full")
    async with confined_namespaces(cluster, "ctl") as (kube, namespace, operator_namespace):
        out = Env(cluster, kube, namespace, operator_namespace, logs)
        try:
            yield out
        finally:
            # Delete while an operator still runs (our finalizer may hold retained pods).
            if not any(op.alive for op in out.processes):
                with contextlib.suppress(Exception):
                    await out.operator("cleanup").start()
            for obj in await kube.list(API, KIND, namespace):
                await kube.delete(API, KIND, obj["metadata"]["name"], namespace)

            async def no_pods() -> bool:
                return not await kube.list("v1", "Pod", namespace)

            with contextlib.suppress(AssertionError):
                await wait_for(no_pods, timeout=120, what="pods gone")
            for op in out.processes:
                await op.terminate()


def lws(name: str, replicas: int = 2, size: int = 2, image: str = "engine:v1",
        **template: Any) -> dict[str, Any]:
    """A LeaderWorkerSet whose pods turn Ready at once (kwok)."""
    return {"apiVersion": API, "kind": KIND, "metadata": {"name": name},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {
                "size": size, **template, "workerTemplate": {"spec": {"containers": [
                    {"name": "engine", "image": image}]}}}}}


async def pods_of(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    return await kube.list("v1", "Pod", namespace, label_selector=f"{P}name={name}")


def uids(pods: list[dict[str, Any]]) -> dict[str, str]:
    """Pod name -> UID of the live pods."""
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods
            if not p["metadata"].get("deletionTimestamp")}


def group_pods(name: str, group: int, size: int) -> set[str]:
    return {f"{name}-{group}", *(f"{name}-{group}-{i}" for i in range(1, size))}


def restart_counts(obj: dict[str, Any]) -> dict[str, int]:
    raw = (obj["metadata"].get("annotations") or {}).get(COUNTS) or "{}"
    counts: dict[str, int] = json.loads(raw)
    return counts


@dataclass(frozen=True)
class Converged:
    """A converged LeaderWorkerSet: its pods (name -> UID), revision and the object itself."""

    pods: dict[str, str]
    revision: str
    lws: dict[str, Any]


async def converged_now(kube: Kube, namespace: str, name: str, replicas: int, size: int,
                        image: str) -> Converged | str:
    """The converged state, or why it is not converged yet."""
    obj = await kube.get(API, KIND, name, namespace)
    if obj is None:
        return "no LeaderWorkerSet"
    pods = await pods_of(kube, namespace, name)
    terminating = [p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp")]
    if terminating:
        return f"terminating: {sorted(terminating)}"
    names = {p["metadata"]["name"] for p in pods}
    want = set().union(*(group_pods(name, g, size) for g in range(replicas)))
    if names != want:
        return f"pods {sorted(names)} != {sorted(want)}"
    if len(pods) != len(names):
        return "duplicate pod names"
    not_ready = sorted(p["metadata"]["name"] for p in pods if not is_ready(p))
    if not_ready:
        return f"not Ready: {not_ready}"
    revisions = {p["metadata"]["labels"].get(REVISION) for p in pods}
    if len(revisions) != 1:
        return f"revisions {revisions}"
    images = {c["image"] for p in pods for c in p["spec"]["containers"]}
    if images != {image}:
        return f"images {images}"
    status = obj.get("status") or {}
    generation = obj["metadata"]["generation"]
    counters = (status.get("replicas"), status.get("readyReplicas"),
                status.get("updatedReplicas"))
    if counters != (replicas, replicas, replicas):
        return f"status replicas/ready/updated {counters}"
    available: dict[str, Any] = next(
        (c for c in status.get("conditions") or [] if c["type"] == "Available"), {})
    if condition(obj, "Available") != "True" or available.get("observedGeneration") != generation:
        return f"Available {available} at generation {generation}"
    if condition(obj, "UpdateInProgress") == "True" or condition(obj, "Progressing") == "True":
        return f"conditions {status.get('conditions')}"
    return Converged(uids(pods), str(revisions.pop()), obj)


async def wait_converged(kube: Kube, namespace: str, name: str, replicas: int, size: int,
                         image: str, timeout: float = 180) -> Converged:  # noqa: ASYNC109
    """Wait until :func:`converged_now` holds (a generous liveness deadline: a rollout or group
    that never finishes fails here, naming what was still missing)."""
    last: list[str] = []

    async def probe() -> Converged | None:
        got = await converged_now(kube, namespace, name, replicas, size, image)
        if isinstance(got, str):
            last[:] = [got]
            return None
        return got

    try:
        out = await wait_for(probe, timeout=timeout, interval=0.5, what=f"{name} converged")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {last[0] if last else ''}") from None
    assert out is not None
    return out
