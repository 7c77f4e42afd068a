
"""Helpers of the API server fault runs: what the cluster should look like
once the operator has converged, and whether it then stays still.

The operator's own write counters are cluster-wide, and other modules of the session share the
cluster, so "no writes at rest" is judged by resourceVersions: every object of the test's
namespace that the operator owns or writes (LeaderWorkerSets, StatefulSets, Services,
ControllerRevisions, pods) must keep its resourceVersion over a quiet period.
"""

from __future__ import annotations

import asyncio
import contextlib
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp
from kubernetes.aio.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from e2e.harness.builder import API, KIND, LeaderWorkerSet
from e2e.kube import Kube, is_ready

T = TypeVar("T")

NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
SIZE = 2

# What a pass of the operator writes, or what is written because of it: these keep their
# resourceVersions once everything is at rest.
WATCHED_KINDS = (("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"), ("apps/v1", "StatefulSet"),
                 ("v1", "Service"), ("apps/v1", "ControllerRevision"), ("v1", "Pod"))


def lws(name: str, replicas: int, image: str) -> dict[str, Any]:
    return LeaderWorkerSet(name).replicas(replicas).size(SIZE).image(image).build()


@dataclass
class Desired:
    """What the test asked for: LeaderWorkerSets that must exist with these replicas and image,
    and names that must be gone with everything they owned."""

    present: dict[str, tuple[int, str]] = field(default_factory=dict)
    gone: set[str] = field(default_factory=set)


async def tolerant(probe: Callable[[], Awaitable[T]]) -> T | None:
    """``probe()``, or None while the API server does not answer (restarting, not ready)."""
    try:
        return await probe()
    except (aiohttp.ClientError, OSError, TimeoutError):
        return None
    except ApiException as exc:
        if exc.status in (429, 500, 502, 503, 504):
            return None
        raise


async def _owned(kube: Kube, namespace: str, api_version: str, kind: str,
                 name: str) -> list[dict[str, Any]]:
    return await kube.list(api_version, kind, namespace, label_selector=f"{NAME_LABEL}={name}")


async def mismatches(kube: Kube, namespace: str, want: Desired) -> list[str]:
    """Everything that differs from ``want``; empty once converged. Checks every group's pods
    (count, Ready, image), one leader and one worker StatefulSet per group, one headless
    Service, the LeaderWorkerSet's status; that removed ones left nothing behind; and that no
    object is still terminating (its removal would change the namespace at rest)."""
    out: list[str] = []
    for name, (replicas, image) in sorted(want.present.items()):
        got = await kube.get(API, KIND, name, namespace)
        if got is None:
            out.append(f"{name}: missing")
            continue
        status = got.get("status") or {}
        for key in ("replicas", "readyReplicas", "updatedReplicas"):
            if status.get(key) != replicas:
                out.append(f"{name}: status.{key}={status.get(key)}, want {replicas}")
        pods = [p for p in await _owned(kube, namespace, "v1", "Pod", name)
                if not p["metadata"].get("deletionTimestamp")]
        names = sorted(p["metadata"]["name"] for p in pods)
        wanted = sorted([f"{name}-{g}" for g in range(replicas)]
                        + [f"{name}-{g}-{w}" for g in range(replicas) for w in range(1, SIZE)])
        if names != wanted:
            out.append(f"{name}: pods {names}, want {wanted}")
        for pod in pods:
            images = {c["image"] for c in pod["spec"]["containers"]}
            if images != {image} or not is_ready(pod):
                out.append(f"{name}: pod {pod['metadata']['name']} images {images} "
                           f"ready={is_ready(pod)}")
        sts = sorted(s["metadata"]["name"]
                     for s in await _owned(kube, namespace, "apps/v1", "StatefulSet", name)
                     if not s["metadata"].get("deletionTimestamp"))
        if sts != sorted([name, *(f"{name}-{g}" for g in range(replicas))]):
            out.append(f"{name}: statefulsets {sts}")
        services = [s["metadata"]["name"]
                    for s in await _owned(kube, namespace, "v1", "Service", name)]
        if services != [name]:
            out.append(f"{name}: services {services}")
    for api_version, kind in WATCHED_KINDS:  # at rest means nothing is still going away
        for obj in await kube.list(api_version, kind, namespace):
            if obj["metadata"].get("deletionTimestamp"):
                out.append(f"{kind} {obj['metadata']['name']} terminating")
    for name in sorted(want.gone):
        if await kube.get(API, KIND, name, namespace) is not None:
            out.append(f"{name}: still exists")
        for api_version, kind in WATCHED_KINDS[1:]:
            left = await _owned(kube, namespace, api_version, kind, name)
            if left:
                out.append(f"{name}: {len(left)} {kind} left")
    return out


