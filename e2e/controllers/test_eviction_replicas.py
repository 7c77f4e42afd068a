"""The group disruption budget holds across operator replicas, as a PodDisruptionBudget does.

Two ``lws-operator run`` replicas (leader election on, both serving webhooks and both watching,
as the chart's two replicas behind the webhook Service) and a LeaderWorkerSet of four Ready
groups with ``max-disrupted-groups: "1"``. Eviction reviews for a pod of every group are sent
to both replicas at once, the way the API server spreads evictions over the Service's
endpoints: the groups allowed must be at most the budget. The replicas learn of each other's
decisions only through the set's reservation annotation, written with a resourceVersion
precondition against the real API server (``admission.eviction``); with per-process
reservations each replica allows a group of its own, and this test fails.

The reviews go straight to the replicas' webhook ports (the pods are not evicted), so that the
decision of each replica is seen and the reservations alone carry the budget from one replica
to the other: no watch event of a deleted pod arrives in between. The latency of allowed and
refused answers is printed (``-s``).
"""

from __future__ import annotations

import asyncio
import ssl
import statistics
import time
import uuid
from typing import Any

import aiohttp
import pytest

from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.launcher import OperatorProcess
from e2e.harness.replicas import Env
from e2e.kube import is_ready, wait_for
from lws_operator.api.constants import (
    EVICTION_RESERVATIONS_ANNOTATION,
    MAX_DISRUPTED_GROUPS_ANNOTATION,
    VALIDATE_EVICTION_PATH,
)
from lws_operator.logic.disruption.reservations import parse_reservations

pytestmark = [pytest.mark.full, pytest.mark.replicas(suffix="evr", drain_timeout=60)]

REPLICAS, SIZE, BUDGET, ROUNDS = 4, 2, 1, 3


def _tls() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the replicas' self-managed CA: only the answer matters
    return ctx


TLS = _tls()  # made once: loading the trust store blocks, which would space the requests out


async def review(session: aiohttp.ClientSession, op: OperatorProcess, namespace: str, pod: str,
                 dry_run: bool = False) -> tuple[bool, float, str]:
    """An eviction review of ``pod`` answered by ``op``: allowed, seconds, message."""
    body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
        "uid": str(uuid.uuid4()), "operation": "CREATE", "subResource": "eviction",
        "namespace": namespace, "name": pod, "dryRun": dry_run,
        "kind": {"group": "policy", "version": "v1", "kind": "Eviction"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "object": {"apiVersion": "policy/v1", "kind": "Eviction",
                   "metadata": {"name": pod, "namespace": namespace}}}}
    started = time.perf_counter()
    async with session.post(f"https://127.0.0.1:{op.webhook_port}{VALIDATE_EVICTION_PATH}",
                            json=body, ssl=TLS) as answer:
        assert answer.status == 200
        got: dict[str, Any] = (await answer.json())["response"]
    took = time.perf_counter() - started
    return bool(got["allowed"]), took, str((got.get("status") or {}).get("message", ""))


async def sees_every_group_whole(op: OperatorProcess, name: str) -> bool:
    """The replica's caches show no group disrupted (a dry run sets its gauge, writes nothing)."""
    return any(labels.get("name") == name and value == 0.0
               for labels, value in await op.samples("lws_disrupted_groups"))


async def ready_set(s: Env, session: aiohttp.ClientSession, replicas: list[OperatorProcess],
                    name: str, budget: int) -> None:
    """A set of Ready groups with ``budget``, seen whole by every replica's caches."""
    lws = (LeaderWorkerSet(name).replicas(REPLICAS).size(SIZE).image("engine:v1")
           .annotation(MAX_DISRUPTED_GROUPS_ANNOTATION, str(budget)).build())
    await s.kube.create(lws, s.namespace)

    async def ready() -> bool:
        pods = await s.kube.list("v1", "Pod", s.namespace, label_selector=f"{P}name={name}")
        return len(pods) == REPLICAS * SIZE and all(is_ready(p) for p in pods)

    await wait_for(ready, timeout=120, what=f"{name}: {REPLICAS} Ready groups")

    async def whole() -> bool:
        for op in replicas:
            await review(session, op, s.namespace, f"{name}-0-1", dry_run=True)
        return all([await sees_every_group_whole(op, name) for op in replicas])

    await wait_for(whole, timeout=60, interval=0.2, what="every replica sees it whole")


def ms(values: list[float]) -> str:
    return (f"{len(values)} answers, median {statistics.median(values) * 1000:.1f} ms, "
            f"max {max(values) * 1000:.1f} ms")


async def test_concurrent_evictions_on_two_replicas_stay_within_the_budget(env: Env) -> None:
    s = env
    a = s.operator("a", "--leader-elect")
    b = s.operator("b", "--leader-elect")
    await asyncio.gather(a.start(), b.start())
    contended: list[float] = []
    refused: list[float] = []
    async with aiohttp.ClientSession() as session:
        for round_ in range(ROUNDS):
            name = f"budget-{round_}"
            await ready_set(s, session, [a, b], name, BUDGET)
            # A pod of every group, all at once, each replica starting with a group of its own
            # (a: 0, 2; b: 1, 3): per-process reservations would let each replica's first go.
            targets = [((a, b)[group % 2], f"{name}-{group}-1") for group in range(REPLICAS)]
            answers = await asyncio.gather(*(review(session, op, s.namespace, pod)
                                              for op, pod in targets))
            groups = {pod.rsplit("-", 2)[1] for (_, pod), (ok, _, _) in zip(targets, answers,
                                                                              strict=True) if ok}
            print(f"\n[eviction replicas] round {round_}: groups allowed {sorted(groups)}; "
                  + ", ".join(f"{op.name}:{pod}={'allowed' if ok else 'refused'} "
                              f"{took * 1000:.1f} ms"
                              for (op, pod), (ok, took, _) in zip(targets, answers, strict=True)),
                  flush=True)
            assert 1 <= len(groups) <= BUDGET, answers
            refusals = [message for ok, _, message in answers if not ok]
            assert all("group disruption budget" in m for m in refusals), refusals
            stored = await s.kube.get(API, KIND, name, s.namespace)
            assert stored is not None
            reserved = parse_reservations(stored["metadata"].get("annotations") or {})
            assert set(reserved) == groups
            for ok, took, _ in answers:
                (contended if ok else refused).append(took)

        # Uncontended, one at a time, alternating replicas, under a budget that allows every
        # group: each answer is a reservation written (what a drain's allowed eviction costs).
        name = "latency"
        await ready_set(s, session, [a, b], name, REPLICAS)
        allowed: list[float] = []
        for group in range(REPLICAS):
            ok, took, message = await review(session, (a, b)[group % 2], s.namespace,
                                             f"{name}-{group}-1")
            assert ok, message
            allowed.append(took)
        stored = await s.kube.get(API, KIND, name, s.namespace)
        assert stored is not None
        assert set(parse_reservations(stored["metadata"]["annotations"])) == {
            str(g) for g in range(REPLICAS)}
    print(f"\n[eviction replicas] {EVICTION_RESERVATIONS_ANNOTATION}: allowed, uncontended: "
          f"{ms(allowed)}; allowed in the concurrent rounds: {ms(contended)}; refused: "
          f"{ms(refused)}", flush=True)
    for op in (a, b):
        assert op.alive, op.log_tail()
        assert op.failures() == [], op.log_tail()
