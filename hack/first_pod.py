"""Where the time to the first pod Ready goes: the path from a LeaderWorkerSet's create to its
first pod Ready, step by step, on the driver's clock, as the scale benchmark's create phase
starts it (``e2e/bench/scale.py``: its sets created ``CONCURRENCY`` at a time).

    PYTHONPATH=$PWD .venv/bin/python hack/first_pod.py --kubeconfig .cluster/bench/kubeconfig

Against a full-tier cluster with the CRDs installed. Each round starts a measured operator
(``OperatorProcess.measured``, the benchmark's), creates the sets in a new namespace and watches
the namespace's LeaderWorkerSets, ControllerRevisions, StatefulSets and pods: when the first of
each appeared, the first pod scheduled and Ready, and the same for the first set created (whose
leader StatefulSet may not be the first one). Then the namespace and the operator go. The
operator's log is kept (``--logs``). docs/performance.md has what it found.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from e2e.bench.process import ProfiledOperator
from e2e.bench.scale import CONCURRENCY
from e2e.bench.workloads import PROFILES, leaderworkerset, set_name
from e2e.harness.admission import ensure_namespace, wait_until_admitting
from lws_operator.api.constants import NAME_LABEL
from lws_operator.kube.client import ApiException, KubeClient

WATCHED = (("LeaderWorkerSet", "/apis/leaderworkerset.x-k8s.io/v1"),
           ("ControllerRevision", "/apis/apps/v1"), ("StatefulSet", "/apis/apps/v1"),
           ("Pod", "/api/v1"))
PLURALS = {"LeaderWorkerSet": "leaderworkersets", "ControllerRevision": "controllerrevisions",
           "StatefulSet": "statefulsets", "Pod": "pods"}


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or ())


class Firsts:
    """When each step was first seen, overall and for the first set created."""

    def __init__(self) -> None:
        self.seen: dict[str, float] = {}
        self.first_set: str | None = None
        self.done = asyncio.Event()  # the first set's first pod is Ready

    def note(self, step: str, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        self.seen.setdefault(step, now)
        labels = (obj.get("metadata") or {}).get("labels") or {}
        owner = labels.get(NAME_LABEL) or (obj.get("metadata") or {}).get("name")
        if self.first_set is not None and owner == self.first_set:
            self.seen.setdefault(f"first set: {step}", now)
            if step == "Pod Ready":
                self.done.set()


async def _watch(client: KubeClient, kind: str, group_path: str, namespace: str,
                 firsts: Firsts, listed: asyncio.Event) -> None:
    path = f"{group_path}/namespaces/{namespace}/{PLURALS[kind]}"
    version = (await client.request("GET", path)).get("metadata", {}).get("resourceVersion")
    listed.set()
    async with client.stream(path, query={"watch": "true", "resourceVersion": version,
                                          "timeoutSeconds": "300"}) as lines:
        async for line in lines:
            if line.strip():
                _event(kind, json.loads(line), firsts)


def _event(kind: str, event: dict[str, Any], firsts: Firsts) -> None:
    obj = event.get("object") or {}
    if event.get("type") not in ("ADDED", "MODIFIED"):
        return
    firsts.note(f"{kind} seen", obj)
    if kind == "Pod":
        if (obj.get("spec") or {}).get("nodeName"):
            firsts.note("Pod scheduled", obj)
        if _ready(obj):
            firsts.note("Pod Ready", obj)


async def one_round(client: KubeClient, kubeconfig: str, sets: int, logs: Path,
                    workers: int) -> dict[str, float]:
    run_id = uuid.uuid4().hex[:6]
    namespace = f"first-pod-{run_id}"
    operator = ProfiledOperator.create(kubeconfig, run_id, logs / f"first-pod-{run_id}.log",
                                       workers=workers)
    firsts = Firsts()
    tasks: list[asyncio.Task[None]] = []
    profile = PROFILES["default"]
    try:
        await ensure_namespace(client, operator.namespace)
        await operator.start()
        await ensure_namespace(client, namespace)
        await wait_until_admitting(client, namespace)
        for kind, group_path in WATCHED:
            listed = asyncio.Event()
            tasks.append(asyncio.create_task(_watch(client, kind, group_path, namespace,
                                                    firsts, listed)))
            await asyncio.wait_for(listed.wait(), 30)
        await asyncio.sleep(1.0)  # the watches open
        names = [set_name(i) for i in range(sets)]
        firsts.first_set = names[0]
        queue = list(names)
        begin = time.monotonic()

        async def creator() -> None:
            while queue:
                name = queue.pop(0)
                await client.request(
                    "POST", f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{namespace}/"
                    "leaderworkersets", body=leaderworkerset(name, profile))
                firsts.seen.setdefault("first create answered", time.monotonic())

        await asyncio.gather(*(creator() for _ in range(CONCURRENCY)))
        firsts.seen["last create answered"] = time.monotonic()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(firsts.done.wait(), 60)
        out = {step: round(t - begin, 3) for step, t in
               sorted(firsts.seen.items(), key=lambda kv: kv[1])}
        out["_begin_monotonic"] = begin  # to align other processes' CLOCK_MONOTONIC traces
        return out
    finally:
        for task in tasks:
            task.cancel()
        with contextlib.suppress(ApiException):
            await client.request("DELETE", f"/api/v1/namespaces/{namespace}")
        await operator.stop()
        mutating, validating = operator.configurations
        base = "/apis/admissionregistration.k8s.io/v1"
        for path in (f"{base}/mutatingwebhookconfigurations/{mutating}",
                     f"{base}/validatingwebhookconfigurations/{validating}",
                     f"/api/v1/namespaces/{operator.namespace}"):
            with contextlib.suppress(ApiException):
                await client.request("DELETE", path)


async def main(args: argparse.Namespace) -> None:
    client = await KubeClient.connect(args.kubeconfig)
    rounds = []
    try:
        for index in range(args.rounds):
            result = await one_round(client, args.kubeconfig, args.sets, args.logs,
                                     args.workers)
            print(f"round {index + 1}: {json.dumps(result)}", flush=True)
            rounds.append(result)
            await asyncio.sleep(args.pause)
    finally:
        await client.close()
    steps = sorted({s for r in rounds for s in r if not s.startswith("_")},
                   key=lambda s: statistics.median(r[s] for r in rounds if s in r))
    print("median over rounds:")
    for step in steps:
        values = [r[step] for r in rounds if step in r]
        print(f"  {step:36s} {statistics.median(values):6.3f} s  "
              f"({min(values):.3f}-{max(values):.3f})")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--sets", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--pause", type=float, default=5.0, help="seconds between rounds")
    parser.add_argument("--logs", type=Path, default=Path("/tmp"))
    asyncio.run(main(parser.parse_args()))
    sys.exit(0)
