"""The upstream Go controller as the scale benchmark's third side: the controller a user would
otherwise run, on the same cluster, in the same run, one controller at a time.

Its binary, CRDs and webhook manifests come from a folder outside the repository
(``--upstream-dir``; by default ``$LWS_BENCH_UPSTREAM`` or ``shared/upstream-controller`` next to
the checkout or its parent): ``manager.xz``, ``crds/*.yaml``, ``webhook/manifests.yaml`` and the
two patches its overlay applies. The binary is unpacked once into
``~/.cache/lws-operator/upstream/<sha256>/manager`` (keyed by the unpacked binary's digest, never
committed).

What running it takes, and why:

- Its LeaderWorkerSet CRD differs from ours (another schema, its own defaults), so the side
  switches CRDs: its three applied server-side before it starts, ours applied back after, both
  with the field manager our cluster installs ours with, so each apply replaces the other's
  fields instead of merging with them. The DisaggregatedSet CRDs switch too: its manager will not
  start without them.
- Its webhook configurations carry the same names as a chart install of ours; they are
  registered by URL (``https://127.0.0.1:<port><path>``) with a CA made for the run, and deleted
  when its side ends, so no registration of a stopped webhook (failure policy Fail) outlives it.
- Its metrics are HTTPS behind authentication and authorization: a ServiceAccount bound to a
  ClusterRole that may ``get`` ``/metrics``, and a TokenRequest's token. Its API requests are
  client-go's ``rest_client_requests_total{method,code}`` (no resource label): the scrapes' own
  TokenReviews and SubjectAccessReviews are counted by kube-apiserver and taken out
  (``metrics_auth``); its status writes, which its counters cannot name, are kube-apiserver's
  count of LeaderWorkerSet status writes during its phases (nobody else writes them).
- Its CPU and RSS come from ``/proc`` (its process tree), as ours do.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import json
import lzma
import os
import shutil
import ssl
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from e2e.bench.figures import Scrape, buckets, delta, histogram_summary, parse, total
from e2e.bench.process import TreeMemory, children_of
from e2e.cluster.launcher import CRD_FILES, free_port
from e2e.harness.admission import serving_keypair
from e2e.harness.launcher import answers_ready, cpu_seconds, memory_mib, reaped
from lws_operator.kube.client import ApiException, KubeClient

REPO = Path(__file__).resolve().parents[2]
ENV = "LWS_BENCH_UPSTREAM"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "lws-operator" / \
    "upstream"
# Our cluster's CRDs are applied by this manager (``LocalCluster.install_crd``): the switch uses
# it too, so that each apply owns, and replaces, every field of the CRD.
FIELD_MANAGER = "lws-operator-tests"
APPLY = "application/apply-patch+yaml"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
PLURAL = {"MutatingWebhookConfiguration": "mutatingwebhookconfigurations",
          "ValidatingWebhookConfiguration": "validatingwebhookconfigurations"}
PATCHES = {"MutatingWebhookConfiguration": "mutating-patch.yaml",
           "ValidatingWebhookConfiguration": "validating-patch.yaml"}
NAME_PREFIX = "lws-"  # its kustomize overlay's namePrefix
METRICS_READER = "lws-bench-upstream-metrics-reader"
# The requests its metrics endpoint makes of kube-apiserver to let a scrape in.
AUTH_RESOURCES = ("tokenreviews", "subjectaccessreviews")
LWS_STATUS_WRITES = ("PUT", "PATCH", "APPLY")


class UpstreamError(Exception):
    """The upstream controller's files are missing or do not run."""


def default_dir() -> Path | None:
    """``$LWS_BENCH_UPSTREAM``, else ``shared/upstream-controller`` beside the checkout (or
    beside its parent, for a worktree in a folder of worktrees); None when none holds a
    ``manager.xz``."""
    candidates = [Path(os.environ[ENV])] if os.environ.get(ENV) else [
        REPO.parent / "shared" / "upstream-controller",
        REPO.parent.parent / "shared" / "upstream-controller"]
    return next((c for c in candidates if (c / "manager.xz").is_file()), None)


