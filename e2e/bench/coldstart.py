"""The cold-start benchmark: the operator starting over a cluster that already holds many
LeaderWorkerSets, with nothing to do.

    python -m e2e.bench.coldstart [--pods 5000,20000,50000] [--replicas 5 --size 10]
                                  [--cluster-dir DIR] [--keep-cluster] [--results DIR]

An API-tier cluster (etcd and kube-apiserver: nothing is scheduled) is given, for each point of
``--pods``, enough sets of ``replicas`` groups of ``size`` pods, written directly by this driver
at a high rate, exactly as the operator and the StatefulSet controller would have made them: the
LeaderWorkerSet as our defaulting webhook stores it, its ControllerRevision, leader StatefulSet
and headless Service from the operator's own builders (``logic``), the leader pods from the
leader StatefulSet's template through our pod webhook's mutation, one worker StatefulSet per
leader built from the cached leader, its pods the same way, every pod Running and Ready and every
StatefulSet's status as its controller reports it. The points are cumulative: the sets of a
smaller point stay and more are added.

Then the operator runs twice as a process of its own (``OperatorProcess.measured``). The first
run settles what only a pass writes (each new set's status); it is reported as ``settle``. The
second run is the measurement: from the process's start, when its caches are synced (its log),
when every set has had a pass (``controller_runtime_reconcile_total`` at least the number of
sets) and when it is quiet (queue empty, no worker busy). It must write nothing: its own request
counters (``lws_operator_api_requests_total``) and the API server's
(``apiserver_request_total``) are compared for every resource of the sets, before and after.
Its resident memory is sampled every 0.2 s (``VmRSS``; ``VmHWM`` for the peak).

The summary (``results/coldstart-<time>.json``) has, per point, the times, the memory (at
readiness, at cache sync, at the end, peak), the writes and the objects held. Nothing is
enforced: the issue's targets (60 s and 1 GiB at 50,000 pods) are printed beside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import datetime as dt
import json
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from e2e.bench.scale import bounded
from e2e.bench.workloads import Profile, leaderworkerset
from e2e.cluster import LocalCluster
from e2e.harness.launcher import OperatorProcess, memory_mib
from lws_operator.api.defaults import apply_defaults
from lws_operator.kube.cache import lean
from lws_operator.kube.client import ApiException, KubeClient, is_status
from lws_operator.logic.identity.revision import apply_revision
from lws_operator.logic.identity.revision_decision import decide_revision
from lws_operator.logic.mutation.pod import mutate_pod
from lws_operator.logic.workloads.services import shared_service, wants_shared_service
from lws_operator.logic.workloads.statefulsets import leader_statefulset, worker_statefulset

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "e2e" / "bench" / "results"
NAMESPACE = "lws-coldstart"
LWS_PATH = f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{NAMESPACE}/leaderworkersets"
STS_PATH = f"/apis/apps/v1/namespaces/{NAMESPACE}/statefulsets"
REV_PATH = f"/apis/apps/v1/namespaces/{NAMESPACE}/controllerrevisions"
SVC_PATH = f"/api/v1/namespaces/{NAMESPACE}/services"
POD_PATH = f"/api/v1/namespaces/{NAMESPACE}/pods"
CONCURRENCY = 24  # requests in flight while writing the objects
NOW = "2026-01-01T00:00:00Z"
# The resources of the sets: a write to any of them during the measured run is a failure.
SET_RESOURCES = ("leaderworkersets", "statefulsets", "pods", "services", "controllerrevisions",
                 "events")
TARGET_SECONDS, TARGET_RSS_MIB = 60.0, 1024.0  # the issue's, at 50,000 pods
SAMPLE_EVERY = 0.2


def set_name(index: int) -> str:
    return f"cold-{index:04d}"


# ------------------------------------------------------------------------------ the objects


def _kubelet_status(pod: dict[str, Any], index: int) -> dict[str, Any]:
    """What a kubelet reports of a started pod: Running, every condition True, its container
    running; addresses made up from ``index``."""
    ip = f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}"
    return {
        "phase": "Running", "hostIP": "10.255.0.1", "hostIPs": [{"ip": "10.255.0.1"}],
        "podIP": ip, "podIPs": [{"ip": ip}], "startTime": NOW, "qosClass": "Burstable",
        "conditions": [{"type": t, "status": "True", "lastProbeTime": None,
                        "lastTransitionTime": NOW}
                       for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                                 "ContainersReady", "PodScheduled")],
        "containerStatuses": [{"name": c["name"], "ready": True, "restartCount": 0,
                               "started": True, "image": c.get("image", ""),
                               "imageID": "", "containerID": f"containerd://{index:064x}",
                               "state": {"running": {"startedAt": NOW}},
                               "lastState": {}}
                              for c in pod["spec"].get("containers") or []],
    }


def _sts_status(sts: dict[str, Any]) -> dict[str, Any]:
    """A StatefulSet controller's status of a StatefulSet whose pods are all Ready."""
    replicas = int(sts["spec"]["replicas"])
    revision = f"{sts['metadata']['name']}-{sts['metadata']['uid'][:10]}"
    return {"observedGeneration": sts["metadata"].get("generation", 1), "replicas": replicas,
            "readyReplicas": replicas, "currentReplicas": replicas,
            "updatedReplicas": replicas, "availableReplicas": replicas,
            "currentRevision": revision, "updateRevision": revision, "collisionCount": 0}


