"""What "the operator has finished" means, judged from the API alone.

Two strengths. ``converged`` (in-process operator tests): the status says every group is ready
and updated, and exactly the set's pods exist, all Ready. ``converged_now``/``wait_converged``
(the chaos runs, after faults): every group index ``0..replicas-1`` exists once with ``size``
live, Ready pods named as the StatefulSets name them, all on one template revision and the
expected image, nothing left terminating, and a status that says so for the current generation.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from e2e.harness.builder import API, KIND, P
from e2e.harness.launcher import Operator
from e2e.kube import Kube, condition, is_ready, wait_for

T = TypeVar("T")

REVISION = P + "template-revision-hash"
COUNTS = P + "group-restart-counts"
READY_DELAY = "e2e.lws-operator.dev/ready-delay"


async def lws_pods(kube: Kube, namespace: str, name: str) -> list[dict[str, Any]]:
    """The pods of LeaderWorkerSet ``name`` (terminating ones too)."""
    return await kube.list("v1", "Pod", namespace, label_selector=f"{P}name={name}")


async def pods_of(op: Operator, name: str) -> list[dict[str, Any]]:
    """The pods of LeaderWorkerSet ``name`` in the operator's namespace."""
    return await lws_pods(op.kube, op.namespace, name)


async def get_lws(op: Operator, name: str) -> dict[str, Any]:
    """LeaderWorkerSet ``name`` in the operator's namespace, which must exist."""
    got = await op.kube.get(API, KIND, name, op.namespace)
    assert got is not None
    return got


async def remove(op: Operator, name: str) -> None:
    """Delete the LeaderWorkerSet and wait until all its pods are gone (retained ones too)."""
    await op.kube.delete(API, KIND, name, op.namespace)

    async def gone() -> bool:
        return not await pods_of(op, name)

    await wait_for(gone, timeout=120, what=f"{name}'s pods gone")


async def converged(op: Operator, name: str, replicas: int, size: int,
                    timeout: float = 90.0) -> list[dict[str, Any]]:  # noqa: ASYNC109
    """Wait until the LWS reports every group ready and updated and exactly its pods exist."""

    async def probe() -> list[dict[str, Any]] | None:
        lws = await op.kube.get(API, KIND, name, op.namespace)
        status = (lws or {}).get("status") or {}
        pods = [p for p in await pods_of(op, name) if not p["metadata"].get("deletionTimestamp")]
        if (status.get("readyReplicas") == replicas and status.get("updatedReplicas") == replicas
                and condition(lws, "Available") == "True" and len(pods) == replicas * size
                and all(is_ready(p) for p in pods)):
            return pods
        return None

    pods = await wait_for(probe, timeout=timeout, what=f"{name} to converge")
    assert pods is not None
    return pods


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
    pods = await lws_pods(kube, namespace, name)
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
    return await until_no_reason(
        lambda: converged_now(kube, namespace, name, replicas, size, image), timeout,
        f"{name} converged")


async def until_no_reason(check: Callable[[], Awaitable[T | str]], timeout: float,  # noqa: ASYNC109
                          what: str) -> T:
    """Wait until ``check`` returns a value rather than a reason it does not hold yet; at the
    deadline, fail naming ``what`` and the last reason (what was still missing)."""
    last: list[str] = []

    async def probe() -> T | None:
        got = await check()
        if isinstance(got, str):
            last[:] = [got]
            return None
        return got

    try:
        out = await wait_for(probe, timeout=timeout, interval=0.5, what=what)
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {last[0] if last else ''}") from None
    assert out is not None
    return out