async def converge(kube: Kube, namespace: str, want: Desired, timeout: float,  # noqa: ASYNC109
                   what: str, alive: Callable[[str], Awaitable[None]] | None = None) -> float:
    """Wait until the namespace matches ``want``; returns the seconds it took. ``alive`` is
    called on every round (it raises once the operator has exited: no use waiting)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    last: list[str] | None = None
    while loop.time() - start < timeout:
        if alive is not None:
            await alive(what)
        last = await tolerant(lambda: mismatches(kube, namespace, want))
        if last == []:
            return loop.time() - start
        await asyncio.sleep(0.5)
    raise AssertionError(f"{what}: not converged after {timeout}s: {last}")


async def versions(kube: Kube, namespace: str) -> dict[tuple[str, str], tuple[str, str]]:
    """(kind, name) -> (resourceVersion, the manager of its latest change) of every object the
    operator is responsible for in ``namespace``."""
    out: dict[tuple[str, str], tuple[str, str]] = {}
    for api_version, kind in WATCHED_KINDS:
        for obj in await kube.list(api_version, kind, namespace):
            meta = obj["metadata"]
            managed = sorted(meta.get("managedFields") or [], key=lambda m: m.get("time", ""))
            manager = f"{managed[-1].get('manager')}/{managed[-1].get('operation')}" \
                if managed else "?"
            out[(kind, meta["name"])] = (meta["resourceVersion"], manager)
    return out


async def assert_at_rest(kube: Kube, namespace: str, seconds: float, what: str) -> int:
    """No object of the namespace changes for ``seconds``; returns how many were watched."""
    before = await versions(kube, namespace)
    await asyncio.sleep(seconds)
    after = await versions(kube, namespace)
    changed = {k: (before.get(k), after.get(k)) for k in before.keys() | after.keys()
               if (before.get(k) or ("",))[0] != (after.get(k) or ("",))[0]}
    assert not changed, f"{what}: objects written at rest within {seconds}s: {changed}"
    return len(after)


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    """The operator's /metrics (plain HTTP), samples by family name."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            out.setdefault(family.name, []).append((sample.labels, sample.value))
    return out


async def counter(port: int, family: str) -> dict[str, float]:
    """A counter family of the operator, summed by its first label's value."""
    samples: dict[str, list[tuple[dict[str, str], float]]] = {}
    with contextlib.suppress(OSError):
        samples = await asyncio.to_thread(scrape, port)
    out: dict[str, float] = {}
    for labels, value in samples.get(family, []):
        key = next(iter(labels.values()), "")
        out[key] = out.get(key, 0.0) + value
    return out


async def orphans(kube: Kube, namespace: str) -> list[str]:
    """Objects of the namespace whose controlling owner is gone (no object of that kind and
    name, or one with another UID): what kube-controller-manager's garbage collector should
    delete within a second."""
    out = []
    kinds = {"StatefulSet": "apps/v1", "Pod": "v1", "LeaderWorkerSet": API}
    for api_version, kind in WATCHED_KINDS[1:]:
        for obj in await kube.list(api_version, kind, namespace):
            meta = obj["metadata"]
            if meta.get("deletionTimestamp"):
                continue
            for ref in meta.get("ownerReferences") or []:
                if not ref.get("controller") or ref["kind"] not in kinds:
                    continue
                owner = await kube.get(kinds[ref["kind"]], ref["kind"], ref["name"], namespace)
                if owner is None or owner["metadata"]["uid"] != ref["uid"]:
                    out.append(f"{kind} {meta['name']} (owner {ref['kind']} {ref['name']} "
                               f"{ref['uid'][:8]} gone)")
    return out
