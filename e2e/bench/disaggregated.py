"""The DisaggregatedSet benchmark: K DisaggregatedSets (prefill and decode, R groups of S pods
each) against the same 2K LeaderWorkerSets applied directly, both through one operator process.

    python -m e2e.bench.disaggregated [--sets 10 --replicas 3 --size 4] [--kubeconfig PATH]
    make bench-ds BENCH_ARGS="--sets 2"

The LeaderWorkerSet side goes first (the same role specs, ``<set>-prefill`` and
``<set>-decode``), then the DisaggregatedSet side; each goes through create (until every pod is
Ready), rollout (a new image on both roles, until exactly the set's pods are Ready on it) and
delete (until no pod is left), timed by one pod watch. The roles keep the LeaderWorkerSets'
``maxSurge: 1, maxUnavailable: 1``, so both sides roll with the same budgets: the
LeaderWorkerSet's own rolling update group by group on one side, the coordinated rollout across
two new LeaderWorkerSets per set on the other.

The summary (``results/ds-<time>.json``, copied to ``ds-latest.json``) gives each phase's
seconds on both sides, their ratio (DisaggregatedSet / LeaderWorkerSets), and the operator's API
requests per phase by verb and resource (its own counters, scraped before and after each phase).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime as dt
import json
import os
import platform
import shutil
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from e2e.bench import figures
from e2e.bench.process import ProfiledOperator
from e2e.bench.scale import RESULTS, BenchError, _cleanup_step, bounded
from e2e.bench.tracker import Tracker
from e2e.bench.workloads import IMAGE, MAX_SURGE, MAX_UNAVAILABLE, ROLLED_IMAGE, SET_LABEL
from e2e.cluster import LocalCluster, NodeLayout
from e2e.harness.admission import ensure_namespace, wait_until_admitting
from e2e.harness.disaggregated import install_crds
from e2e.kube import MERGE_PATCH, Kube
from lws_operator.kube.client import KubeClient

LWS_API = "leaderworkerset.x-k8s.io/v1"
DS_API = "disaggregatedset.x-k8s.io/v1"
ROLES = ("prefill", "decode")


@dataclass(frozen=True)
class Profile:
    sets: int = 10
    replicas: int = 3
    size: int = 4
    timeout: float = 900.0

    @property
    def pods_per_set(self) -> int:
        return len(ROLES) * self.replicas * self.size

    @property
    def pods(self) -> int:
        return self.sets * self.pods_per_set


def role_spec(set_: str, profile: Profile, image: str) -> dict[str, Any]:
    """One role's LeaderWorkerSet spec, the same on both sides; pods labelled with their set."""
    return {
        "replicas": profile.replicas,
        "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
            "maxSurge": MAX_SURGE, "maxUnavailable": MAX_UNAVAILABLE}},
        "leaderWorkerTemplate": {"size": profile.size, "workerTemplate": {
            "metadata": {"labels": {SET_LABEL: set_}},
            "spec": {"terminationGracePeriodSeconds": 0, "containers": [{
                "name": "model", "image": image,
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}}}]}}},
    }


def disaggregatedset(set_: str, profile: Profile, image: str = IMAGE) -> dict[str, Any]:
    return {"apiVersion": DS_API, "kind": "DisaggregatedSet", "metadata": {"name": set_},
            "spec": {"roles": [{"name": role, "spec": role_spec(set_, profile, image)}
                               for role in ROLES]}}


def leaderworkersets(set_: str, profile: Profile, image: str = IMAGE) -> list[dict[str, Any]]:
    return [{"apiVersion": LWS_API, "kind": "LeaderWorkerSet",
             "metadata": {"name": f"{set_}-{role}"}, "spec": role_spec(set_, profile, image)}
            for role in ROLES]


@dataclass
class Phase:
    seconds: float
    requests: dict[str, int]