def check_dir(source: Path) -> None:
    """Everything the side needs is in ``source``, or ``UpstreamError`` naming what is not."""
    needed = [source / "manager.xz", source / "webhook" / "manifests.yaml",
              *(source / "webhook" / name for name in PATCHES.values())]
    missing = [str(p) for p in needed if not p.is_file()]
    if not sorted((source / "crds").glob("*.yaml")):
        missing.append(str(source / "crds" / "*.yaml"))
    if missing:
        raise UpstreamError(f"the upstream controller's files are missing: {', '.join(missing)}"
                            " (--upstream-dir, or --sides raw,ours to leave it out)")


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def binary(source: Path, cache: Path = CACHE) -> tuple[Path, str]:
    """The unpacked manager binary and its sha256: ``<cache>/<sha256>/manager``. The archive's
    own digest indexes it (``<cache>/archives/<sha256 of manager.xz>``), so a run after the
    first unpacks nothing."""
    archive = source / "manager.xz"
    index = cache / "archives" / sha256(archive)
    if index.is_file():
        digest = index.read_text().strip()
        unpacked = cache / digest / "manager"
        if unpacked.is_file() and os.access(unpacked, os.X_OK):
            return unpacked, digest
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=cache, delete=False) as out, lzma.open(archive) as xz:
        shutil.copyfileobj(xz, out, 1 << 20)
    partial = Path(out.name)
    digest = sha256(partial)
    (cache / digest).mkdir(exist_ok=True)
    unpacked = cache / digest / "manager"
    partial.chmod(0o755)
    partial.replace(unpacked)
    index.parent.mkdir(exist_ok=True)
    index.write_text(digest + "\n")
    return unpacked, digest


# ---------------------------------------------------------------------------- pure helpers


