"""Pod admission latency at a fixed rate, through a real API server.

    python -m e2e.bench.webhook_latency [--rate 200] [--duration 20] [--kubeconfig PATH]

Without ``--kubeconfig`` it starts its own api-tier cluster in ``.cluster/bench-webhook`` and stops
it afterwards. The operator's admission side runs as a separate process (``serve`` below: the real
``WebhookRuntime``, registered by URL and confined to the benchmark namespace), so the load
generator does not share its event loop. The driver creates LeaderWorkerSet leader pods at
``rate`` per second (open loop: a slow answer does not slow the schedule), checks that every
created pod came back mutated, deletes them, and prints a JSON summary:

* ``server_ms``: the webhook's own handling time per review, measured inside the server from the
  request's arrival to its answer (p50/p99 over the measured window);
* ``create_ms``: end-to-end pod creation latency seen by the client (API server, admission chain,
  etcd).

The figures are reported, never asserted: they depend on the machine. The load itself (``drive``)
and the in-process admission side come from the test harness (``e2e.harness.admission``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import signal
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from e2e.harness.admission import drive, ensure_namespace, options_for, wait_until_admitting
from lws_operator.admission.runtime import WebhookRuntime
from lws_operator.api.constants import MUTATE_POD_PATH, NAME_LABEL
from lws_operator.kube.client import ApiException, KubeClient

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "e2e" / "bench" / "results" / "webhook_latency.json"


_WEBHOOK_BUCKETS = re.compile(
    r'^apiserver_admission_webhook_admission_duration_seconds_bucket\{(?P<labels>[^}]*)\} '
    r'(?P<count>[0-9.e+]+)$', re.MULTILINE)


async def apiserver_webhook_buckets(kube: KubeClient, webhook: str) -> dict[float, float]:
    """The API server's own histogram of its calls to ``webhook`` (le -> cumulative count)."""
    text = (await kube.raw("GET", "/metrics")).decode()
    out: dict[float, float] = {}
    for match in _WEBHOOK_BUCKETS.finditer(text):
        labels = dict(re.findall(r'(\w+)="([^"]*)"', match.group("labels")))
        if labels.get("name") == webhook and labels.get("type") == "admit":
            le = float("inf") if labels["le"] == "+Inf" else float(labels["le"])
            out[le] = out.get(le, 0.0) + float(match.group("count"))
    return out


def within(before: dict[float, float], after: dict[float, float], bound: float) -> float | None:
    """Share of the calls between two scrapes that took at most ``bound`` seconds."""
    total = after.get(float("inf"), 0.0) - before.get(float("inf"), 0.0)
    if bound not in after or total <= 0:
        return None
    return round((after[bound] - before.get(bound, 0.0)) / total, 4)


def percentiles(values: list[float]) -> dict[str, float]:
    """p50/p99 (and max) in milliseconds."""
    if len(values) < 2:
        return {"p50": values[0] * 1000 if values else 0.0, "p99": 0.0, "max": 0.0}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": round(cuts[49] * 1000, 3), "p99": round(cuts[98] * 1000, 3),
            "max": round(max(values) * 1000, 3)}


# ------------------------------------------------------------------------------ the server


async def serve(args: argparse.Namespace) -> list[tuple[float, str, float]]:
    """The admission side as the operator runs it, recording its own handling times
    (wall-clock time, path, seconds) until SIGTERM."""
    timings: list[tuple[float, str, float]] = []
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.add_signal_handler(signal.SIGTERM, stop.set)
    kube = await KubeClient.connect(args.kubeconfig)
    try:
        options = options_for(args.namespace, sync_interval=5.0)
        await ensure_namespace(kube, options.namespace)
        runtime = WebhookRuntime(kube, options,
                                 observer=lambda p, s: timings.append((time.time(), p, s)))
        task = asyncio.create_task(runtime.run(stop))
        await asyncio.wait([task, asyncio.create_task(runtime.serving.wait())],
                           return_when=asyncio.FIRST_COMPLETED)
        print("READY" if runtime.serving.is_set() else "FAILED", flush=True)
        await task
    finally:
        await kube.close()
    return timings