def _pod(sts: dict[str, Any], ordinal: int) -> dict[str, Any]:
    """The pod ``ordinal`` a StatefulSet creates from its template, as our pod webhook
    admits it."""
    template = copy.deepcopy(sts["spec"]["template"])
    name = f"{sts['metadata']['name']}-{ordinal}"
    meta = template.setdefault("metadata", {})
    meta["name"] = name
    meta["labels"] = {**(meta.get("labels") or {}),
                      "statefulset.kubernetes.io/pod-name": name,
                      "apps.kubernetes.io/pod-index": str(ordinal),
                      "controller-revision-hash": _sts_status(sts)["currentRevision"]}
    meta["ownerReferences"] = [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                "name": sts["metadata"]["name"], "uid": sts["metadata"]["uid"],
                                "controller": True, "blockOwnerDeletion": True}]
    spec = template["spec"]
    spec["hostname"] = name
    spec["subdomain"] = sts["spec"]["serviceName"]
    spec["nodeName"] = f"node-{ordinal % 64:03d}"
    pod = {"apiVersion": "v1", "kind": "Pod", **template}
    pod["metadata"]["namespace"] = NAMESPACE
    return mutate_pod(pod)


class Writer:
    """Writes the objects of the sets, ``CONCURRENCY`` requests at a time."""

    def __init__(self, client: KubeClient, profile: Profile) -> None:
        self.client = client
        self.profile = profile
        self.requests = 0

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.requests += 1
        try:
            return await self.client.request("POST", path, body=body)
        except ApiException as exc:
            if not is_status(exc, 409):
                raise
            name = body["metadata"]["name"]
            self.requests += 1
            return await self.client.request("GET", f"{path}/{name}")

    async def status(self, path: str, name: str, status: dict[str, Any]) -> None:
        self.requests += 1
        await self.client.request("PATCH", f"{path}/{name}/status", body={"status": status},
                                  content_type="application/merge-patch+json")

    async def pods(self, sts: dict[str, Any], first: int, index: int) -> list[dict[str, Any]]:
        """Every pod of ``sts`` (ordinals from ``first``), created and reported Running."""
        out = []
        for ordinal in range(first, first + int(sts["spec"]["replicas"])):
            pod = await self.post(POD_PATH, _pod(sts, ordinal))
            status = _kubelet_status(pod, index * 64 + ordinal)
            await self.status(POD_PATH, pod["metadata"]["name"], status)
            pod["status"] = status
            out.append(pod)
        return out

    async def one_set(self, index: int) -> None:
        """Set ``index`` and everything the operator and the StatefulSet controller would
        have made of it."""
        p = self.profile
        manifest = leaderworkerset(set_name(index), p)
        manifest["metadata"]["namespace"] = NAMESPACE
        lws = await self.post(LWS_PATH, apply_defaults(manifest))
        if lws.get("status"):
            return  # written and settled by an earlier run
        lws.setdefault("apiVersion", "leaderworkerset.x-k8s.io/v1")
        lws.setdefault("kind", "LeaderWorkerSet")
        decision = decide_revision(lws, None, [])
        assert decision.create is not None
        revision = await self.post(REV_PATH, decision.create)
        key = decision.current_key
        if wants_shared_service(lws):
            await self.post(SVC_PATH, shared_service(lws))
        leader_sts = await self.post(STS_PATH, leader_statefulset(lws, key, 0, p.replicas))
        await self.status(STS_PATH, leader_sts["metadata"]["name"], _sts_status(leader_sts))
        revision_lws = apply_revision(lws, dict(revision["data"]))
        for leader in await self.pods(leader_sts, 0, index):
            worker_sts = await self.post(STS_PATH, worker_statefulset(
                revision_lws, lws, lean(leader, "Pod"), None))
            await self.status(STS_PATH, worker_sts["metadata"]["name"], _sts_status(worker_sts))
            await self.pods(worker_sts, 1, index)


