"""Helpers of the webhook-fault runs: admission load, a two-replica front,
certificate observation and registration clean-up.

The load goes through the real API server as server-side dry runs (``?dryRun=All``): admission
webhooks with ``sideEffects: None`` are still called, but nothing reaches etcd or the scheduler,
so hundreds of admissions per second cost the cluster nothing but CPU. Every request has one
expected answer, checked byte for byte where it matters:

* an LWS pod comes back mutated (``mpod.kb.io`` ran);
* a valid LeaderWorkerSet with ``restartPolicy: Default`` comes back with ``None``, a rewrite only
  our mutating webhook makes (``vleaderworkerset.kb.io`` then admitted it);
* an invalid LeaderWorkerSet is rejected by ``vleaderworkerset.kb.io`` with its field message.

Anything else (a TLS failure, a timeout, an unmutated object) is a failed admission.

:class:`RoundRobinProxy` stands in for the chart's Service in front of two replicas: the webhook
configurations point at it, and it hands each new TCP connection to the next replica. TLS passes
through untouched, so the API server checks each replica's own certificate against the caBundle.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import signal
import statistics
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes
from prometheus_client.parser import text_string_to_metric_families

from e2e.harness.admission import is_mutated, lws_pod
from lws_operator.kube.client import ApiException, KubeClient, status_message
from lws_operator.logic.runtime import certs

REPO = Path(__file__).resolve().parents[2]
API = "leaderworkerset.x-k8s.io/v1"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
VALIDATING = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
INVALID_MESSAGE = "subGroupSize cannot be larger than size"
DENIED_BY_US = 'admission webhook "vleaderworkerset.kb.io" denied the request'


# ------------------------------------------------------------------------------ request bodies


def lws_body(name: str, *, valid: bool) -> dict[str, Any]:
    """A LeaderWorkerSet the webhooks must default (valid) or reject (invalid: a sub-group larger
    than the group, which the CRD schema cannot express, so only our validation catches it)."""
    template: dict[str, Any] = {
        "size": 2, "restartPolicy": "Default",
        "workerTemplate": {"spec": {"containers": [{"name": "main", "image": "engine:v1"}]}}}
    if not valid:
        template["subGroupPolicy"] = {"subGroupSize": 3}
    return {"apiVersion": API, "kind": "LeaderWorkerSet", "metadata": {"name": name},
            "spec": {"replicas": 2, "leaderWorkerTemplate": template}}


def lws_defaulted(obj: dict[str, Any]) -> bool:
    """Whether ``mleaderworkerset.kb.io`` ran: it alone turns restartPolicy Default into None."""
    template = (obj.get("spec") or {}).get("leaderWorkerTemplate") or {}
    return template.get("restartPolicy") == "None"


# ------------------------------------------------------------------------------------ the load

KINDS = ("pod", "lws", "invalid-lws")


@dataclass
class LoadReport:
    """What a load run sent and got back."""

    sent: Counter[str] = field(default_factory=Counter)
    ok: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)  # seconds, every expected answer
    failures: list[str] = field(default_factory=list)
    shed: int = 0  # due, but not sent: the schedule was more than SHED_AFTER behind
    lag: float = 0.0  # the largest delay between a request's due time and its sending
    started: float = 0.0
    ended: float = 0.0

    @property
    def total_sent(self) -> int:
        return sum(self.sent.values())

    @property
    def total_ok(self) -> int:
        return sum(self.ok.values())

    @property
    def rate(self) -> float:
        """Expected answers per second over the run."""
        return self.total_ok / max(self.ended - self.started, 1e-9)

    def summary(self) -> dict[str, Any]:
        return {"sent": self.total_sent, "admitted_as_expected": self.total_ok,
                "by_kind": dict(self.ok), "failures": len(self.failures),
                "seconds": round(self.ended - self.started, 1),
                "rate_per_s": round(self.rate, 1), "latency_ms": percentiles(self.latencies),
                "shed_not_sent": self.shed, "max_send_lag_ms": round(self.lag * 1000, 1)}


def percentiles(values: list[float]) -> dict[str, float]:
    """p50, p99 and max in milliseconds."""
    if not values:
        return {"p50": 0.0, "p99": 0.0, "max": 0.0}
    if len(values) == 1:
        return {"p50": values[0] * 1000, "p99": values[0] * 1000, "max": values[0] * 1000}
    cuts = statistics.quantiles(values, n=100, method="inclusive")
    return {"p50": round(cuts[49] * 1000, 1), "p99": round(cuts[98] * 1000, 1),
            "max": round(max(values) * 1000, 1)}


class AdmissionLoad:
    """An open-loop generator of dry-run admissions at ``rate`` per second.

    Each second starts with a burst (``burst`` of that second's requests at once) and spreads the
    rest evenly: the steady stream keeps the API server's connections to the webhooks busy, and
    the burst makes it open new ones, so certificate changes meet fresh TLS handshakes. At most
    ``max_in_flight`` requests are outstanding; later ones wait (and the wait shows as ``lag``).
    When the system cannot keep up, requests more than a second late are shed (counted, not
    sent) rather than piled up: the achieved rate is then what the whole path (API server,
    webhooks, this client) sustains.
    The mix, out of every 10 requests: 6 pods, 3 valid and 1 invalid LeaderWorkerSet.
    """

    SHED_AFTER = 1.0  # seconds behind schedule after which a request is not sent
    MIX = ("pod", "lws", "pod", "invalid-lws", "pod", "lws", "pod", "lws", "pod", "pod")

    def __init__(self, kube: KubeClient, namespace: str, *, rate: float, burst: int = 0,
                 max_in_flight: int = 128) -> None:
        self.kube = kube
        self.namespace = namespace
        self.rate = rate
        self.burst = min(burst, int(rate))
        self.limit = asyncio.Semaphore(max_in_flight)
        self.report = LoadReport()
        self._kinds = itertools.cycle(self.MIX)

    async def _one(self, kind: str, index: int) -> None:
        """One admission; the caller holds a slot of ``limit`` for it, released here."""
        name = f"load-{index}"
        if kind == "pod":
            path = f"/api/v1/namespaces/{self.namespace}/pods"
            body = lws_pod(name)
        else:
            path = f"/apis/{API}/namespaces/{self.namespace}/leaderworkersets"
            body = lws_body(name, valid=kind == "lws")
        try:
            start = time.monotonic()
            self.report.sent[kind] += 1
            problem = await self._send(kind, path, body)
            elapsed = time.monotonic() - start
        finally:
            self.limit.release()
        if problem is None:
            self.report.ok[kind] += 1
            self.report.latencies.append(elapsed)
        else:
            self.report.failures.append(f"{time.strftime('%H:%M:%S')} {kind} {name}: {problem}")

    async def _send(self, kind: str, path: str, body: dict[str, Any]) -> str | None:
        """None when the answer is the expected one, else what was wrong."""
        try:
            answer = await self.kube.request("POST", path, body=body,
                                             query={"dryRun": "All"}, timeout=30.0)
        except ApiException as exc:
            message = status_message(exc)
            if kind == "invalid-lws" and exc.status == 403 and DENIED_BY_US in message \
                    and INVALID_MESSAGE in message:
                return None
            return f"{exc.status} {message}"
        except Exception as exc:  # the connection itself failed
            return f"{type(exc).__name__}: {exc}"
        if kind == "pod":
            return None if is_mutated(answer) else "admitted without the pod mutation"
        if kind == "lws":
            return None if lws_defaulted(answer) else "admitted without webhook defaulting"
        return "admitted although invalid"

    async def run(self, until: Callable[[], bool], *, min_seconds: float = 0.0,
                  max_seconds: float = 3600.0) -> LoadReport:
        """Send until ``until()`` holds (checked once a second) and ``min_seconds`` passed, or
        for ``max_seconds`` at most; waits for every answer."""
        loop = asyncio.get_running_loop()
        tasks: set[asyncio.Task[None]] = set()
        self.report.started = time.time()
        start = loop.time()
        index = 0
        second = 0
        spread = max(int(self.rate) - self.burst, 1)
        while True:
            elapsed = loop.time() - start
            if elapsed >= max_seconds or (elapsed >= min_seconds and until()):
                break
            base = start + second
            dues = [base] * self.burst + [base + (i + 0.5) / spread for i in range(spread)]
            for due in dues:
                await asyncio.sleep(max(due - loop.time(), 0.0))
                if loop.time() - due > self.SHED_AFTER:
                    # Not sent: when the system cannot keep up, requests that are already late
                    # are shed instead of piling up (they count as missed, not as failed).
                    self.report.shed += 1
                    continue
                await self.limit.acquire()  # a free slot first; the wait shows as lag
                self.report.lag = max(self.report.lag, loop.time() - due)
                task = asyncio.create_task(self._one(next(self._kinds), index))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
                index += 1
            second += 1
        await asyncio.gather(*tasks)
        self.report.ended = time.time()
        return self.report


# ------------------------------------------------------------------------------ two replicas


class RoundRobinProxy:
    """A TCP front for several webhook listeners on 127.0.0.1, as a Service is for pods: each
    accepted connection goes to the next backend in turn, bytes pass through unchanged."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.connections: Counter[int] = Counter()  # backend port -> connections handed to it
        self.refused: Counter[int] = Counter()
        self._next = itertools.cycle(backends)
        self._server: asyncio.Server | None = None
        self._pipes: set[asyncio.Task[None]] = set()
        self.port = 0

    async def start(self, port: int = 0) -> int:
        """Listen on ``port`` (any free one when 0): a stopped proxy can come back on its
        old port, as an API server restarts on its own."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", port)
        self.port = self._server.sockets[0].getsockname()[1]
        return self.port

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        backend = next(self._next)
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", backend)
        except OSError:
            self.refused[backend] += 1
            writer.close()
            return
        self.connections[backend] += 1
        pipes = [asyncio.create_task(self._pipe(reader, up_writer)),
                 asyncio.create_task(self._pipe(up_reader, writer))]
        self._pipes.update(pipes)
        await asyncio.gather(*pipes, return_exceptions=True)
        self._pipes.difference_update(pipes)

    @staticmethod
    async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
        try:
            while data := await src.read(65536):
                dst.write(data)
                await dst.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                dst.close()

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._pipes):
            task.cancel()
        await asyncio.gather(*self._pipes, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)


class ProxyProcess:
    """:class:`RoundRobinProxy` in a process of its own (``python -m e2e.harness.admission_load
    proxy PORT...``), so relaying every admission does not share an event loop, or a core, with
    the load generator. ``stop`` returns the connections handed to each backend."""

    def __init__(self, backends: list[int]) -> None:
        self.backends = backends
        self.port = 0
        self.connections: dict[int, int] = {}
        self.refused: dict[int, int] = {}
        self._process: asyncio.subprocess.Process | None = None

    async def start(self) -> int:
        self._process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "e2e.harness.admission_load", "proxy",
            *map(str, self.backends), cwd=REPO, stdout=asyncio.subprocess.PIPE,
            stdin=asyncio.subprocess.DEVNULL)
        assert self._process.stdout is not None
        line = (await asyncio.wait_for(self._process.stdout.readline(), 30)).decode()
        if not line.startswith("PORT "):
            raise RuntimeError(f"the proxy did not start: {line!r}")
        self.port = int(line.split()[1])
        return self.port

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

    async def stop(self) -> None:
        proc = self._process
        if proc is None or proc.returncode is not None:
            return
        proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 30)
        counts = json.loads(out.decode().strip().splitlines()[-1])
        self.connections = {int(k): v for k, v in counts["connections"].items()}
        self.refused = {int(k): v for k, v in counts["refused"].items()}


async def _serve_proxy(backends: list[int]) -> None:
    proxy = RoundRobinProxy(backends)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    print(f"PORT {await proxy.start()}", flush=True)
    await stop.wait()
    await proxy.stop()
    print(json.dumps({"connections": proxy.connections, "refused": proxy.refused}), flush=True)


# --------------------------------------------------------------------------- certificate view


@dataclass
class CertHistory:
    """Distinct serving certificates and signing CAs the Secret held, in order of appearance,
    and the largest trust bundle seen (2 during a CA overlap)."""

    serving: list[x509.Certificate] = field(default_factory=list)
    cas: list[x509.Certificate] = field(default_factory=list)
    bundles: list[tuple[bytes, ...]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def renewals(self) -> int:
        """Serving certificates issued after the first one seen."""
        return max(len(self.serving) - 1, 0)

    @property
    def ca_rotations(self) -> int:
        """Signing CAs that replaced the first one seen."""
        return max(len(self.cas) - 1, 0)

    @property
    def completed_ca_rotations(self) -> int:
        """CA rotations that went all the way: the bundle is back to one CA, not the first."""
        done = {b[0] for b in self.bundles if len(b) == 1}
        first = self.cas[0].fingerprint(hashes.SHA256()) if self.cas else None
        return len(done - {first})

    def record(self, data: dict[str, bytes]) -> None:
        cert = x509.load_pem_x509_certificate(data[certs.TLS_CERT_KEY])
        bundle = x509.load_pem_x509_certificates(data[certs.CA_CERT_KEY])
        if not self.serving or self.serving[-1] != cert:
            self.serving.append(cert)
        if not self.cas or self.cas[-1] != bundle[0]:
            self.cas.append(bundle[0])
        prints = tuple(c.fingerprint(hashes.SHA256()) for c in bundle)
        if not self.bundles or self.bundles[-1] != prints:
            self.bundles.append(prints)


async def secret_data(kube: KubeClient, namespace: str, name: str) -> dict[str, bytes] | None:
    secret = await kube.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")
    if secret is None:
        return None
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


async def watch_certificates(kube: KubeClient, namespace: str, secret: str,
                             history: CertHistory, interval: float = 0.5) -> None:
    """Poll the Secret into ``history`` until cancelled (a poll every ``interval`` is far
    shorter than any step of the rotation)."""
    while True:
        try:
            data = await secret_data(kube, namespace, secret)
            if data and all(data.get(k) for k in certs.SECRET_KEYS):
                history.record(data)
        except Exception as exc:  # reported by the test
            history.errors.append(repr(exc))
        await asyncio.sleep(interval)


# ------------------------------------------------------------------------------- registrations


async def delete_registrations(kube: KubeClient, mutating: str, validating: str) -> None:
    """Remove webhook configurations a killed operator left behind (it would have removed them
    itself on SIGTERM); a left-over one would fail every LWS pod creation in the cluster."""
    for base, name in ((MUTATING, mutating), (VALIDATING, validating)):
        with contextlib.suppress(ApiException):
            await kube.request("DELETE", f"{base}/{name}")


async def registered_url(kube: KubeClient, mutating: str) -> str | None:
    """The URL the pod webhook of ``mutating`` points at, or None if it is not registered."""
    config = await kube.get(f"{MUTATING}/{mutating}")
    for hook in (config or {}).get("webhooks") or []:
        if hook.get("name") == "mpod.kb.io":
            return str(hook["clientConfig"].get("url"))
    return None


def served_reviews(text: str) -> float:
    """Admissions an operator process answered so far (from its /metrics text)."""
    total = 0.0
    for family in text_string_to_metric_families(text):
        if family.name == "controller_runtime_webhook_requests":
            total += sum(s.value for s in family.samples if s.name.endswith("_total"))
    return total


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far (Linux ``/proc``); 0 if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class CpuMeter:
    """CPU cores each named process used between ``start()`` and ``stop()``: where a load's
    CPU went, so an achieved rate below the target can be explained rather than guessed."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._start: dict[str, float] = {}
        self._t0 = 0.0
        self.cores: dict[str, float] = {}

    def start(self) -> None:
        self._t0 = time.monotonic()
        self._start = {name: cpu_seconds(pid) for name, pid in self.pids.items()}

    def stop(self) -> dict[str, float]:
        wall = max(time.monotonic() - self._t0, 1e-9)
        self.cores = {name: round((cpu_seconds(pid) - self._start[name]) / wall, 2)
                      for name, pid in self.pids.items()}
        return self.cores


def histogram_totals(metrics_text: str, family: str, label: str,
                     ) -> dict[str, tuple[float, float]]:
    """(sum, count) of a Prometheus histogram ``family`` per value of ``label``."""
    out: dict[str, tuple[float, float]] = {}
    for fam in text_string_to_metric_families(metrics_text):
        if fam.name != family:
            continue
        for sample in fam.samples:
            key = sample.labels.get(label, "")
            total, count = out.get(key, (0.0, 0.0))
            if sample.name.endswith("_sum"):
                out[key] = (total + sample.value, count)
            elif sample.name.endswith("_count"):
                out[key] = (total, count + sample.value)
    return out


def mean_ms(before: dict[str, tuple[float, float]], after: dict[str, tuple[float, float]],
            ) -> dict[str, float]:
    """Mean duration per key between two :func:`histogram_totals`, in milliseconds."""
    out = {}
    for key, (total, count) in after.items():
        total0, count0 = before.get(key, (0.0, 0.0))
        if count > count0:
            out[key] = round((total - total0) / (count - count0) * 1000, 2)
    return out


def metrics_text(port: int) -> str:
    """An operator process's plain-HTTP /metrics."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as answer:
        return str(answer.read().decode())


def main(argv: list[str]) -> int:
    if len(argv) >= 2 and argv[0] == "proxy":
        asyncio.run(_serve_proxy([int(port) for port in argv[1:]]))
        return 0
    print("usage: python -m e2e.harness.admission_load proxy BACKEND_PORT...", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
