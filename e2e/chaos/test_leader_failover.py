"""Leader failover mid-rollout: the standby finishes the rollout with the same
result as an undisturbed one.

Two ``lws-operator run`` processes elect a leader through a Lease (timings shortened to a 6 s
lease so a failover takes seconds, not 15). Two LeaderWorkerSets with identical specs, ``calm``
and ``stormy`` (4 groups of 2, pods Ready 2 s after they start, maxUnavailable 1 and maxSurge
1), are rolled to the same new image in turn: ``calm`` undisturbed; ``stormy`` until some but
not all of its groups are updated, when the leader is killed (SIGKILL; under ``make chaos`` every
other iteration SIGTERM, a graceful handover) and the standby takes over. A fresh standby
replaces the dead leader for the next iteration.

"The same result" is compared as a whole, with the names taken out: every pod (name, revision,
image, labels, readiness), the status (counters and conditions), the leader StatefulSet (replicas,
partition, strategy, template revision), the worker StatefulSets, the ControllerRevisions kept
and the LeaderWorkerSet's annotations. ``calm`` must not be touched by ``stormy``'s rollout, and
no operator may log an error. Sizes: ``size(1, 6)`` iterations, the kill landing after 1, 2 or 3
updated groups in turn.
"""

from __future__ import annotations

import contextlib
import json
import signal
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from e2e.chaos import FULL, size
from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.converge import READY_DELAY, REVISION, converged_now, lws_pods, wait_converged
from e2e.harness.launcher import OperatorProcess
from e2e.harness.replicas import Env
from e2e.kube import Kube, is_ready, polling, wait_for

pytestmark = [pytest.mark.full, pytest.mark.chaos_run]

ITERATIONS = size(1, 6)
REPLICAS, SIZE = 4, 2
TIMINGS = ("--leader-elect-lease-duration", "6s", "--leader-elect-renew-deadline", "4s",
           "--leader-elect-retry-period", "1s")


def twin(name: str) -> dict[str, Any]:
    return (LeaderWorkerSet(name).replicas(REPLICAS).size(SIZE).image("engine:v1")
            .rolling_update(maxUnavailable=1, maxSurge=1)
            .worker_annotations({READY_DELAY: "2s"}).build())


def image_patch(image: str) -> dict[str, Any]:
    return {"spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [
        {"name": "engine", "image": image}]}}}}}


def _named(obj: Any, name: str) -> Any:
    """``obj`` with ``name`` replaced by ``NAME`` in every string (keys too)."""
    return json.loads(json.dumps(obj).replace(name, "NAME"))


def _pod(pod: dict[str, Any]) -> dict[str, Any]:
    labels = {k: v for k, v in pod["metadata"].get("labels", {}).items()
              if k.startswith(P) and k != P + "group-key"}
    return {"name": pod["metadata"]["name"], "labels": labels,
            "images": [c["image"] for c in pod["spec"]["containers"]], "ready": is_ready(pod),
            "terminating": bool(pod["metadata"].get("deletionTimestamp"))}


def _statefulset(sts: dict[str, Any]) -> dict[str, Any]:
    spec = sts["spec"]
    return {"name": sts["metadata"]["name"], "replicas": spec.get("replicas"),
            "updateStrategy": spec.get("updateStrategy"),
            "revision": spec["template"]["metadata"].get("labels", {}).get(REVISION),
            "images": [c["image"] for c in spec["template"]["spec"]["containers"]]}


def _owner(obj: dict[str, Any]) -> str | None:
    return next((r["kind"] for r in obj["metadata"].get("ownerReferences") or []
                 if r.get("controller")), None)


async def result(kube: Kube, namespace: str, name: str) -> dict[str, Any]:
    """What a rollout leaves behind, with the LeaderWorkerSet's name taken out."""
    obj = await kube.get(API, KIND, name, namespace)
    assert obj is not None
    status = obj.get("status") or {}
    owned = [s for s in await kube.list("apps/v1", "StatefulSet", namespace)
             if s["metadata"]["name"] == name or s["metadata"]["name"].startswith(f"{name}-")]
    revisions = [r for r in await kube.list("apps/v1", "ControllerRevision", namespace)
                 if r["metadata"]["name"].startswith(f"{name}-")]
    annotations = {k: v for k, v in (obj["metadata"].get("annotations") or {}).items()
                   if k.startswith(P)}
    out = {
        "pods": sorted((_pod(p) for p in await lws_pods(kube, namespace, name)),
                       key=lambda p: p["name"]),
        "status": {"replicas": status.get("replicas"),
                   "readyReplicas": status.get("readyReplicas"),
                   "updatedReplicas": status.get("updatedReplicas"),
                   "hpaPodSelector": status.get("hpaPodSelector"),
                   "conditions": sorted(
                       (c["type"], c["status"], c.get("reason"), c.get("message"))
                       for c in status.get("conditions") or [])},
        "statefulsets": sorted((_statefulset(s) for s in owned), key=lambda s: s["name"]),
        # Ours by name; the StatefulSets' own by count (their names hash the StatefulSet's).
        "revisions": sorted(r["metadata"]["name"] for r in revisions if _owner(r) == KIND),
        "statefulset_revisions": sorted(r["metadata"]["name"].rsplit("-", 1)[0]
                                        for r in revisions if _owner(r) == "StatefulSet"),
        "annotations": annotations,
    }
    return dict(_named(out, name))