class Side:
    """One side (``lws`` or ``ds``) in its own namespace."""

    def __init__(self, kube: Kube, namespace: str, profile: Profile, kind: str,
                 operator: ProfiledOperator) -> None:
        self.kube, self.namespace, self.profile, self.kind = kube, namespace, profile, kind
        self.operator = operator
        self.sets = [f"ds-bench-{i:03d}" for i in range(profile.sets)]
        self.tracker = Tracker(kube, namespace, rolled_image=ROLLED_IMAGE)

    async def open(self, client: KubeClient) -> None:
        await ensure_namespace(client, self.namespace)
        await wait_until_admitting(client, self.namespace)
        await self.tracker.start()

    async def _phase(self, submit: Callable[[str], Awaitable[None]],
                     done: Callable[[], bool]) -> Phase:
        before = figures.parse(await self.operator.metrics())
        began = time.monotonic()
        await bounded([lambda s=s: submit(s) for s in self.sets])  # type: ignore[misc]
        await self.tracker._until(done, self.profile.timeout, lambda: (
            f"{self.tracker.count(ready=True)} pods Ready of {len(self.tracker.pods)}"))
        seconds = time.monotonic() - began
        after = figures.parse(await self.operator.metrics())
        return Phase(round(seconds, 3), figures.requests_by_verb(figures.delta(after, before)))

    def _all_on(self, image: str) -> bool:
        """Exactly each set's pods exist, all Ready on ``image``, none terminating."""
        n = self.profile.pods_per_set
        return all(self.tracker.count(set_=s) == n
                   and self.tracker.count(set_=s, ready=True, image=image) == n
                   for s in self.sets)

    async def create(self) -> Phase:
        async def one(set_: str) -> None:
            objects = ([disaggregatedset(set_, self.profile)] if self.kind == "ds"
                       else leaderworkersets(set_, self.profile))
            for obj in objects:
                await self.kube.create(obj, self.namespace)
        return await self._phase(one, lambda: self._all_on(IMAGE))

    async def roll(self) -> Phase:
        async def one(set_: str) -> None:
            if self.kind == "ds":
                await self.kube.patch(DS_API, "DisaggregatedSet", set_, {"spec": disaggregatedset(
                    set_, self.profile, ROLLED_IMAGE)["spec"]}, self.namespace,
                    content_type=MERGE_PATCH)
                return
            for obj in leaderworkersets(set_, self.profile, ROLLED_IMAGE):
                await self.kube.patch(LWS_API, "LeaderWorkerSet", obj["metadata"]["name"],
                                      {"spec": obj["spec"]}, self.namespace,
                                      content_type=MERGE_PATCH)
        return await self._phase(one, lambda: self._all_on(ROLLED_IMAGE))

    async def delete(self) -> Phase:
        async def one(set_: str) -> None:
            if self.kind == "ds":
                await self.kube.delete(DS_API, "DisaggregatedSet", set_, self.namespace)
                return
            for role in ROLES:
                await self.kube.delete(LWS_API, "LeaderWorkerSet", f"{set_}-{role}",
                                       self.namespace)
        return await self._phase(one, lambda: not self.tracker.pods)

    async def run(self, client: KubeClient) -> dict[str, Phase]:
        await self.open(client)
        return {"create": await self.create(), "rollout": await self.roll(),
                "delete": await self.delete()}

    async def close(self) -> None:
        await self.tracker.stop()
        with contextlib.suppress(Exception):
            await self.kube.delete("v1", "Namespace", self.namespace)


async def garbage_collector_ready(kube: Kube, client: KubeClient, run_id: str,
                                  timeout: float = 120.0) -> float:  # noqa: ASYNC109
    """Wait until kube-controller-manager's garbage collector collects the children of both
    kinds (it discovers new resources every 30 s: a CRD installed just before would charge that
    wait to the first delete phase). The probe: a ConfigMap owned by a LeaderWorkerSet, and one
    owned by a DisaggregatedSet, must go with their owner. Returns the seconds waited."""
    namespace = f"ds-bench-gc-{run_id}"
    started = time.monotonic()
    await ensure_namespace(client, namespace)
    probe = Profile(sets=1, replicas=0, size=1)
    owners = [leaderworkersets("gc-probe", probe)[0], disaggregatedset("gc-probe", probe)]
    try:
        for owner in owners:
            while True:
                made = await kube.create(owner, namespace)
                await kube.create({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "gc-probe", "ownerReferences": [{
                        "apiVersion": owner["apiVersion"], "kind": owner["kind"],
                        "name": owner["metadata"]["name"], "uid": made["metadata"]["uid"]}]}},
                    namespace)
                await kube.delete(owner["apiVersion"], owner["kind"], owner["metadata"]["name"],
                                  namespace)
                for _ in range(20):
                    if await kube.get("v1", "ConfigMap", "gc-probe", namespace) is None:
                        break
                    await asyncio.sleep(0.25)
                else:
                    if time.monotonic() - started > timeout:
                        raise BenchError("the garbage collector does not collect the children "
                                         f"of {owner['kind']}")
                    await kube.delete("v1", "ConfigMap", "gc-probe", namespace)
                    continue
                break
        return round(time.monotonic() - started, 1)
    finally:
        with contextlib.suppress(Exception):
            await client.request("DELETE", f"/api/v1/namespaces/{namespace}")


