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

The figures are reported, never asserted: they depend on the machine. The load helpers here are
also used by the certificate-rotation test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import signal
import ssl
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.cluster import LocalCluster
from e2e.kube import Kube
from lws_operator.admission.runtime import WebhookOptions, WebhookRuntime
from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    MUTATE_POD_PATH,
    NAME_LABEL,
    SIZE_ANNOTATION,
    WORKER_INDEX_LABEL,
)
from lws_operator.kube.client import ApiException, KubeClient, status_message

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "e2e" / "bench" / "results" / "webhook_latency.json"


def lws_pod(name: str, group: str = "bench", size: int = 2) -> dict[str, Any]:
    """A leader pod as a LeaderWorkerSet's leader StatefulSet would create it."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {NAME_LABEL: group, WORKER_INDEX_LABEL: "0"},
                     "annotations": {SIZE_ANNOTATION: str(size)}},
        "spec": {"subdomain": group,
                 "containers": [{"name": "main", "image": "busybox"}]},
    }


def is_mutated(pod: dict[str, Any]) -> bool:
    """Whether the pod webhook ran on ``pod`` (group labels and LWS env were added)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    env = ((pod.get("spec") or {}).get("containers") or [{}])[0].get("env") or []
    return GROUP_INDEX_LABEL in labels and any(e.get("name") == "LWS_LEADER_ADDRESS" for e in env)


@dataclass
class LoadResult:
    scheduled: int = 0
    latencies: list[float] = field(default_factory=list)  # seconds, successful admissions
    failures: list[str] = field(default_factory=list)
    created: list[str] = field(default_factory=list)
    started: float = 0.0  # wall clock
    ended: float = 0.0

    @property
    def rate(self) -> float:
        return len(self.latencies) / max(self.ended - self.started, 1e-9)


async def create_pod(kube: KubeClient, namespace: str, pod: dict[str, Any], *,
                     dry_run: bool) -> dict[str, Any]:
    return await kube.request("POST", f"/api/v1/namespaces/{namespace}/pods", body=pod,
                              query={"dryRun": "All"} if dry_run else None, timeout=30.0)


async def drive(kube: KubeClient, namespace: str, *, rate: float, duration: float,
                dry_run: bool, prefix: str, max_in_flight: int = 256,
                until: asyncio.Event | None = None) -> LoadResult:
    """Create ``rate`` labelled pods per second for ``duration`` seconds, or until ``until``
    is set (open loop)."""
    result = LoadResult(started=time.time())
    loop = asyncio.get_running_loop()
    limit = asyncio.Semaphore(max_in_flight)

    async def one(i: int) -> None:
        name = f"{prefix}-{i}"
        async with limit:
            t0 = time.perf_counter()
            try:
                pod = await create_pod(kube, namespace, lws_pod(name), dry_run=dry_run)
            except ApiException as exc:
                result.failures.append(f"{name}: {exc.status} {status_message(exc)}")
                return
            except Exception as exc:
                result.failures.append(f"{name}: {type(exc).__name__}: {exc}")
                return
            elapsed = time.perf_counter() - t0
        if not is_mutated(pod):
            result.failures.append(f"{name}: admitted without mutation")
            return
        result.latencies.append(elapsed)
        if not dry_run:
            result.created.append(name)

    tasks: list[asyncio.Task[None]] = []
    start = loop.time()
    i = 0
    while (due := start + i / rate) < start + duration and not (until and until.is_set()):
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
        i += 1
    await asyncio.gather(*tasks)
    result.scheduled = i
    result.ended = time.time()
    return result


async def wait_until_admitting(kube: KubeClient, namespace: str, timeout: float = 60.0,  # noqa: ASYNC109
                               ) -> None:
    """Dry-run creates until one comes back mutated: the API server has picked up the
    registration and reaches the webhook."""
    deadline = time.monotonic() + timeout
    last = "no attempt"
    while time.monotonic() < deadline:
        try:
            pod = await create_pod(kube, namespace, lws_pod("probe-1"), dry_run=True)
            if is_mutated(pod):
                return
            last = "admitted without mutation"
        except ApiException as exc:
            last = f"{exc.status} {status_message(exc)}"
        await asyncio.sleep(0.1)
    raise TimeoutError(f"webhook not admitting after {timeout}s: {last}")


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