def configuration(webhook_port: int, metrics_port: int, health_port: int, cert_dir: Path) -> str:
    """Its Configuration file: leader election and its own certificate management off, every
    server on 127.0.0.1 (the ports free on this machine), its webhook certificate ours."""
    return yaml.safe_dump({
        "apiVersion": "config.lws.x-k8s.io/v1alpha1", "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"port": webhook_port, "host": "127.0.0.1", "certDir": str(cert_dir)},
        "metrics": {"bindAddress": f"127.0.0.1:{metrics_port}"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"}}, sort_keys=False)


def webhook_configurations(manifests: str, patches: Mapping[str, str], base_url: str,
                           ca_bundle: str) -> list[dict[str, Any]]:
    """Its webhook configurations as its overlay renders them (``patches[kind]``: the JSON
    patch its overlay applies, ``replace`` operations on ``/webhooks/N``; names prefixed), each
    webhook served at ``base_url`` plus its path instead of by a Service."""
    out = []
    for document in yaml.safe_load_all(manifests):
        if not document:
            continue
        config = json.loads(json.dumps(document))  # a copy of our own
        webhooks = config["webhooks"]
        for op in yaml.safe_load(patches.get(config["kind"], "")) or []:
            prefix, _, index = op["path"].rpartition("/")
            if op["op"] != "replace" or prefix != "/webhooks":
                raise ValueError(f"unexpected patch operation {op['op']} {op['path']}")
            webhooks[int(index)] = json.loads(json.dumps(op["value"]))
        for webhook in webhooks:
            service = webhook["clientConfig"].pop("service")
            webhook["clientConfig"] = {"url": base_url + service["path"], "caBundle": ca_bundle}
        config["metadata"] = {"name": NAME_PREFIX + config["metadata"]["name"]}
        out.append(config)
    return out


def request_counts(scrape: Scrape, apiserver: Scrape) -> dict[str, Any]:
    """One phase's requests of the upstream controller in the issue's terms (``scrape`` and
    ``apiserver`` are ``delta``s over the phase): ``counted``, every request of its client less
    the scrapes' own authentication (``metrics_auth``, kube-apiserver's count of TokenReviews
    and SubjectAccessReviews: nobody else sends them); ``status_patches``, kube-apiserver's count
    of LeaderWorkerSet status writes; ``by_method``, ``"METHOD code"`` counts."""
    by_method: dict[str, int] = {}
    for (name, labels), value in scrape.items():
        if name != "rest_client_requests_total" or not value:
            continue
        tags = dict(labels)
        key = f"{tags.get('method', '?')} {tags.get('code', '?')}"
        by_method[key] = by_method.get(key, 0) + int(value)
    auth = sum(int(total(apiserver, "apiserver_request_total", verb="POST", resource=r))
               for r in AUTH_RESOURCES)
    status = sum(int(total(apiserver, "apiserver_request_total", verb=verb,
                           resource="leaderworkersets", subresource="status"))
                 for verb in LWS_STATUS_WRITES)
    return {"counted": max(sum(by_method.values()) - auth, 0), "metrics_auth": auth,
            "status_patches": status, "by_method": dict(sorted(by_method.items()))}


WINDOWS = {"create": (0, 1), "steady": (1, 2), "rollout": (2, 3), "delete": (3, 4)}


def report(scrapes: Sequence[Scrape], servers: Sequence[Scrape], cpu: Sequence[float],
           memory: Mapping[str, Mapping[str, float]], code: int | None,
           steady_seconds: float) -> dict[str, Any]:
    """The upstream side's figures, named as ours are (``scale.Run._operator_report``):
    ``scrapes``/``servers``/``cpu`` taken at the phases' five boundaries."""
    ours = {w: delta(scrapes[b], scrapes[a]) for w, (a, b) in WINDOWS.items()}
    theirs = {w: delta(servers[b], servers[a]) for w, (a, b) in WINDOWS.items()}
    whole = delta(scrapes[-1], scrapes[0])
    counted = {w: request_counts(ours[w], theirs[w]) for w in WINDOWS}
    return {
        "exit_code": code,
        "api_requests_counted": counted,
        "steady_state": {"seconds": steady_seconds,
                         "requests": counted["steady"]["counted"],
                         "status_writes": counted["steady"]["status_patches"]},
        "cpu_seconds": {w: round(cpu[b] - cpu[a], 2) for w, (a, b) in WINDOWS.items()}
        | {"total": round(cpu[-1] - cpu[0], 2)},
        "memory_mib": {"at_start": memory["at_start"].get("rss"),
                       "after_create": memory["after_create"].get("rss"),
                       "at_end": memory["at_end"].get("rss"),
                       "peak_rss": memory["at_end"].get("peak_rss"),
                       "at_start_shared_once": memory["at_start"].get("rss_shared_once"),
                       "peak_rss_shared_once": memory["at_end"].get("peak_rss_shared_once")},
        "reconcile_time_seconds": histogram_summary(
            buckets(whole, "controller_runtime_reconcile_time_seconds")),
        "work_queue_wait_seconds": histogram_summary(
            buckets(whole, "workqueue_queue_duration_seconds")),
        "reconciles": _reconciles(whole),
    }


def _reconciles(scrape: Scrape) -> dict[str, int]:
    out: dict[str, int] = {}
    for (name, labels), value in scrape.items():
        if name == "controller_runtime_reconcile_total" and value:
            tags = dict(labels)
            key = f"{tags.get('controller', '?')} {tags.get('result', '?')}"
            out[key] = out.get(key, 0) + int(value)
    return dict(sorted(out.items()))


# ---------------------------------------------------------------------------- the process


async def apply_crds(client: KubeClient, files: Sequence[Path], timeout: float = 90.0  # noqa: ASYNC109
                     ) -> bool:
    """Server-side apply each CRD file (forcing, as ``FIELD_MANAGER``), then wait until each is
    Established and lists: a CRD just changed answers 429 while its storage reinitialises.
    Whether each served CRD now carries its file's annotations and no other (theirs name the
    generator, ours none): the apply replaced, rather than merged with, what was there."""
    names = []
    replaced = True
    for file in files:
        crd = yaml.load(file.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        name = crd["metadata"]["name"]
        names.append((name, crd["spec"]["group"], crd["spec"]["names"]["plural"],
                      next(v["name"] for v in crd["spec"]["versions"] if v.get("storage"))))
        live = await client.request(
            "PATCH", f"{CRD_PATH}/{name}", body=crd,
            query={"fieldManager": FIELD_MANAGER, "force": "true"}, content_type=APPLY,
            timeout=60)
        replaced &= (live["metadata"].get("annotations") or {}) == (
            crd["metadata"].get("annotations") or {})
    deadline = time.monotonic() + timeout
    for name, group, plural, version in names:
        while True:
            crd = await client.get(f"{CRD_PATH}/{name}") or {}
            if any(c.get("type") == "Established" and c.get("status") == "True"
                   for c in (crd.get("status") or {}).get("conditions") or []):
                with contextlib.suppress(ApiException):
                    await client.request("GET", f"/apis/{group}/{version}/{plural}",
                                         query={"limit": "1"})
                    break
            if time.monotonic() > deadline:
                raise UpstreamError(f"CRD {name} not servable after {timeout:.0f}s")
            await asyncio.sleep(0.2)
    return replaced


async def restore_our_crds(client: KubeClient) -> bool:
    return await apply_crds(client, list(CRD_FILES))


def _insecure() -> ssl.SSLContext:
    """Its metrics server's certificate is one it made itself: nothing to verify it with."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@dataclass
class UpstreamController:
    """The upstream manager as one side of a round: ``install`` (CRDs, webhooks, the metrics
    reader), ``start``, the measurements, ``stop``, ``uninstall`` (ours back)."""

    kubeconfig: str
    client: KubeClient
    source: Path
    executable: Path
    log_path: Path
    run_id: str
    webhook_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    work: Path | None = None
    process: asyncio.subprocess.Process | None = None
    token: str = ""
    tree: TreeMemory = field(default_factory=lambda: TreeMemory())
    crds_switched: bool | None = None
    crds_restored: bool | None = None
    child_cpu: dict[int, float] = field(default_factory=dict)
    _sampler: asyncio.Task[None] | None = None

    @property
    def namespace(self) -> str:
        """Where the metrics reader's ServiceAccount lives."""
        return f"lws-bench-upstream-system-{self.run_id}"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    async def switch_crds(self) -> None:
        """Its CRDs in place of ours (``crds_switched``: they replaced ours)."""
        self.crds_switched = await apply_crds(self.client,
                                              sorted((self.source / "crds").glob("*.yaml")))

    async def register(self) -> None:
        """Its webhook configurations (by URL, a CA of the run) and a token that may read its
        metrics."""
        self.work = Path(tempfile.mkdtemp(prefix="lws-bench-upstream-"))
        pair = serving_keypair()
        for name in ("tls.crt", "tls.key"):
            (self.work / name).write_bytes(pair[name])
        (self.work / "config.yaml").write_text(configuration(
            self.webhook_port, self.metrics_port, self.health_port, self.work))
        hook = self.source / "webhook"
        configs = webhook_configurations(
            (hook / "manifests.yaml").read_text(),
            {kind: (hook / name).read_text() for kind, name in PATCHES.items()},
            f"https://127.0.0.1:{self.webhook_port}", base64.b64encode(pair["ca.crt"]).decode())
        await self._remove_webhooks()
        for config in configs:
            await self.client.request("POST", f"{ADMISSION}/{PLURAL[config['kind']]}",
                                      body=config)
        await self._metrics_reader()

    async def _metrics_reader(self) -> None:
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        with contextlib.suppress(ApiException):
            await self.client.request("POST", "/api/v1/namespaces", body={
                "apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": self.namespace, "labels": {"lws-bench": "true"}}})
        await self.client.request("POST", f"/api/v1/namespaces/{self.namespace}/serviceaccounts",
                                  body={"metadata": {"name": "metrics"}})
        for path, body in ((f"{rbac}/clusterroles", {
                "metadata": {"name": METRICS_READER},
                "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}),
                (f"{rbac}/clusterrolebindings", {
                    "metadata": {"name": METRICS_READER},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                "name": METRICS_READER},
                    "subjects": [{"kind": "ServiceAccount", "name": "metrics",
                                  "namespace": self.namespace}]})):
            with contextlib.suppress(ApiException):
                await self.client.request("DELETE", f"{path}/{METRICS_READER}")
            await self.client.request("POST", path, body=body)
        answer = await self.client.request(
            "POST", f"/api/v1/namespaces/{self.namespace}/serviceaccounts/metrics/token",
            body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                  "spec": {"expirationSeconds": 6 * 3600}})
        self.token = answer["status"]["token"]

    async def start(self, ready_timeout: float = 120.0) -> None:
        """Start it and wait until ``/readyz`` answers 200 (caches synced, webhook serving) and
        its metrics answer."""
        assert self.work is not None, "install first"
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = os.environ | {"KUBECONFIG": self.kubeconfig}
        with self.log_path.open("wb") as log:
            self.process = await asyncio.create_subprocess_exec(
                str(self.executable), f"--config={self.work / 'config.yaml'}",
                "--zap-log-level=info", stdout=log, stderr=log, env=env,
                stdin=asyncio.subprocess.DEVNULL, start_new_session=True)
        print(f"[bench] upstream controller pid {self.process.pid}", file=sys.stderr, flush=True)
        deadline = time.monotonic() + ready_timeout
        while not await asyncio.to_thread(answers_ready, self.health_port):
            if self.process.returncode is not None:
                raise UpstreamError(f"the upstream controller exited with "
                                    f"{self.process.returncode}: see {self.log_path}")
            if time.monotonic() > deadline:
                raise UpstreamError(f"the upstream controller was not ready after "
                                    f"{ready_timeout:.0f}s: see {self.log_path}")
            await asyncio.sleep(0.25)
        # Its metrics server starts beside the health server, not before it: on a loaded machine
        # /readyz answered while /metrics still refused connections (a run lost in round 3).
        while True:
            try:
                await self.metrics()
                break
            except OSError as exc:
                if self.process.returncode is not None or time.monotonic() > deadline:
                    raise UpstreamError(f"the upstream controller's metrics do not answer: "
                                        f"{exc}; see {self.log_path}") from exc
                await asyncio.sleep(0.25)
        self._sampler = asyncio.create_task(self._sample_memory())

    async def _sample_memory(self) -> None:
        while True:
            with contextlib.suppress(OSError, ValueError, KeyError):
                self.memory()
            await asyncio.sleep(1.0)

    def cpu(self) -> float:
        """CPU seconds of its process tree (a child's time stays counted once it exits)."""
        for child in children_of(self.pid):
            with contextlib.suppress(OSError, ValueError, IndexError):
                self.child_cpu[child] = cpu_seconds(child)
        return cpu_seconds(self.pid) + sum(self.child_cpu.values())

    def memory(self) -> dict[str, float]:
        """Its process tree's memory now and at the peak, measured as ours is
        (``TreeMemory.sample``): one process, so its RSS is also what a container charges."""
        return self.tree.sample(self.pid, memory_mib(self.pid))

    async def metrics(self) -> str:
        """``/metrics`` over HTTPS with the metrics reader's token."""
        def get() -> str:
            request = urllib.request.Request(
                f"https://127.0.0.1:{self.metrics_port}/metrics",
                headers={"Authorization": f"Bearer {self.token}"})
            with urllib.request.urlopen(request, timeout=10, context=_insecure()) as answer:
                return str(answer.read().decode())
        return await asyncio.to_thread(get)

    async def scrape(self) -> Scrape:
        return parse(await self.metrics())

    async def stop(self, grace: float = 30.0) -> int | None:
        """SIGTERM, SIGKILL after ``grace``; the exit code (None if it never started)."""
        if self._sampler is not None:
            self._sampler.cancel()
        if self.process is None:
            return None
        if self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.terminate()
        return await reaped(self.process, grace)

    async def _remove_webhooks(self) -> None:
        for kind, plural in PLURAL.items():
            name = f"{NAME_PREFIX}{'mutating' if kind.startswith('Mutating') else 'validating'}" \
                   "-webhook-configuration"
            with contextlib.suppress(ApiException):
                await self.client.request("DELETE", f"{ADMISSION}/{plural}/{name}")

    async def uninstall(self) -> None:
        """Its webhook configurations and metrics reader gone, our CRDs back."""
        await self._remove_webhooks()
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        for path in (f"{rbac}/clusterrolebindings/{METRICS_READER}",
                     f"{rbac}/clusterroles/{METRICS_READER}",
                     f"/api/v1/namespaces/{self.namespace}"):
            with contextlib.suppress(ApiException):
                await self.client.request("DELETE", path)
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)
        self.crds_restored = await restore_our_crds(self.client)