# ------------------------------------------------------------------------------ the driver


async def bench(args: argparse.Namespace, kubeconfig: str) -> dict[str, Any]:
    kube = await KubeClient.connect(kubeconfig)
    namespace = f"bench-{uuid.uuid4().hex[:8]}"
    timings_file = REPO / ".cluster" / f"{namespace}-timings.json"
    pods = f"/api/v1/namespaces/{namespace}/pods"
    try:
        await ensure_namespace(kube, namespace)
        server = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "e2e.bench.webhook_latency", "serve",
            "--kubeconfig", kubeconfig, "--namespace", namespace, "--timings", str(timings_file),
            cwd=REPO, stdout=asyncio.subprocess.PIPE)
        try:
            assert server.stdout is not None
            line = (await server.stdout.readline()).decode()
            if line.strip() != "READY":
                raise RuntimeError(f"webhook server did not start: {line!r}")
            await wait_until_admitting(kube, namespace)
            await drive(kube, namespace, rate=args.rate, duration=2.0, dry_run=True,
                        prefix="warm")
            before = await apiserver_webhook_buckets(kube, "mpod.kb.io")
            load = await drive(kube, namespace, rate=args.rate, duration=args.duration,
                               dry_run=False, prefix="pod")
            after = await apiserver_webhook_buckets(kube, "mpod.kb.io")
            listed = await kube.request("GET", pods, query={"labelSelector": NAME_LABEL})
            await kube.request("DELETE", pods, query={"labelSelector": NAME_LABEL})
            left = await kube.request("GET", pods, query={"labelSelector": NAME_LABEL})
        finally:
            server.send_signal(signal.SIGTERM)
            await asyncio.wait_for(server.wait(), 30)
        timings = json.loads(await asyncio.to_thread(timings_file.read_text))
        await asyncio.to_thread(timings_file.unlink)
    finally:
        for ns in (namespace, f"{namespace}-op"):
            with contextlib.suppress(ApiException):
                await kube.request("DELETE", f"/api/v1/namespaces/{ns}")
        await kube.close()
    window = [s for t, p, s in timings if p == MUTATE_POD_PATH and load.started <= t <= load.ended]
    return {
        "benchmark": "webhook_latency",
        "target_rate": args.rate, "duration_s": args.duration,
        "achieved_rate": round(load.rate, 1),
        "pods_created": len(load.created), "pods_listed": len(listed["items"]),
        "pods_left_after_delete": len(left["items"]),
        "failures": len(load.failures), "failure_samples": load.failures[:5],
        "server_ms": {"reviews": len(window), **percentiles(window)},
        "create_ms": {"requests": len(load.latencies), **percentiles(load.latencies)},
        # From kube-apiserver's own histogram (buckets 5 ms, 25 ms, ...): its view of each call
        # to mpod.kb.io, including the network and TLS; the share within the 5 ms budget.
        "apiserver_webhook_call_within_5ms": within(before, after, 0.005),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    srv = sub.add_parser("serve", help="(internal) run the admission side")
    srv.add_argument("--kubeconfig", required=True)
    srv.add_argument("--namespace", required=True)
    srv.add_argument("--timings", required=True)
    parser.add_argument("--kubeconfig", help="an existing cluster (default: start an api tier)")
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--duration", type=float, default=20.0)
    parser.add_argument("--keep-cluster", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "serve":
        Path(args.timings).write_text(json.dumps(asyncio.run(serve(args))))
        return 0

    from e2e.cluster import LocalCluster

    cluster = None
    kubeconfig = args.kubeconfig
    if kubeconfig is None:
        cluster = LocalCluster(REPO / ".cluster" / "bench-webhook")
        cluster.up("api", timeout=180)
        kubeconfig = str(cluster.kubeconfig)
    try:
        summary = asyncio.run(bench(args, kubeconfig))
    finally:
        if cluster is not None and not args.keep_cluster:
            cluster.down()
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))
    return 0 if summary["failures"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