@contextlib.asynccontextmanager
async def pods_seen(kube: Kube, namespace: str, name: str) -> AsyncIterator[set[str]]:
    """The UIDs of every pod of ``name`` seen while the block runs, starting with those there
    on entry (polled every 0.2 s; a pod lives at least its 2 s ready delay): how many pods a
    rollout created, surge included."""
    seen: set[str] = set()

    async def probe() -> None:
        seen.update(p["metadata"]["uid"] for p in await lws_pods(kube, namespace, name))

    async with polling(probe):
        yield seen


async def leader_of(ops: list[OperatorProcess]) -> OperatorProcess:
    async def probe() -> OperatorProcess | None:
        leading = [op for op in ops if op.alive and await op.leading()]
        assert len(leading) <= 1, "two leaders"
        return leading[0] if leading else None

    out = await wait_for(probe, timeout=60, interval=0.2, what="a leader")
    assert out is not None
    return out


async def updated_groups(kube: Kube, namespace: str, name: str, revision: str) -> int:
    """Groups whose pods are all live, Ready and on ``revision``."""
    pods = [p for p in await lws_pods(kube, namespace, name)
            if not p["metadata"].get("deletionTimestamp")]
    groups: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        groups.setdefault(pod["metadata"]["labels"][P + "group-index"], []).append(pod)
    return sum(1 for g, members in groups.items() if int(g) < REPLICAS
               and len(members) == SIZE and all(is_ready(p) for p in members)
               and all(p["metadata"]["labels"].get(REVISION) == revision for p in members))


async def test_standby_finishes_the_rollout_as_an_undisturbed_one(env: Env) -> None:
    kube, ns = env.kube, env.namespace
    serial = 0

    async def new_operator() -> OperatorProcess:
        nonlocal serial
        serial += 1
        op = env.operator(f"ha-{serial}", *TIMINGS, "--workers", "4")
        await op.start()
        return op

    ops = [await new_operator(), await new_operator()]
    for name in ("calm", "stormy"):
        await kube.create(twin(name), ns)
    for name in ("calm", "stormy"):
        await wait_converged(kube, ns, name, REPLICAS, SIZE, "engine:v1")
    takeovers: list[float] = []
    started = time.monotonic()
    for i in range(ITERATIONS):
        image = f"engine:v{i + 2}"
        graceful = FULL and i % 2 == 1
        after_groups = 1 + i % (REPLICAS - 1)

        async with pods_seen(kube, ns, "calm") as calm_pods:
            before = set(calm_pods)
            await kube.patch(API, KIND, "calm", image_patch(image), ns)
            calm = await wait_converged(kube, ns, "calm", REPLICAS, SIZE, image)
        expected = await result(kube, ns, "calm")
        expected_created = len(calm_pods) - len(before)

        leader = await leader_of(ops)
        async with pods_seen(kube, ns, "stormy") as stormy_pods:
            before = set(stormy_pods)
            await kube.patch(API, KIND, "stormy", image_patch(image), ns)

            async def partly(after_groups: int = after_groups,
                             revision: str = calm.revision) -> bool:
                return await updated_groups(kube, ns, "stormy", revision) >= after_groups

            await wait_for(partly, timeout=120, interval=0.1,
                           what=f"stormy: {after_groups} groups updated")
            leader.signal(signal.SIGTERM if graceful else signal.SIGKILL)
            stopped = time.monotonic()
            mid = await converged_now(kube, ns, "stormy", REPLICAS, SIZE, image)
            assert isinstance(mid, str), "the rollout was over before the leader was stopped"
            await leader.exited()  # SIGTERM: after finishing its passes, releasing the Lease
            ops.remove(leader)
            standby = await leader_of(ops)
            takeovers.append(time.monotonic() - stopped)
            await wait_converged(kube, ns, "stormy", REPLICAS, SIZE, image)
        created = len(stormy_pods) - len(before)
        assert created == expected_created, \
            f"iteration {i}: the standby's rollout created {created} pods, an undisturbed one " \
            f"{expected_created}"
        got = await result(kube, ns, "stormy")
        assert got == expected, (f"iteration {i}: the standby's rollout differs:\n"
                                 f"{json.dumps(got, indent=1)}\n!=\n"
                                 f"{json.dumps(expected, indent=1)}")
        untouched = await wait_converged(kube, ns, "calm", REPLICAS, SIZE, image)
        assert untouched.pods == calm.pods, f"iteration {i}: stormy's failover touched calm"
        assert standby.alive
        ops.append(await new_operator())
        print(f"\n[leader failover] {i + 1}/{ITERATIONS}: "
              f"{'SIGTERM' if graceful else 'SIGKILL'} after {after_groups} of {REPLICAS} "
              f"groups updated, '{mid}' at the kill, takeover {takeovers[-1]:.1f}s, "
              f"{created} pods created, the same result as the undisturbed rollout "
              f"({time.monotonic() - started:.0f}s)",
              flush=True)

    failures = [line for op in env.processes for line in op.failures()]
    print(f"[leader failover] {ITERATIONS} failovers mid-rollout, takeovers "
          f"{', '.join(f'{t:.1f}s' for t in takeovers)}, {len(failures)} error log lines",
          flush=True)
    assert failures == [], "\n".join(failures[:20])
