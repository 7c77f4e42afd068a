"""Pod admission latency of the operator at a fixed rate, alone and while its controller is busy.

    python -m e2e.bench.webhook_latency [--rate 200] [--duration 20] [--busy] [--dry-run]
                                        [--sets 20 --replicas 5 --size 8] [--kubeconfig PATH]
                                        [--cluster-dir DIR] [--output FILE]

Without ``--kubeconfig`` it starts its own api-tier cluster in ``--cluster-dir`` (by default
``.cluster/bench-webhook``; the CRD installed) and stops it afterwards. The operator runs as
``lws-operator run`` does in production (``OperatorProcess.measured``: local mode, webhooks
registered by URL, its admission child included), controllers on. The driver creates
LeaderWorkerSet leader pods at ``rate`` per second (open loop: a slow answer does not slow the
schedule), checks that every created pod came back mutated, deletes them, waits until they are
gone, and prints a JSON summary.

With ``--dry-run`` the creates are dry runs (``dryRun=All``): kube-apiserver admits each pod
exactly as it would store it (the same AdmissionReview reaches the webhook, ``dryRun: true`` in
it, and the answer is checked the same way) and stores nothing, so no pod is scheduled, run by
kwok or deleted afterwards. On the 2-core machine that is the only way the driver reaches 200
admissions a second: with the pods stored, kube-scheduler, kwok, etcd and kube-apiserver itself
saturate both cores at 150 to 190 a second, and the webhook's server-side tail is the kernel's
scheduling of its process among theirs (measured: p99 4.5 to 8.4 ms stored, 1.6 to 2.0 ms as
dry runs, on the same cluster and code). In a real cluster the scheduler and the kubelets do
not share the webhook's cores. The scale benchmark measures both.

With ``--busy`` the controller works during the whole measured window: ``sets``
LeaderWorkerSets are created, rolled to a new image and deleted, over and over, in a namespace
of their own (on the api tier no pod is created for them, so the work is the controller's
alone: StatefulSets, Services, revisions, status; on a full-tier cluster their pods go through
the same webhook too).

Reported, never asserted (they depend on the machine):

* ``server_ms``: the webhook's own handling time per pod admission, from the operator's
  ``controller_runtime_webhook_latency_seconds`` over the measured window (p50/p99 interpolated
  in its buckets, and the exact share answered within 5 ms: the target is p99 <= 5 ms, i.e. a
  share of at least 0.99); ``server_ms_every_review`` the same over every review answered in
  the window (the validating pod webhook's call too: the API server waits on both);
* ``apiserver_ms``: kube-apiserver's view of each call to ``mpod.kb.io``
  (``apiserver_admission_webhook_admission_duration_seconds``, type admit: network, TLS and
  our answer; its buckets are coarse, 5 ms then 25 ms);
* ``create_ms``: pod creation latency seen by the client (API server, admission chain, etcd);
* ``cpu_seconds_elsewhere``: over the same window, CPU seconds of this driver, of the control
  plane's processes (when the cluster is this tool's own or laid out like it) and of the whole
  machine (and the seconds the hypervisor stole from it), to tell what held the rate back
  when ``achieved_rate`` falls short;
* ``connections``: TCP (TLS) connections our webhook server accepted over the window
  (``lws_operator_webhook_connections_accepted_total``), the admissions it answered on every
  path, and connections per admission: near 0 when kube-apiserver reuses its kept-alive
  connections, near 1 when each call pays a TLS handshake; and the admission child's CPU
  milliseconds per admission;
* ``operator``: CPU seconds of the operator process and of its admission child over the window,
  their resident memory at its end, and the resident, proportional and unique memory of each
  (``shared_memory_mib``) before and after the load: the child is forked at the operator's
  start (``admission.fork``), so the two share the pages of the files both map and what the
  child inherited and neither wrote to since; the RSS sum counts those twice, the operator's
  RSS plus the child's USS once.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from e2e.bench import figures
from e2e.bench.workloads import Profile, leaderworkerset, rolled_leaderworkerset_patch
from e2e.harness.admission import drive, ensure_namespace, wait_until_admitting
from e2e.harness.launcher import (
    CLOCK_TICKS,
    OperatorProcess,
    cpu_seconds,
    memory_mib,
    shared_memory_mib,
)
from lws_operator.api.constants import GROUP, MUTATE_POD_PATH, NAME_LABEL, PLURAL, VERSION
from lws_operator.kube.client import ApiException, KubeClient

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "e2e" / "bench" / "results" / "webhook_latency.json"
LOGS = REPO / ".cluster" / "bench-webhook-logs"
WEBHOOK = "mpod.kb.io"


def children(pid: int) -> list[int]:
    """The direct children of ``pid`` (the admission process)."""
    out: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            out += [int(c) for c in (task / "children").read_text().split()]
    return out


def cpu_by_process(pid: int) -> dict[str, float]:
    return {"operator": cpu_seconds(pid),
            "admission_child": sum(cpu_seconds(c) for c in children(pid))}


def machine_seconds() -> tuple[float, float]:
    """CPU seconds so far of this machine's cores: busy on anything but idling (every
    process's, the other users' of a shared machine included), and stolen by the hypervisor
    (time the cores wanted to run and another guest ran instead: a disturbed round shows
    there, not in any process's figure). Both from ``/proc/stat``."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = fields[:8]
    return (user + nice + system + irq + softirq) / CLOCK_TICKS, steal / CLOCK_TICKS


def cpu_elsewhere(kubeconfig: str) -> dict[str, float]:
    """CPU seconds so far of what else serves the load: this driver process, and the control
    plane's processes when the cluster's pid files sit beside the kubeconfig (``e2e.cluster``),
    and the whole machine (``machine``; ``steal``, what the hypervisor took)."""
    busy, stolen = machine_seconds()
    out = {"driver": time.process_time(), "machine": busy, "steal": stolen}
    for pid_file in sorted((Path(kubeconfig).parent / "pids").glob("*.pid")):
        with contextlib.suppress(OSError, ValueError, IndexError):
            out[pid_file.stem] = cpu_seconds(int(pid_file.read_text()))
    return out


def memory_by_process(pid: int) -> dict[str, dict[str, float]]:
    """RSS, PSS and USS (``shared_memory_mib``) of the operator and of its admission child."""
    out = {"operator": shared_memory_mib(pid)}
    for child in children(pid):
        with contextlib.suppress(OSError):
            out["admission_child"] = shared_memory_mib(child)
    return out


def connections(scrape: figures.Scrape, child_cpu_seconds: float) -> dict[str, Any]:
    """Connections accepted, admissions answered (every webhook path: they share the
    connections), their ratio, and the admission child's CPU per admission, over one window
    (``scrape`` a ``figures.delta``)."""
    accepted = figures.total(scrape, "lws_operator_webhook_connections_accepted_total")
    admissions = figures.total(scrape, "controller_runtime_webhook_requests_total")
    return {"accepted": int(accepted), "admissions": int(admissions),
            "per_admission": round(accepted / admissions, 3) if admissions else None,
            "child_cpu_ms_per_admission": (round(child_cpu_seconds / admissions * 1000, 3)
                                           if admissions else None)}


def summary(cumulative: dict[float, float]) -> dict[str, Any]:
    """Count, interpolated p50/p99 in ms, and the exact share within 5 ms."""
    out = figures.histogram_summary(cumulative, unit=0.001)
    out.pop("buckets", None)
    return {**out, "share_within_5ms": figures.share_within(0.005, cumulative)}


async def pods_gone(kube: KubeClient, pods: str, timeout: float = 300.0) -> None:  # noqa: ASYNC109
    """Wait until the pods deleted at ``pods`` are gone: kwok confirms each deletion of a
    scheduled pod, kube-scheduler and kube-apiserver see it through, thousands of them take
    tens of seconds, and the scale benchmark's next round must not start while they still
    load the machine (its baseline would be slowed, which flatters the operator's ratios).
    One pod asked for per look (``limit=1``). Past ``timeout`` it says so and returns."""
    deadline = time.monotonic() + timeout
    while (await kube.request("GET", pods, query={"labelSelector": NAME_LABEL, "limit": "1"})
           ).get("items"):
        if time.monotonic() > deadline:
            print(f"[bench] the pods at {pods} are not gone after {timeout:.0f} s; going on",
                  file=sys.stderr, flush=True)
            return
        await asyncio.sleep(0.5)


class Workload:
    """Keeps the controller busy: create, roll and delete ``sets`` LeaderWorkerSets, again
    and again until stopped. Counts the cycles it completed."""

    def __init__(self, kube: KubeClient, namespace: str, sets: int, replicas: int,
                 size: int) -> None:
        self.kube = kube
        self.namespace = namespace
        self.profile = Profile(
            name="webhook-busy", sets=sets, replicas=replicas, size=size, nodes=0,
            steady_seconds=0, timeout=0)
        self.path = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
        self.phases: list[str] = []

    async def _each(self, job: Any) -> None:
        await asyncio.gather(*(job(f"busy-{i}") for i in range(self.profile.sets)))

    async def _create(self, name: str) -> None:
        await self.kube.request("POST", self.path, body=leaderworkerset(name, self.profile))

    async def _roll(self, name: str) -> None:
        await self.kube.request("PATCH", f"{self.path}/{name}",
                                body=rolled_leaderworkerset_patch(),
                                content_type="application/merge-patch+json")

    async def _delete(self, name: str) -> None:
        with contextlib.suppress(ApiException):
            await self.kube.request("DELETE", f"{self.path}/{name}")

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            for phase, job, pause in (("create", self._create, 3.0), ("rollout", self._roll, 3.0),
                                      ("delete", self._delete, 2.0)):
                await self._each(job)
                self.phases.append(phase)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), pause)
            # The deletions finish before the next create (a finalizer-free LeaderWorkerSet
            # goes at once; its children go with the garbage collector, if any).
            for _ in range(60):
                if not (await self.kube.request("GET", self.path)).get("items"):
                    break
                await asyncio.sleep(0.5)
        await self._each(self._delete)


