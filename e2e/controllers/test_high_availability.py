"""High availability end to end: ``lws-operator run`` processes with leader election on the full
tier (leader election and servers as in upstream's cmd/main.go).

Only the Lease holder writes; ``kill -9`` of the leader hands the Lease to the standby once it
expires (leaseDuration, 15 s); SIGTERM of the leader lets its passes finish, releases the Lease
(the standby takes over within about one retry period) and exits 0. Takeover times are printed
(``-s`` shows them) and bounded only by generous liveness deadlines.

The operator processes run the controllers and serve webhooks in Service mode (nothing registers
them); admission for the test namespace comes from webhooks in this process, confined to it, so
nothing here reaches other namespaces of the shared cluster.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from e2e.harness.builder import API, LeaderWorkerSet, P
from e2e.harness.launcher import LEASE, OperatorProcess
from e2e.harness.metrics import WRITE_VERBS
from e2e.harness.replicas import Env
from e2e.kube import is_ready, wait_for

pytestmark = [pytest.mark.full, pytest.mark.replicas(suffix="ha", drain_timeout=60)]

# Writes of the admission side and of the election itself, which every replica makes.
NOT_CONTROLLER = {"leases", "secrets", "mutatingwebhookconfigurations",
                  "validatingwebhookconfigurations", "selfsubjectaccessreviews"}


async def controller_writes(op: OperatorProcess) -> float:
    """Write requests to anything but the admission side's and the Lease's objects."""
    return sum(value for labels, value in await op.samples("lws_operator_api_requests")
               if labels.get("verb") in WRITE_VERBS
               and labels.get("resource", "").split("/")[0] not in NOT_CONTROLLER)


async def started(s: Env, name: str) -> OperatorProcess:
    """A new replica with leader election, started."""
    op = s.operator(name, "--leader-elect", "--workers", "4")
    await op.start()
    return op


def lws(name: str, replicas: int = 2, size: int = 2) -> dict[str, Any]:
    return LeaderWorkerSet(name).replicas(replicas).size(size).image("engine:v1").build()


async def converged(s: Env, name: str, replicas: int = 2, size: int = 2) -> None:
    """Every group's pods exist and are Ready (the controllers did their part)."""
    async def probe() -> bool:
        pods = await s.kube.list("v1", "Pod", s.namespace, label_selector=f"{P}name={name}")
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return len(live) == replicas * size and all(is_ready(p) for p in live)

    await wait_for(probe, timeout=120, what=f"{name}: {replicas} Ready groups of {size}")


async def lease_spec(s: Env) -> dict[str, Any]:
    got = await s.kube.get("coordination.k8s.io/v1", "Lease", LEASE, s.operator_namespace)
    assert got is not None
    spec: dict[str, Any] = got["spec"]
    return spec


async def takeover(standby: OperatorProcess, since: float, what: str) -> float:
    await wait_for(standby.leading, timeout=30, interval=0.1, what=what)
    took = time.monotonic() - since
    print(f"\n[leader-election e2e] {what}: {took:.2f}s", flush=True)
    return took


async def test_failover_and_graceful_handover(env: Env) -> None:
    s = env
    a = await started(s, "a")
    await wait_for(a.leading, timeout=30, what="a leading")
    b = await started(s, "b")
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
    c = await started(s, "c")
    assert not await c.leading()
    await s.kube.patch(API, "LeaderWorkerSet", "second", {"spec": {"replicas": 1}}, s.namespace)
    await converged(s, "second", replicas=1)
    assert await controller_writes(c) == 0, "the standby wrote"

    # SIGTERM while busy (a new LeaderWorkerSet just created): passes in flight finish, the
    # Lease is released, exit 0; the standby takes over quickly and finishes the job.
    before = (await lease_spec(s))["leaseTransitions"]
    await s.kube.create(lws("third", replicas=1), s.namespace)
    code = await b.stop(60)
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