# ------------------------------------------------------------------------- one operator run


def _families(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def _sum(families: dict[str, list[tuple[dict[str, str], float]]], metric: str,
         **labels: str) -> float:
    return sum(v for ls, v in families.get(metric, ())
               if all(ls.get(k) == want for k, want in labels.items()))


WRITE_VERBS = ("create", "update", "patch", "apply", "delete", "deletecollection")


def set_writes(families: dict[str, list[tuple[dict[str, str], float]]], verb_label: str,
               resource_label: str, metric: str) -> dict[str, float]:
    """Write requests to the sets' resources, by ``verb resource[/subresource]``."""
    out: dict[str, float] = {}
    for labels, value in families.get(metric, ()):
        verb = labels.get(verb_label, "").lower()
        resource = labels.get(resource_label, "")
        sub = labels.get("subresource", "")
        if verb in WRITE_VERBS and resource.split("/")[0] in SET_RESOURCES and value:
            what = f"{verb} {resource}{'/' + sub if sub else ''}"
            out[what] = out.get(what, 0.0) + value
    return out


async def apiserver_writes(client: KubeClient) -> dict[str, float]:
    text = (await client.raw("GET", "/metrics")).decode()
    return set_writes(_families(text), "verb", "resource", "apiserver_request_total")


@dataclass
class Run:
    """What one operator run measured."""

    sets: int
    seconds: dict[str, float] = field(default_factory=dict)
    rss: dict[str, float] = field(default_factory=dict)
    passes: float = 0.0
    operator_writes: dict[str, float] = field(default_factory=dict)
    apiserver_writes: dict[str, float] = field(default_factory=dict)
    samples: list[tuple[float, float]] = field(default_factory=list)
    log: str = ""

    def report(self) -> dict[str, Any]:
        return {"seconds": {k: round(v, 2) for k, v in self.seconds.items()},
                "rss_mib": self.rss, "passes": self.passes,
                "operator_writes": self.operator_writes,
                "apiserver_writes": {k: v for k, v in self.apiserver_writes.items() if v},
                "rss_timeline": [[round(t, 1), r] for t, r in self.samples[::5]],
                "log": self.log}


SYNCED_LOG = re.compile(r"LeaderWorkerSet caches synced")


async def run_operator(kubeconfig: str, client: KubeClient, sets: int, results: Path,
                       label: str, limit: float, tree: Path | None = None) -> Run:
    """Start the operator, follow it until it is quiet after every set had a pass, stop it."""
    run = Run(sets)
    run_id = f"{label}-{uuid.uuid4().hex[:6]}"
    log_path = results / f"coldstart-{run_id}.log"
    run.log = str(log_path)
    operator = OperatorProcess.measured(kubeconfig, run_id, log_path)
    if tree is not None:  # ``python -m lws_operator`` imports the package from its cwd
        operator.cwd = tree
    await client.request("POST", "/api/v1/namespaces", body={
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": operator.namespace}})
    before = await apiserver_writes(client)
    begin = time.monotonic()
    starting = asyncio.create_task(operator.start())
    try:
        while operator.process is None:  # noqa: ASYNC110 - set by start() once spawned
            await asyncio.sleep(0.01)
        pid = operator.pid
        quiet_since: float | None = None
        synced_at: float | None = None
        while True:
            now = time.monotonic() - begin
            if now > limit:
                raise TimeoutError(f"{label}: not quiet after {limit}s:\n"
                                   f"{operator.log_tail()}")
            if not operator.alive:
                raise RuntimeError(f"{label}: operator exited:\n{operator.log_tail()}")
            mem = memory_mib(pid)
            run.samples.append((now, mem["rss"]))
            if starting.done() and "ready" not in run.seconds:
                starting.result()
                run.seconds["ready"] = now
                run.rss["ready"] = mem["rss"]
            if synced_at is None and SYNCED_LOG.search(operator.log_text(1 << 20)):
                synced_at = now
                run.seconds["caches_synced"] = now
                run.rss["caches_synced"] = mem["rss"]
            if synced_at is not None:
                try:
                    families = _families(await operator.metrics())
                except OSError:  # the metrics endpoint is not listening yet
                    await asyncio.sleep(SAMPLE_EVERY)
                    continue
                passes = _sum(families, "controller_runtime_reconcile_total",
                              controller="leaderworkerset")
                depth = _sum(families, "workqueue_depth", name="leaderworkerset")
                busy = _sum(families, "controller_runtime_active_workers",
                            controller="leaderworkerset")
                if passes >= sets and "every_set_passed" not in run.seconds:
                    run.seconds["every_set_passed"] = now
                    run.rss["every_set_passed"] = mem["rss"]
                if passes >= sets and depth == 0 and busy == 0 and starting.done():
                    if quiet_since is None:
                        quiet_since = now
                    elif now - quiet_since >= 2.0:  # two seconds without work: done
                        run.seconds["quiet"] = quiet_since
                        run.passes = passes
                        run.operator_writes = set_writes(
                            families, "verb", "resource", "lws_operator_api_requests_total")
                        break
                else:
                    quiet_since = None
            await asyncio.sleep(SAMPLE_EVERY)
        mem = memory_mib(pid)
        run.rss["end"] = mem["rss"]
        run.rss["peak"] = mem["peak_rss"]
    finally:
        starting.cancel()
        if operator.process is not None:
            await operator.stop(30)
        await client.request("DELETE", f"/api/v1/namespaces/{operator.namespace}")
    after = await apiserver_writes(client)
    run.apiserver_writes = {k: v - before.get(k, 0.0) for k, v in after.items()
                            if v - before.get(k, 0.0)}
    return run


# -------------------------------------------------------------------------------- the points


async def populate(client: KubeClient, profile: Profile, sets: int) -> tuple[float, int]:
    """Sets ``0 .. sets-1`` exist with all their objects; the seconds it took and the
    requests it made."""
    await client.request("POST", "/api/v1/namespaces", body={
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}) \
        if await client.get(f"/api/v1/namespaces/{NAMESPACE}") is None else None
    listed = await client.request("GET", LWS_PATH, query={"limit": "1"})
    existing = int((listed.get("metadata") or {}).get("remainingItemCount") or 0) + \
        len(listed.get("items") or [])
    writer = Writer(client, profile)
    begin = time.monotonic()
    # A set whose LeaderWorkerSet exists was written whole by an earlier point (the last one
    # may have been cut short: it is checked again).
    first = max(existing - 1, 0)
    await bounded([lambda i=i: writer.one_set(i) for i in range(first, sets)],  # type: ignore[misc]
                   CONCURRENCY // 4)
    return time.monotonic() - begin, writer.requests


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    cluster = LocalCluster(args.cluster_dir)
    print(f"[coldstart] API-tier cluster in {args.cluster_dir}", file=sys.stderr, flush=True)
    await asyncio.to_thread(cluster.up, "api")
    await asyncio.to_thread(cluster.install_crd)
    kubeconfig = str(cluster.kubeconfig)
    client = await KubeClient.connect(kubeconfig)
    per_set = args.replicas * args.size
    points: list[dict[str, Any]] = []
    try:
        for pods in args.pods:
            sets = max(1, pods // per_set)
            profile = Profile("coldstart", sets=sets, replicas=args.replicas, size=args.size,
                              nodes=1, steady_seconds=0, timeout=args.timeout)
            print(f"[coldstart] {sets} sets x {args.replicas} x {args.size}: writing",
                  file=sys.stderr, flush=True)
            seconds, requests = await populate(client, profile, sets)
            print(f"[coldstart] written in {seconds:.0f}s ({requests} requests); settling",
                  file=sys.stderr, flush=True)
            settle = None if args.skip_settle else await run_operator(
                kubeconfig, client, sets, args.results, "settle", args.timeout)
            if settle is not None:
                print(f"[coldstart] settled: {settle.report()['seconds']}; measuring",
                      file=sys.stderr, flush=True)
            cold = await run_operator(kubeconfig, client, sets, args.results, "cold",
                                      args.timeout, args.operator_tree)
            point = {"pods": sets * per_set, "sets": sets, "replicas": args.replicas,
                     "size": args.size, "write_seconds": round(seconds, 1),
                     "write_requests": requests,
                     "settle": settle.report() if settle is not None else None,
                     "cold": cold.report()}
            points.append(point)
            print(json.dumps({k: v for k, v in point["cold"].items() if k != "rss_timeline"}),
                  file=sys.stderr, flush=True)
    finally:
        await client.close()
        if not args.keep_cluster:
            await asyncio.to_thread(cluster.down)
    return {"benchmark": "coldstart", "when": dt.datetime.now(dt.UTC).isoformat(),
            "targets": {"seconds_at_50000": TARGET_SECONDS, "rss_mib_at_50000": TARGET_RSS_MIB},
            "points": points}


def summary_lines(report: dict[str, Any]) -> list[str]:
    lines = ["pods    sets  synced  passed  quiet   rss@ready  rss@synced  rss@end  peak  "
             "writes"]
    for p in report["points"]:
        c = p["cold"]
        s, r = c["seconds"], c["rss_mib"]
        writes = sum(c["operator_writes"].values()) + sum(c["apiserver_writes"].values())
        lines.append(f"{p['pods']:<7} {p['sets']:<5} {s.get('caches_synced', 0):<7} "
                     f"{s.get('every_set_passed', 0):<7} {s.get('quiet', 0):<7} "
                     f"{r.get('ready', 0):<10} {r.get('caches_synced', 0):<11} "
                     f"{r.get('end', 0):<8} {r.get('peak', 0):<5} {writes:g}")
    lines.append(f"targets at 50,000 pods: quiet within {TARGET_SECONDS:g} s, "
                 f"RSS <= {TARGET_RSS_MIB:g} MiB, no writes")
    return lines


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m e2e.bench.coldstart",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=lambda s: [int(x) for x in s.split(",")],
                        default=[5000, 20000, 50000],
                        help="cumulative points, in pods (default 5000,20000,50000)")
    parser.add_argument("--replicas", type=int, default=5)
    parser.add_argument("--size", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds one operator run may take to be quiet")
    parser.add_argument("--cluster-dir", type=Path, default=REPO / ".cluster-coldstart")
    parser.add_argument("--keep-cluster", action="store_true",
                        help="leave the cluster (and its objects) running for the next run")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--operator-tree", type=Path, default=None,
                        help="measure the operator package in this directory instead of this "
                             "checkout's (a before/after comparison; the settling run uses "
                             "this checkout's)")
    parser.add_argument("--skip-settle", action="store_true",
                        help="no settling run (the sets were settled by an earlier run)")
    args = parser.parse_args(argv)
    if args.replicas < 1 or args.size < 2 or any(p < 1 for p in args.pods):
        parser.error("--replicas must be >= 1, --size >= 2, every point >= 1 pod")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.results.mkdir(parents=True, exist_ok=True)
    report = asyncio.run(measure(args))
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    path = args.results / f"coldstart-{stamp}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print("\n".join(summary_lines(report)))
    print(f"[coldstart] {path}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