# --------------------------------------------------------------- in-process (tests)



async def served_certificate(port: int) -> bytes:
    """The DER certificate a new TLS connection to a webhook listener on 127.0.0.1 gets."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=ctx)
    try:
        der: bytes = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
        return der
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, ssl.SSLError):
            await writer.wait_closed()

async def ensure_namespace(kube: KubeClient, name: str) -> None:
    if await kube.get(f"/api/v1/namespaces/{name}") is None:
        await kube.request("POST", "/api/v1/namespaces", body={
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


@dataclass
class Webhooks:
    """An in-process admission side (tests): the runtime, its task and the paths it served."""

    runtime: WebhookRuntime
    stop: asyncio.Event
    task: asyncio.Task[None]
    client: KubeClient
    calls: list[str] = field(default_factory=list)  # paths served, in order

    @property
    def options(self) -> WebhookOptions:
        return self.runtime.options


def options_for(namespace: str, **overrides: Any) -> WebhookOptions:
    """Local mode on 127.0.0.1, a free port, configurations named after and confined to the
    test namespace. The operator's own namespace (home of the certificate Secret, outside that
    confinement unless ``only_namespaces`` names it too) is a second one, ``<namespace>-op``."""
    values: dict[str, Any] = {
        "namespace": f"{namespace}-op", "bind_address": "127.0.0.1", "port": 0,
        "webhook_host": "127.0.0.1",
        "mutating_configuration": f"lws-mutating-{namespace}",
        "validating_configuration": f"lws-validating-{namespace}",
        "only_namespaces": (namespace,), "sync_interval": 0.5,
    }
    values.update(overrides)
    return WebhookOptions(**values)


async def start_webhooks(kubeconfig: str, options: WebhookOptions) -> Webhooks:
    """The admission side in-process, ready: serving, registered and reached by the API
    server."""
    client = await KubeClient.connect(kubeconfig)
    await ensure_namespace(client, options.namespace)
    calls: list[str] = []
    runtime = WebhookRuntime(client, options, observer=lambda path, _: calls.append(path))
    stop = asyncio.Event()
    hooks = Webhooks(runtime, stop, asyncio.create_task(runtime.run(stop)), client, calls)
    await asyncio.wait_for(runtime.serving.wait(), 30)
    await wait_until_admitting(client, options.only_namespaces[0])
    return hooks


async def stop_webhooks(hooks: Webhooks) -> None:
    hooks.stop.set()
    try:
        await asyncio.wait_for(hooks.task, 30)
    finally:
        with contextlib.suppress(ApiException):
            await hooks.client.request("DELETE", f"/api/v1/namespaces/{hooks.options.namespace}")
        await hooks.client.close()


@contextlib.asynccontextmanager
async def confined_namespaces(cluster: LocalCluster,
                              operators_suffix: str) -> AsyncIterator[tuple[Kube, str, str]]:
    """For tests that run operator processes next to in-process webhooks: the CRD installed, a
    fresh namespace ``t-…`` whose LeaderWorkerSets and pods go through our webhooks (confined
    to it), and a second one, ``t-…-<operators_suffix>``, for the processes. Yields a client and
    both names; on the way out (after the caller's own cleanup) the webhooks stop and both
    namespaces are deleted."""
    await asyncio.to_thread(cluster.install_crd)
    kube = await Kube.connect(str(cluster.kubeconfig))
    namespace = f"t-{uuid.uuid4().hex[:10]}"
    operators = f"{namespace}-{operators_suffix}"
    for name in (namespace, operators):
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    hooks = await start_webhooks(str(cluster.kubeconfig), options_for(namespace))
    try:
        yield kube, namespace, operators
    finally:
        await stop_webhooks(hooks)
        for name in (namespace, operators):
            await kube.delete("v1", "Namespace", name)
        await kube.close()



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