async def bench(profile: Profile, kubeconfig: str, results: Path) -> dict[str, Any]:
    run_id = uuid.uuid4().hex[:6]
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    client = await KubeClient.connect(kubeconfig)
    kube = await Kube.connect(kubeconfig)
    operator = ProfiledOperator.create(kubeconfig, run_id, results / f"ds-{stamp}-operator.log")
    sides: dict[str, dict[str, Phase]] = {}
    try:
        gc_wait = await garbage_collector_ready(kube, client, run_id)
        await ensure_namespace(client, operator.namespace)
        await operator.start()
        for kind in ("lws", "ds"):
            side = Side(kube, f"ds-bench-{kind}-{run_id}", profile, kind, operator)
            print(f"[bench-ds] {kind}: {profile.pods} pods in {profile.sets} sets",
                  file=sys.stderr, flush=True)
            try:
                sides[kind] = await side.run(client)
            finally:
                await _cleanup_step(side.close(), f"deleting the {kind} side's namespace")
        code = await operator.stop()
    finally:
        await _cleanup_step(operator.stop(), "stopping the operator")
        base = "/apis/admissionregistration.k8s.io/v1"
        mutating, validating = operator.configurations
        for path in (f"{base}/mutatingwebhookconfigurations/{mutating}",
                     f"{base}/validatingwebhookconfigurations/{validating}",
                     f"/api/v1/namespaces/{operator.namespace}"):
            with contextlib.suppress(Exception):
                await client.request("DELETE", path)
        await client.close()
        await kube.close()
    summary = {
        "benchmark": "disaggregatedset",
        "when": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "profile": asdict(profile) | {"roles": list(ROLES), "pods": profile.pods},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "garbage_collector_wait_seconds": gc_wait,
        "leaderworkersets": {k: asdict(v) for k, v in sides["lws"].items()},
        "disaggregatedsets": {k: asdict(v) for k, v in sides["ds"].items()},
        "ratios": {k: figures.ratio(sides["ds"][k].seconds, sides["lws"][k].seconds)
                   for k in sides["ds"]},
        "exit_code": code,
    }
    await asyncio.to_thread(_write, results, stamp, summary)
    return summary


def _write(results: Path, stamp: str, summary: dict[str, Any]) -> None:
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"ds-{stamp}.json"
    path.write_text(json.dumps(summary, indent=2) + "\n")
    shutil.copyfile(path, results / "ds-latest.json")


async def _main(profile: Profile, kubeconfig: str | None, cluster_dir: Path,
                results: Path) -> dict[str, Any]:
    cluster = None
    try:
        if kubeconfig is None:
            cluster = LocalCluster(cluster_dir)
            await asyncio.to_thread(cluster.up, "full", NodeLayout(), 0, 180)
            kubeconfig = str(cluster.kubeconfig)
            await asyncio.to_thread(install_crds, cluster)
        else:
            await asyncio.to_thread(install_crds, LocalCluster.external(Path(kubeconfig)))
        return await bench(profile, kubeconfig, results)
    finally:
        if cluster is not None:
            await asyncio.to_thread(cluster.down)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.bench.disaggregated",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=10)
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--size", type=int, default=4)
    parser.add_argument("--timeout", type=float, default=900.0)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--cluster-dir", type=Path,
                        default=RESULTS.parents[2] / ".cluster" / "bench-ds")
    parser.add_argument("--results", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    if args.sets < 1 or args.replicas < 1 or args.size < 1:
        parser.error("--sets, --replicas and --size must be at least 1")
    profile = Profile(args.sets, args.replicas, args.size, args.timeout)
    try:
        summary = asyncio.run(_main(profile, args.kubeconfig, args.cluster_dir, args.results))
    except BenchError as exc:
        print(f"bench-ds: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(summary, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
