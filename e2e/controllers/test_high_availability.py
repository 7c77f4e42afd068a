"""High availability end to end: ``lws-operator run`` processes with leader election on the full
tier (DESIGN "Operating principles"; SPEC 7.4).

Only the Lease holder writes; ``kill -9`` of the leader hands the Lease to the standby once it
expires (leaseDuration, 15 s); SIGTERM of the leader lets its passes finish, releases the Lease
(the standby takes over within about one retry period) and exits 0. Takeover times are printed
(``-s`` shows them) and bounded only by generous liveness deadlines.

The operator processes run the controllers and serve webhooks in Service mode (nothing registers
them); admission for the test namespace comes from webhooks in this process, confined to it, so
nothing here reaches other namespaces of the shared cluster.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from conftest import Clusters
from e2e.bench.figures import WRITE_VERBS
from e2e.bench.webhook_latency import confined_namespaces
from e2e.cluster import LocalCluster
from e2e.kube import Kube, is_ready, wait_for
from e2e.operator_process import LEASE, ReplicaProcess

pytestmark = pytest.mark.full

API = "leaderworkerset.x-k8s.io/v1"
P = "leaderworkerset.sigs.k8s.io/"
# Writes of the admission side and of the election itself, which every replica makes.
NOT_CONTROLLER = {"leases", "secrets", "mutatingwebhookconfigurations",
                  "validatingwebhookconfigurations", "selfsubjectaccessreviews"}


async def controller_writes(op: ReplicaProcess) -> float:
    """Write requests to anything but the admission side's and the Lease's objects."""
    return sum(value for labels, value in await op.samples("lws_operator_api_requests")
               if labels.get("verb") in WRITE_VERBS
               and labels.get("resource", "").split("/")[0] not in NOT_CONTROLLER)


@dataclass
class Setup:
    cluster: LocalCluster
    kube: Kube
    namespace: str
    operator_namespace: str
    logs: Path
    processes: list[ReplicaProcess] = field(default_factory=list)

    async def operator(self, name: str) -> ReplicaProcess:
        op = ReplicaProcess(name, str(self.cluster.kubeconfig), self.operator_namespace,
                            self.logs / f"operator-{name}.log",
                            ["--leader-elect", "--workers", "4"])
        self.processes.append(op)
        await op.start()
        return op


@pytest_asyncio.fixture(loop_scope="session")
async def setup(clusters: Clusters, tmp_path: Path) -> AsyncIterator[Setup]:
    cluster = clusters.get("full")
    async with confined_namespaces(cluster, "ha") as (kube, namespace, operator_namespace):
        out = Setup(cluster, kube, namespace, operator_namespace, tmp_path)
        try:
            yield out
        finally:
            for name in await _lws_names(kube, namespace):
                await kube.delete(API, "LeaderWorkerSet", name, namespace)
            with contextlib.suppress(AssertionError):
                await wait_for(lambda: _no_pods(kube, namespace), timeout=60, what="pods gone")
            for op in out.processes:
                await op.terminate()


async def _lws_names(kube: Kube, namespace: str) -> list[str]:
    return [o["metadata"]["name"] for o in await kube.list(API, "LeaderWorkerSet", namespace)]


async def _no_pods(kube: Kube, namespace: str) -> bool:
    return not await kube.list("v1", "Pod", namespace)


def lws(name: str, replicas: int = 2, size: int = 2) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "LeaderWorkerSet", "metadata": {"name": name},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {"size": size,
                     "workerTemplate": {"spec": {"containers": [
                         {"name": "engine", "image": "engine:v1"}]}}}}}


async def converged(s: Setup, name: str, replicas: int = 2, size: int = 2) -> None:
    """Every group's pods exist and are Ready (the controllers did their part)."""
    async def probe() -> bool:
        pods = await s.kube.list("v1", "Pod", s.namespace, label_selector=f"{P}name={name}")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return len(live) == replicas * size and all(is_ready(p) for p in live)

    await wait_for(probe, timeout=120, what=f"{name}: {replicas} Ready groups of {size}")


async def lease_spec(s: Setup) -> dict[str, Any]:
    got = await s.kube.get("coordination.k8s.io/v1", "Lease", LEASE, s.operator_namespace)
    assert got is not None
    spec: dict[str, Any] = got["spec"]
    return spec


async def takeover(standby: ReplicaProcess, since: float, what: str) -> float:
    await wait_for(standby.leading, timeout=30, interval=0.1, what=what)
    took = time.monotonic() - since
    print(f"\n[leader-election e2e] {what}: {took:.2f}s", flush=True)
    return took


async def test_failover_and_graceful_handover(setup: Setup) -> None:
    s = setup
    a = await s.operator("a")
    await wait_for(a.leading, timeout=30, what="a leading")
    b = await s.operator("b")
    assert not await b.leading()
    holder = (await lease_spec(s))["holderIdentity"]
    assert any(e.get("msg", "").endswith(f"acquired by {holder}: leading")
               for e in a.log_entries()), a.log_tail()

    # Only the leader writes.
    await s.kube.create(lws("first"), s.namespace)
    await converged(s, "first")
    assert await controller_writes(a) > 0
    assert await controller_writes(b) == 0, "the standby wrote"

    # kill -9 the leader: the standby takes over once the Lease expires, and reconciles.
    await a.kill()
    killed = time.monotonic()
    assert a.process is not None
    await a.process.wait()
    await takeover(b, killed, "takeover after kill -9 of the leader (lease duration 15s)")
    await s.kube.create(lws("second"), s.namespace)
    await converged(s, "second")
    await s.kube.patch(API, "LeaderWorkerSet", "first", {"spec": {"replicas": 3}}, s.namespace)
    await converged(s, "first", replicas=3)
    # The pass that scaled it logged why, in JSON naming the LeaderWorkerSet.
    assert any(e.get("lws") == f"{s.namespace}/first"
               and e["msg"].startswith(f"applying leader statefulset {s.namespace}/first")
               for e in b.log_entries()), b.log_tail()

    # A new standby writes nothing while the leader works.
    c = await s.operator("c")
    assert not await c.leading()
    await s.kube.patch(API, "LeaderWorkerSet", "second", {"spec": {"replicas": 1}}, s.namespace)
    await converged(s, "second", replicas=1)
    assert await controller_writes(c) == 0, "the standby wrote"

    # SIGTERM while busy (a new LeaderWorkerSet just created): passes in flight finish, the
    # Lease is released, exit 0; the standby takes over quickly and finishes the job.
    before = (await lease_spec(s))["leaseTransitions"]
    await s.kube.create(lws("third", replicas=1), s.namespace)
    code = await b.terminate()
    stopped = time.monotonic()
    assert code == 0, b.log_tail()
    messages = [e.get("msg", "") for e in b.log_entries()]
    assert f"lease {s.operator_namespace}/{LEASE} released" in messages, b.log_tail()
    assert messages[-1] == "stopped"
    assert [e for e in b.log_entries() if e["level"] in ("error", "critical")] == []
    spec = await lease_spec(s)
    # Released (no holder, 1 s), or already taken by the standby.
    assert (spec["holderIdentity"], spec["leaseDurationSeconds"]) == ("", 1) \
        or spec["leaseTransitions"] == before + 1, spec
    took = await takeover(c, stopped, "takeover after SIGTERM of the leader (released)")
    # Far below the 15 s a crash costs; the bound is loose on purpose (a shared machine).
    assert took < 15, "the standby waited for expiry: the release did not work"
    await converged(s, "third", replicas=1)
    assert await c.leading()
