"""Start and stop a real local Kubernetes control plane as plain processes on 127.0.0.1.

Two tiers share one code path:

* ``api``: etcd and kube-apiserver only. Tests create pods and set their status themselves, as the
  upstream integration tests do.
* ``full``: adds kube-controller-manager, kube-scheduler and kwok with fake GPU/TPU nodes, so
  StatefulSets create pods, the scheduler binds them and kwok makes them Running and Ready.
* ``node`` (opt-in, root): the full tier plus one real kubelet node with containerd, on which a
  pod runs a real container; it changes the host and undoes that at ``down`` (see ``node.py``).

Everything a cluster owns lives in one directory (kubeconfig, PKI, data, logs, pid files and a
``state.json`` with its ports), so several clusters can run side by side and ``down`` only ever
stops the processes that ``up`` started. ``up`` is idempotent: a healthy cluster of the requested
tier is reused (missing nodes are added), anything else is torn down and started fresh.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import yaml

from . import node as real_node
from .host import HERE, cache_root, free_port, terminate, versions
from .nodes import NodeLayout, node_manifests
from .pki import Pki, ensure_pki
from .stages import STORAGE_CLASS, kwok_configuration, render_stages

REPO = Path(__file__).resolve().parents[2]
TIERS = ("api", "full", "node")
WITH_CONTROLLERS = ("full", "node")  # the tiers with kcm, scheduler and kwok
CRD_FILE = REPO / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
CRD_NAME = "leaderworkersets.leaderworkerset.x-k8s.io"
DS_CRD_FILE = REPO / "crds" / "disaggregatedset.x-k8s.io_disaggregatedsets.yaml"
DS_CRD_NAME = "disaggregatedsets.disaggregatedset.x-k8s.io"
DS_SCALER_CRD_FILE = REPO / "crds" / "disaggregatedset.x-k8s.io_disaggregatedsetrolescalers.yaml"
DS_SCALER_CRD_NAME = "disaggregatedsetrolescalers.disaggregatedset.x-k8s.io"
# Every CRD the operator serves, by file: what `install_crd` applies by default.
CRD_FILES = {CRD_FILE: CRD_NAME, DS_CRD_FILE: DS_CRD_NAME, DS_SCALER_CRD_FILE: DS_SCALER_CRD_NAME}
_CRD_NAMES_BY_FILE = {path.name: name for path, name in CRD_FILES.items()}
SERVICE_CIDR = "10.96.0.0/16"
POD_CIDR = "10.0.0.0/16"

# The Workload-Aware Scheduling API (scheduling.k8s.io Workload/PodGroup) is Beta in 1.37 but off
# by default: the gate must be on in every component and the group versions served explicitly.
FEATURE_GATES = "GenericWorkload=true"
RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true,scheduling.k8s.io/v1alpha3=true"

# Controllers the tests rely on. Everything else is left off to save CPU on a 2-core machine.
CONTROLLERS = (
    "deployment-controller",
    "replicaset-controller",
    "statefulset-controller",
    "garbage-collector-controller",
    "serviceaccount-controller",
    "serviceaccount-token-controller",
    "namespace-controller",
    "node-lifecycle-controller",
    "taint-eviction-controller",
    "horizontal-pod-autoscaler-controller",
    "endpointslice-controller",
    "pod-garbage-collector-controller",
    "root-ca-certificate-publisher-controller",
    "disruption-controller",
    "job-controller",
    "podgroup-protection-controller",
    # Terminating claims keep their finalizer until this controller sees no pod using them:
    # without it a namespace holding a claim never finishes terminating.
    "persistentvolumeclaim-protection-controller",
)


@dataclass(frozen=True)
class Binaries:
    """Where the pinned, cached builds live (see ``build.sh``)."""

    k8s: Path
    etcd: Path
    kwok: Path
    kwok_stages: Path

    @classmethod
    def pinned(cls) -> Binaries:
        v, root = versions(), cache_root()
        kwok_dir = root / "kwok" / f"v{v['KWOK_VERSION']}-{v['KWOK_PATCH']}"
        return cls(
            k8s=root / "k8s" / f"v{v['K8S_VERSION']}" / "bin",
            etcd=root / "etcd" / f"v{v['ETCD_VERSION']}" / "bin",
            kwok=kwok_dir / "bin",
            kwok_stages=kwok_dir / "stages",
        )

    def missing(self) -> list[Path]:
        wanted = [self.k8s / b for b in
                  ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl")]
        wanted += [self.etcd / "etcd", self.kwok / "kwok", self.kwok_stages]
        return [p for p in wanted if not p.exists()]


def ensure_built() -> Binaries:
    """Build whatever is missing from the cache (a no-op on a warm machine)."""
    bins = Binaries.pinned()
    if bins.missing():
        subprocess.run(["bash", str(HERE / "build.sh"), "all"], check=True)
    return bins


@dataclass
class State:
    """What a running cluster is: persisted as ``state.json`` in its directory."""

    tier: str
    ports: dict[str, int]
    layout: dict[str, int] = field(default_factory=dict)
    ready_delay_ms: int = 0
    versions: dict[str, str] = field(default_factory=dict)
    # Extra kube-apiserver flags (``up``), kept for its restarts.
    apiserver_flags: list[str] = field(default_factory=list)


class LocalCluster:
    """One local control plane rooted at ``directory``."""

    def __init__(self, directory: Path | str) -> None:
        self.dir = Path(directory).resolve()
        self.kubeconfig = self.dir / "kubeconfig"
        self.logs = self.dir / "logs"
        self.pids = self.dir / "pids"
        self.bin = self.dir / "bin"
        self.binaries = Binaries.pinned()

    @classmethod
    def external(cls, kubeconfig: Path) -> LocalCluster:
        """A cluster we did not start (kind, a dev cluster): never brought up or down."""
        cluster = cls(kubeconfig.resolve().parent)
        cluster.kubeconfig = kubeconfig.resolve()
        cluster.bin = Path(shutil.which("kubectl") or "kubectl").parent
        return cluster

    # ----------------------------------------------------------------------------- public API

    def up(
        self,
        tier: str = "full",
        layout: NodeLayout | None = None,
        ready_delay_ms: int = 0,
        timeout: float = 120.0,
        apiserver_flags: Sequence[str] = (),
    ) -> float:
        """Bring the cluster to ``tier`` with ``layout`` nodes; returns the seconds it took.
        ``apiserver_flags``: added to kube-apiserver's command line (a test's own cluster, say
        ``--watch-cache-sizes=services#0`` to serve a kind's watches from etcd)."""
        if tier not in TIERS:
            raise ValueError(f"unknown tier {tier!r}, expected one of {TIERS}")
        layout = layout or NodeLayout()
        start = time.monotonic()
        state = self.state()
        if state and state.tier == tier and state.ready_delay_ms == ready_delay_ms \
                and state.apiserver_flags == list(apiserver_flags) and self._healthy(state):
            if tier in WITH_CONTROLLERS:
                self._ensure_nodes(layout, deadline=start + timeout)
                state.layout = asdict(layout)
                self._save(state)
            return time.monotonic() - start
        self.down()
        self.binaries = ensure_built()
        node_bin = None
        if tier == "node":
            real_node.prerequisites()
            node_bin = real_node.ensure_node_built()
            real_node.claim(self.dir)  # NodeTierBusy while another directory holds it
            start = time.monotonic()  # the timeout starts after the builds and the claim
        state = self._fresh_state(tier, layout, ready_delay_ms)
        state.apiserver_flags = list(apiserver_flags)
        self._save(state)
        deadline = start + timeout
        try:
            if node_bin is not None:
                real_node.prepare_host()
            self._start_etcd(state)
            self._start_apiserver(state, deadline)
            if tier in WITH_CONTROLLERS:
                self._start_controller_manager(state)
                self._start_scheduler(state)
                self._start_kwok(state)
                self._wait_healthz(state, "kube-controller-manager", deadline)
                self._wait_healthz(state, "kube-scheduler", deadline)
                self._ensure_nodes(layout, deadline)
                self.kubectl("apply", "--server-side", "--field-manager=lws-e2e", "-f",
                             str(self.binaries.kwok_stages / STORAGE_CLASS))
                self._wait_default_service_account(deadline)
            if node_bin is not None:
                real_node.start(self, state, deadline, node_bin, real_node.image_cache())
        except BaseException:
            self._dump_failure()
            self.down()
            raise
        return time.monotonic() - start

    def down(self) -> None:
        """Stop the processes this directory's pid files name, newest first. Idempotent."""
        real_node.stop(self)  # the real node first, and its host changes undone
        if not self.pids.exists():
            return
        order = ["lws-operator", "kwok", "kube-scheduler", "kube-controller-manager",
                 "kube-apiserver-side", "kube-apiserver", "etcd"]
        for name in order:
            pid_file = self.pids / f"{name}.pid"
            pid = self._live_pid(name)
            if pid is not None:
                terminate(pid)
            pid_file.unlink(missing_ok=True)

    def state(self) -> State | None:
        path = self.dir / "state.json"
        if not path.exists():
            return None
        return State(**json.loads(path.read_text()))

    def kubectl(self, *args: str, stdin: str | None = None, check: bool = True) -> str:
        """Run the cluster's own kubectl (the pinned version) and return stdout."""
        proc = subprocess.run(
            [str(self.bin / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
            input=stdin, capture_output=True, text=True, check=False,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def install_crd(self, path: Path | None = None, timeout: float = 60.0) -> None:
        """Server-side apply our CRDs (too large for client-side apply) and wait until each is
        Established and lists: every file of ``crds/`` (LeaderWorkerSet, DisaggregatedSet and
        its role scaler), or only ``path``. Polled: ``kubectl wait`` errors while there are no
        conditions."""
        files = [path] if path is not None else list(CRD_FILES)
        for file in files:
            self.kubectl("apply", "--server-side", "--force-conflicts",
                         "--field-manager=lws-operator-tests", "-f", str(file))
        deadline = time.monotonic() + timeout
        for file in files:
            name = _CRD_NAMES_BY_FILE.get(file.name) or yaml.load(
                file.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader),
            )["metadata"]["name"]
            while True:
                out = self.kubectl("get", "crd", name, "-o", "jsonpath={.status.conditions}")
                conditions = (json.loads(out) if out.strip() else None) or []
                if any(c["type"] == "Established" and c["status"] == "True"
                       for c in conditions):
                    break
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} not Established after {timeout}s")
                time.sleep(0.2)
            # Established is not yet servable: a CRD just created (or changed) answers its first
            # requests with 429 "storage is (re)initializing" for a moment. All ours are v1.
            plural, group = name.split(".", 1)
            while not self.kubectl("get", "--raw", f"/apis/{group}/v1/{plural}?limit=1",
                                   check=False).strip():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"{name} does not list after {timeout}s")
                time.sleep(0.2)

    def import_image(self, archive: Path | str) -> None:
        """Import an image archive (``podman save``, ``docker save``, OCI) into the real node's
        containerd, where a pod's ``imagePullPolicy: Never``/``IfNotPresent`` finds it."""
        if not real_node.holds(self.dir):
            raise RuntimeError(f"no node tier up in {self.dir}")
        real_node.runtime(self).import_image(Path(archive))

    # ------------------------------------------------------------------ API server faults

    def stop_apiserver(self, kill: bool = False, grace: float = 10.0) -> None:
        """Stop kube-apiserver, leaving etcd and every other component running; its clients
        see refused connections until :meth:`start_apiserver`.

        SIGTERM starts its graceful shutdown, SIGKILL follows after ``grace`` seconds (at once
        with ``kill``). The pinned version stops listening at once but does not wait for its
        watch streams to drain and then never exits on its own: watchers keep an open, silent
        connection until the SIGKILL, which is what a client must survive anyway."""
        pid = self._live_pid("kube-apiserver")
        if pid is not None:
            if kill:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            terminate(pid, grace=grace)
        (self.pids / "kube-apiserver.pid").unlink(missing_ok=True)

    def start_apiserver(self, timeout: float = 120.0) -> None:
        """Start kube-apiserver again, on the same port with the same flags and certificates,
        and wait for ``/readyz``. Go's listeners set SO_REUSEADDR, so the port is free at once.
        """
        state = self.state()
        if state is None:
            raise RuntimeError(f"no cluster in {self.dir}")
        if self.running("kube-apiserver"):
            raise RuntimeError("kube-apiserver is already running")
        self._start_apiserver(state, time.monotonic() + timeout)

    @contextlib.contextmanager
    def side_apiserver(self, timeout: float = 120.0) -> Iterator[Path]:
        """A second kube-apiserver on another port, against the same etcd, for as long as the
        context lasts; yields a kubeconfig that reaches it. With the regular one stopped, this
        is a door through which a test changes the cluster while its regular clients (the
        operator, kube-controller-manager, kwok) cannot reach any API server. It runs as
        ``kube-apiserver-side`` (a link to the binary), so pid files and ``down`` tell the two
        apart."""
        state = self.state()
        if state is None:
            raise RuntimeError(f"no cluster in {self.dir}")
        name = "kube-apiserver-side"
        link = self.bin / name
        link.unlink(missing_ok=True)
        link.symlink_to(self.binaries.k8s / "kube-apiserver")
        port = free_port()
        kubeconfig = self.dir / f"kubeconfig-{name}"
        self._write_kubeconfig(Pki(self.dir / "pki"), port, path=kubeconfig)
        try:
            self._start_apiserver(state, time.monotonic() + timeout, port=port, name=name)
            yield kubeconfig
        finally:
            pid = self._live_pid(name)
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                terminate(pid)
            (self.pids / f"{name}.pid").unlink(missing_ok=True)
            kubeconfig.unlink(missing_ok=True)

    def restart_apiserver(self, kill: bool = False, grace: float = 10.0,
                          timeout: float = 120.0) -> float:
        """Stop and start kube-apiserver on its own port; returns the seconds it was down."""
        start = time.monotonic()
        self.stop_apiserver(kill=kill, grace=grace)
        self.start_apiserver(timeout=timeout)
        return time.monotonic() - start

    def ensure_apiserver(self, timeout: float = 120.0) -> bool:
        """After a fault: make kube-apiserver serve on its own port again (stopping one left on
        another port, starting one if none runs). Returns whether it had to act."""
        state = self.state()
        if state is None:
            raise RuntimeError(f"no cluster in {self.dir}")
        if self.running("kube-apiserver"):
            try:
                self._get(f"https://127.0.0.1:{state.ports['apiserver']}/readyz",
                          client_auth=True)
                return False
            except OSError:
                self.stop_apiserver(kill=True)
        self.start_apiserver(timeout=timeout)
        return True

    def restart_component(self, name: str, timeout: float = 120.0) -> None:
        """Stop (if still running) and start kube-controller-manager, kube-scheduler or kwok
        again, as a kubelet restarts a static pod: their informers (and the garbage
        collector's graph, the scheduler's cache) are built afresh."""
        state = self.state()
        if state is None or state.tier not in WITH_CONTROLLERS:
            raise RuntimeError(f"no full-tier cluster in {self.dir}")
        starts = {"kube-controller-manager": self._start_controller_manager,
                  "kube-scheduler": self._start_scheduler, "kwok": self._start_kwok}
        pid = self._live_pid(name)
        if pid is not None:
            terminate(pid)
        starts[name](state)
        if name != "kwok":
            self._wait_healthz(state, name, time.monotonic() + timeout)

    def _etcd(self, call: str, body: dict[str, object]) -> dict[str, object]:
        """One call to etcd's v3 JSON gateway (plain HTTP on 127.0.0.1, as the API server
        reaches it)."""
        state = self.state()
        if state is None:
            raise RuntimeError(f"no cluster in {self.dir}")
        request = urllib.request.Request(
            f"http://127.0.0.1:{state.ports['etcd-client']}/v3/{call}",
            data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=30) as answer:
            decoded: dict[str, object] = json.loads(answer.read() or b"{}")
        return decoded

    def etcd_revision(self) -> int:
        """etcd's current revision (what the API server hands out as resourceVersions)."""
        header = self._etcd("maintenance/status", {}).get("header") or {}
        assert isinstance(header, dict)
        return int(header["revision"])

    def compact_etcd(self, revision: int | None = None) -> int:
        """Compact etcd's history up to ``revision`` (default: the current one) and return it:
        a watch or list from an older resourceVersion is then answered 410 Gone by etcd. The
        API server's watch cache still serves its recent window from memory, so a watch it
        serves only expires once the cache itself restarts (:meth:`restart_apiserver`).
        An already compacted revision is not an error."""
        revision = revision or self.etcd_revision()
        try:
            self._etcd("kv/compaction", {"revision": str(revision), "physical": True})
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")
            if "compacted" not in detail:
                raise RuntimeError(f"etcd compaction to {revision} failed: {detail}") from exc
        return revision

    @property
    def server(self) -> str:
        state = self.state()
        if state is None:
            raise RuntimeError(f"no cluster in {self.dir}")
        return f"https://127.0.0.1:{state.ports['apiserver']}"

    # ---------------------------------------------------------------------------- internals

    def _fresh_state(self, tier: str, layout: NodeLayout, ready_delay_ms: int) -> State:
        for sub in ("etcd-data", "logs", "pids", "pki", "apiserver-certs"):
            shutil.rmtree(self.dir / sub, ignore_errors=True)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir()
        self.pids.mkdir()
        names = ("etcd-client", "etcd-peer", "apiserver", "controller-manager", "scheduler",
                 "kwok")
        ports = {n: free_port() for n in names}
        state = State(tier=tier, ports=ports, layout=asdict(layout),
                      ready_delay_ms=ready_delay_ms, versions=versions())
        pki = ensure_pki(self.dir / "pki")
        self._write_kubeconfig(pki, ports["apiserver"])
        self.bin.mkdir(exist_ok=True)
        link = self.bin / "kubectl"
        link.unlink(missing_ok=True)
        link.symlink_to(self.binaries.k8s / "kubectl")
        self._save(state)
        return state

    def _save(self, state: State) -> None:
        (self.dir / "state.json").write_text(json.dumps(asdict(state), indent=2) + "\n")

    def _write_kubeconfig(self, pki: Pki, port: int, path: Path | None = None) -> None:
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "lws-local", "cluster": {
                "server": f"https://127.0.0.1:{port}",
                "certificate-authority": str(pki.ca_crt),
            }}],
            "users": [{"name": "admin", "user": {
                "client-certificate": str(pki.admin_crt),
                "client-key": str(pki.admin_key),
            }}],
            "contexts": [{"name": "lws-local", "context": {"cluster": "lws-local",
                                                          "user": "admin"}}],
            "current-context": "lws-local",
        }
        path = path or self.kubeconfig
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)

    def _spawn(self, name: str, argv: list[str]) -> None:
        log = (self.logs / f"{name}.log").open("ab")
        proc = subprocess.Popen(
            argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, cwd=self.dir,
        )
        log.close()
        (self.pids / f"{name}.pid").write_text(f"{proc.pid}\n")

    def running(self, name: str) -> bool:
        """Whether the process ``name`` that this directory started is alive."""
        return self._live_pid(name) is not None

    def _live_pid(self, name: str) -> int | None:
        """The pid in ``name``'s pid file if that process is still the binary we started.

        A zombie is dead. Right after exec ``/proc/<pid>/cmdline`` can briefly read back empty,
        so the kernel's command name (``comm``, truncated to 15 characters) is the fallback.
        """
        try:
            pid = int((self.pids / f"{name}.pid").read_text())
            stat = Path(f"/proc/{pid}/stat").read_text()
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        comm, _, rest = stat.partition("(")[2].rpartition(")")
        if rest.split()[:1] == ["Z"]:
            return None
        if cmdline:
            # A binary runs as argv[0]; a Python console script as argv[1] of its interpreter.
            argv = [Path(a.decode(errors="replace")).name for a in cmdline.split(b"\0")[:2]]
            return pid if name in argv else None
        return pid if comm == name[:15] else None

    def _start_etcd(self, state: State) -> None:
        client = f"http://127.0.0.1:{state.ports['etcd-client']}"
        peer = f"http://127.0.0.1:{state.ports['etcd-peer']}"
        self._spawn("etcd", [
            str(self.binaries.etcd / "etcd"),
            "--name=node0",
            f"--data-dir={self.dir / 'etcd-data'}",
            f"--listen-client-urls={client}", f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}", f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=node0={peer}",
            "--unsafe-no-fsync=true",
            "--auto-compaction-mode=periodic", "--auto-compaction-retention=5m",
            "--quota-backend-bytes=8589934592",
            "--watch-progress-notify-interval=5s",
            "--log-level=warn",
        ])

    def _start_apiserver(self, state: State, deadline: float, port: int | None = None,
                         name: str = "kube-apiserver") -> None:
        pki = Pki(self.dir / "pki")
        port = port or state.ports["apiserver"]
        binary = self.binaries.k8s / name if name == "kube-apiserver" else self.bin / name
        argv = [
            str(binary),
            f"--etcd-servers=http://127.0.0.1:{state.ports['etcd-client']}",
            "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
            # The endpoint reconciler refuses loopback addresses; nothing in-cluster dials it.
            "--endpoint-reconciler-type=none",
            f"--secure-port={port}",
            f"--tls-cert-file={pki.serving_crt}", f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_crt}",
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--enable-priority-and-fairness=false",
            "--max-requests-inflight=0", "--max-mutating-requests-inflight=0",
            f"--feature-gates={FEATURE_GATES}",
            f"--runtime-config={RUNTIME_CONFIG}",
            # kwok fake nodes carry no kubelet client certificate; short not-ready tolerations
            # keep node-failure scenarios quick.
            "--default-not-ready-toleration-seconds=30",
            "--default-unreachable-toleration-seconds=30",
            f"--cert-dir={self.dir / 'apiserver-certs'}",
            "--v=1",
            *state.apiserver_flags,
        ]
        if state.tier == "node":
            argv = [a for a in argv if not a.startswith(("--bind-address=",
                                                         "--advertise-address="))]
            argv += real_node.apiserver_flags(pki)
            if name == "kube-apiserver":
                # The `kubernetes` Service's endpoint, for pods (a side API server on another
                # port must not take it over).
                argv.remove("--endpoint-reconciler-type=none")
        if state.tier == "api":
            # Without kube-controller-manager nobody creates the `default` service account.
            argv.append("--disable-admission-plugins=ServiceAccount")
        self._spawn(name, argv)
        self._wait_url(f"https://127.0.0.1:{port}/readyz", deadline, name, client_auth=True)

    def _component_auth(self) -> list[str]:
        kc = str(self.kubeconfig)
        return [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            f"--feature-gates={FEATURE_GATES}",
        ]

    def _start_controller_manager(self, state: State) -> None:
        pki = Pki(self.dir / "pki")
        self._spawn("kube-controller-manager", [
            str(self.binaries.k8s / "kube-controller-manager"),
            *self._component_auth(),
            f"--secure-port={state.ports['controller-manager']}",
            f"--controllers={','.join(CONTROLLERS)}",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_crt}",
            "--use-service-account-credentials=false",
            "--allocate-node-cidrs=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--kube-api-qps=500", "--kube-api-burst=1000",
            "--concurrent-statefulset-syncs=10", "--concurrent-deployment-syncs=10",
            "--concurrent-replicaset-syncs=10", "--concurrent-gc-syncs=40",
            # Shorter than upstream's 50 s for quick node-failure scenarios, yet longer than an
            # API server restart plus a lease renewal interval (10 s): kwok's Running pods are
            # never made Ready again once marked not ready for a missed heartbeat.
            "--node-monitor-grace-period=40s",
            "--v=1",
        ])

    def _start_scheduler(self, state: State) -> None:
        self._spawn("kube-scheduler", [
            str(self.binaries.k8s / "kube-scheduler"),
            *self._component_auth(),
            f"--secure-port={state.ports['scheduler']}",
            "--kube-api-qps=500", "--kube-api-burst=1000",
            "--v=1",
        ])

    def _start_kwok(self, state: State) -> None:
        stages = self.dir / "kwok-stages.yaml"
        nodes = NodeLayout(**state.layout).total if state.layout else NodeLayout().total
        stages.write_text(render_stages(self.binaries.kwok_stages, state.ready_delay_ms)
                          + "---\n" + kwok_configuration(nodes))
        self._spawn("kwok", [
            str(self.binaries.kwok / "kwok"),
            f"--kubeconfig={self.kubeconfig}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            f"--cidr={POD_CIDR}",
            "--node-ip=10.255.0.1",
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{state.ports['kwok']}",
            f"--config={stages}",
        ])

    def _ensure_nodes(self, layout: NodeLayout, deadline: float) -> None:
        nodes = node_manifests(layout)
        doc = {"apiVersion": "v1", "kind": "List", "items": nodes}
        self.kubectl("apply", "--server-side", "--field-manager=lws-e2e", "-f", "-",
                     stdin=json.dumps(doc))
        # Status (capacity, labels) comes from the spec'd manifest; kwok fills in conditions.
        wanted = {n["metadata"]["name"] for n in nodes}
        while True:
            ready = set(self._ready_nodes())
            if wanted <= ready:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"nodes not Ready: {sorted(wanted - ready)[:10]}")
            time.sleep(0.3)

    def _ready_nodes(self) -> list[str]:
        out = json.loads(self.kubectl("get", "nodes", "-o", "json"))
        ready = []
        for node in out["items"]:
            for cond in node.get("status", {}).get("conditions", []):
                if cond["type"] == "Ready" and cond["status"] == "True":
                    ready.append(node["metadata"]["name"])
        return ready

    def _wait_default_service_account(self, deadline: float) -> None:
        while self.kubectl("get", "serviceaccount", "default", "-n", "default",
                           "--ignore-not-found", "-o", "name").strip() == "":
            if time.monotonic() > deadline:
                raise TimeoutError("the default service account never appeared")
            time.sleep(0.2)

    def _healthy(self, state: State) -> bool:
        names = ["etcd", "kube-apiserver"]
        if state.tier in WITH_CONTROLLERS:
            names += ["kube-controller-manager", "kube-scheduler", "kwok"]
        if any(self._live_pid(n) is None for n in names):
            return False
        if state.tier == "node" and not real_node.healthy(self):
            return False
        try:
            self._get(f"https://127.0.0.1:{state.ports['apiserver']}/readyz", client_auth=True)
        except OSError:
            return False
        return True

    def _ssl_context(self, client_auth: bool) -> ssl.SSLContext:
        pki = Pki(self.dir / "pki")
        if not client_auth:
            return ssl._create_unverified_context()  # kcm/scheduler serve self-signed certs
        ctx = ssl.create_default_context(cafile=str(pki.ca_crt))
        ctx.load_cert_chain(str(pki.admin_crt), str(pki.admin_key))
        return ctx

    def _get(self, url: str, client_auth: bool) -> str:
        with urllib.request.urlopen(url, context=self._ssl_context(client_auth), timeout=5) as r:
            return str(r.read().decode())

    def _wait_url(self, url: str, deadline: float, what: str, client_auth: bool) -> None:
        last: Exception | None = None
        while time.monotonic() < deadline:
            if self._live_pid(what) is None:
                raise RuntimeError(f"{what} exited; see {self.logs / (what + '.log')}")
            try:
                if self._get(url, client_auth).strip() == "ok":
                    return
            except (OSError, urllib.error.URLError) as exc:
                last = exc
            time.sleep(0.2)
        raise TimeoutError(f"{what} not healthy at {url}: {last}")

    def _wait_healthz(self, state: State, what: str, deadline: float) -> None:
        port = state.ports["controller-manager" if what == "kube-controller-manager"
                          else "scheduler"]
        self._wait_url(f"https://127.0.0.1:{port}/healthz", deadline, what, client_auth=False)

    def _dump_failure(self) -> None:
        """On a failed start, show the tail of every component log (CI has nothing else)."""
        if not self.logs.exists():
            return
        for log in sorted(self.logs.glob("*.log")):
            lines = log.read_text(errors="replace").splitlines()[-25:]
            print(f"--- {log.name} (last {len(lines)} lines)", file=sys.stderr)
            print("\n".join(lines), file=sys.stderr)