async def delete_pods(kube: KubeClient, pods: str, attempts: int = 5) -> None:
    """Delete the run's pods and wait until they are gone. kube-apiserver gives a request 60 s
    and answers 504 after that; on a loaded machine a collection of 2,000 pods can take longer,
    and a 504 ended a whole benchmark run. The deletion is then sent again: it picks up what is
    left."""
    for attempt in range(attempts):
        try:
            await kube.request("DELETE", pods, query={"labelSelector": NAME_LABEL},
                               timeout=600.0)
            break
        except ApiException as exc:
            if exc.status != 504 or attempt == attempts - 1:
                raise
    await pods_gone(kube, pods)


async def bench(args: argparse.Namespace, kubeconfig: str) -> dict[str, Any]:
    """One measured run; ``args`` needs ``rate`` and ``duration`` (``busy``, ``sets``,
    ``replicas`` and ``size`` default to a quiet controller), as ``e2e.bench.scale`` calls it."""
    busy = bool(getattr(args, "busy", False))
    dry_run = bool(getattr(args, "dry_run", False))
    kube = await KubeClient.connect(kubeconfig)
    run_id = uuid.uuid4().hex[:6]
    namespace, work = f"bench-{run_id}", f"bench-{run_id}-work"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    operator = OperatorProcess.measured(kubeconfig, run_id, LOGS / f"operator-{run_id}.log")
    stop_work = asyncio.Event()
    workload = Workload(kube, work, getattr(args, "sets", 20), getattr(args, "replicas", 5),
                        getattr(args, "size", 8))
    working: asyncio.Task[None] | None = None
    try:
        for ns in (operator.namespace, namespace, work):
            await ensure_namespace(kube, ns)
        await operator.start()
        await wait_until_admitting(kube, namespace)
        await drive(kube, namespace, rate=args.rate, duration=2.0, dry_run=True, prefix="warm")
        if busy:
            working = asyncio.create_task(workload.run(stop_work))
            await asyncio.sleep(1.0)  # the first creates are under way
        memory_before = memory_by_process(operator.pid)
        ours_before = figures.parse(await operator.metrics())
        theirs_before = figures.parse((await kube.raw("GET", "/metrics")).decode())
        cpu_before = cpu_by_process(operator.pid)
        elsewhere_before, window_start = cpu_elsewhere(kubeconfig), time.monotonic()
        load = await drive(kube, namespace, rate=args.rate, duration=args.duration,
                           dry_run=dry_run, prefix="pod")
        cpu_after = cpu_by_process(operator.pid)
        elsewhere_after, window = cpu_elsewhere(kubeconfig), time.monotonic() - window_start
        ours = figures.delta(figures.parse(await operator.metrics()), ours_before)
        theirs = figures.delta(figures.parse((await kube.raw("GET", "/metrics")).decode()),
                               theirs_before)
        memory = {"operator": memory_mib(operator.pid).get("rss"),
                  "admission_child": sum(memory_mib(c).get("rss", 0.0)
                                         for c in children(operator.pid))}
        memory_after = memory_by_process(operator.pid)
        stop_work.set()
        if working is not None:
            await working
        listed = await kube.request("GET", pods, query={"labelSelector": NAME_LABEL})
        # Thousands of pods: deleting them takes longer than a request's usual 30 s.
        if not dry_run:
            await delete_pods(kube, pods)
        code = await operator.stop()
    finally:
        stop_work.set()
        if working is not None and not working.done():
            working.cancel()
        await operator.stop()
        for ns in (namespace, work, operator.namespace):
            with contextlib.suppress(ApiException):
                await kube.request("DELETE", f"/api/v1/namespaces/{ns}")
        base = "/apis/admissionregistration.k8s.io/v1"
        for path in (f"{base}/mutatingwebhookconfigurations/{operator.configurations[0]}",
                     f"{base}/validatingwebhookconfigurations/{operator.configurations[1]}"):
            with contextlib.suppress(ApiException):
                await kube.request("DELETE", path)
        await kube.close()
    return {
        "benchmark": "webhook_latency",
        "controller": "busy" if busy else "quiet",
        "dry_run": dry_run,
        "busy_phases_completed": workload.phases if busy else None,
        "target_rate": args.rate, "duration_s": args.duration,
        "achieved_rate": round(load.rate, 1),
        "pods_created": len(load.created), "pods_listed": len(listed["items"]),
        "failures": len(load.failures), "failure_samples": load.failures[:5],
        "server_ms": summary(figures.buckets(
            ours, "controller_runtime_webhook_latency_seconds", webhook=MUTATE_POD_PATH)),
        # Every review the server answered in the window, the validating pod webhook's too
        # (each pod is two reviews): the same figure over both calls the API server waits on.
        "server_ms_every_review": summary(figures.buckets(
            ours, "controller_runtime_webhook_latency_seconds")),
        "apiserver_ms": summary(figures.buckets(
            theirs, "apiserver_admission_webhook_admission_duration_seconds", name=WEBHOOK,
            type="admit")),
        "create_ms": {"requests": len(load.latencies), **percentiles(load.latencies)},
        "connections": connections(ours, cpu_after["admission_child"]
                                   - cpu_before["admission_child"]),
        # Who else spent CPU during the load, to tell what held the rate back: on a 2-core
        # machine ``machine`` near 2 x ``window_s`` means every core was busy.
        "window_s": round(window, 1),
        "cpu_seconds_elsewhere": {k: round(v - elsewhere_before[k], 2)
                                  for k, v in elsewhere_after.items() if k in elsewhere_before},
        "operator": {
            "cpu_seconds": {k: round(cpu_after[k] - cpu_before[k], 2) for k in cpu_after},
            "rss_mib": memory,
            # Before and after the measured load, each process's RSS, PSS and USS: the pair
            # costs about the operator's RSS plus the child's USS (their shared pages once).
            "memory_mib_before_load": memory_before, "memory_mib_after_load": memory_after,
            "exit_code": code},
    }


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p99 (and max) in milliseconds, from every value."""
    import statistics

    if len(values) < 2:
        return {"p50": values[0] * 1000 if values else 0.0, "p99": 0.0, "max": 0.0}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": round(cuts[49] * 1000, 3), "p99": round(cuts[98] * 1000, 3),
            "max": round(max(values) * 1000, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--kubeconfig", help="an existing cluster (default: start an api tier)")
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--busy", action="store_true",
                        help="keep the controller busy with LeaderWorkerSets meanwhile")
    parser.add_argument("--dry-run", action="store_true",
                        help="dry-run creates: admitted, never stored (module docstring)")
    parser.add_argument("--sets", type=int, default=20)
    parser.add_argument("--replicas", type=int, default=5)
    parser.add_argument("--size", type=int, default=8)
    parser.add_argument("--keep-cluster", action="store_true")
    parser.add_argument("--cluster-dir", type=Path, default=REPO / ".cluster" / "bench-webhook",
                        help="where to start the api tier when no --kubeconfig is given")
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    from e2e.cluster import LocalCluster

    cluster = None
    kubeconfig = args.kubeconfig
    started = time.monotonic()
    if kubeconfig is None:
        cluster = LocalCluster(args.cluster_dir)
        cluster.up("api", timeout=180)
        cluster.install_crd()
        kubeconfig = str(cluster.kubeconfig)
    try:
        result = asyncio.run(bench(args, kubeconfig))
    finally:
        if cluster is not None and not args.keep_cluster:
            cluster.down()
    result["wall_seconds"] = round(time.monotonic() - started, 1)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0 if result["failures"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
