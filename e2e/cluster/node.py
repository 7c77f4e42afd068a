"""The node tier: the full tier plus one real kubelet node, so that a pod runs a real container.

``python -m e2e.cluster up --tier node`` (``make cluster-up TIER=node``) starts the full tier and
then, on this machine, containerd (Debian's 1.6, with runc and the CNI plugins, see
``containerd.py``), a kubelet and kube-proxy built from the pinned Kubernetes (``build.sh node``).
The node ``lws-real-node`` is labelled and tainted ``lws-operator.dev/real-node=true:NoSchedule``
so that workload and benchmark pods stay on the kwok nodes; a pod meant for it carries
:data:`PLACEMENT`. Pods live on the bridge ``lwsnode0`` (10.244.0.0/24, the host is 10.244.0.1).

How the pieces reach each other:

* the API server binds all addresses and advertises 10.244.0.1, so the ``kubernetes`` Service's
  endpoint is reachable from the pod network; kube-proxy (iptables mode) turns the Service IP
  into that endpoint for pods;
* the API server calls webhooks (and aggregated APIs) through a Service's endpoints
  (``--enable-aggregator-routing``): a pod IP on the bridge, which the host routes to directly;
* it reaches the kubelet (logs, exec) at 10.244.0.1 with the admin client certificate, and
  checks the kubelet's serving certificate against the cluster CA; the kubelet accepts only
  client certificates of that CA;
* the kubelet authenticates as ``system:node:lws-real-node`` (group ``system:nodes``) and
  kube-proxy as ``system:kube-proxy``, both with certificates of the cluster CA.

Host changes and how ``down`` undoes them (one node tier per machine: the run directory is the
claim; ``up`` refuses while another cluster directory holds it and its processes live, and undoes
a dead holder's changes first):

* Debian packages ``containerd runc containernetworking-plugins iptables conntrack nftables``,
  installed with apt-get where missing: kept (they are inert while nothing runs them).
* ``/run/lws-operator-node``: containerd's root, state, socket and runc root, the kubelet's root
  directory and pod logs, the CNI configuration, IP allocations and network namespaces, and the
  record of the host's prior state (``host.json``): every mount under it is unmounted, then it
  is removed.
* Processes: containerd, its shims and every container, the kubelet, kube-proxy: stopped
  (containers and shims killed, the kubelet first so that it restarts nothing).
* Sysctls (:data:`SYSCTLS`): ``net.ipv4.ip_forward`` and ``net.bridge.bridge-nf-call-ip*tables``
  set by the tier; ``vm.overcommit_memory``, ``vm.panic_on_oom``, ``kernel.panic``,
  ``kernel.panic_on_oops``, ``kernel.keys.root_max*`` by the kubelet (``protectKernelDefaults:
  false``); kube-proxy's conntrack and ``route_localnet`` ones are switched off by its flags but
  recorded anyway: every one is written back to the value recorded before ``up``.
* The bridge ``lwsnode0`` and its veths: deleted.
* iptables (v4 and v6, every table): chains ``KUBE-*`` that kube-proxy and the kubelet add, and
  the rules of other chains that jump to them: deleted (all of them: the tier assumes no other
  Kubernetes node on the machine); other chains stay. Tables they create (``mangle``, the v6
  ones): deleted with ``nft`` once empty.
* cgroups: the ``kubepods`` tree the kubelet creates in each v1 hierarchy: removed.
* Paths outside the run directory that a component creates (:data:`HOST_PATHS`, for example
  containerd's shim sockets in ``/run/containerd`` and libcni's cache in ``/var/lib/cni``):
  removed if they did not exist before, or pruned of what is ours.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from .containerd import CNI_NETWORK, Runtime, build_images, ensure_packages
from .host import HERE, cache_root, free_port, terminate, versions
from .pki import Pki, issue_cert

if TYPE_CHECKING:
    from .launcher import LocalCluster, State

RUN_DIR = Path(os.environ.get("LWS_NODE_RUN_DIR", "/run/lws-operator-node"))
NODE_NAME = "lws-real-node"
BRIDGE = "lwsnode0"
POD_SUBNET = "10.244.0.0/24"
GATEWAY = "10.244.0.1"
LABEL = "lws-operator.dev/real-node"
# What a pod (or the chart's values) carries to run on the real node and nowhere else.
PLACEMENT: dict[str, Any] = {
    "nodeSelector": {LABEL: "true"},
    "tolerations": [{"key": LABEL, "operator": "Equal", "value": "true",
                     "effect": "NoSchedule"}],
}
PROCESSES = ("kube-proxy", "kubelet", "containerd")  # stop order
SYSCTLS = (
    "net.ipv4.ip_forward",
    "net.bridge.bridge-nf-call-iptables",
    "net.bridge.bridge-nf-call-ip6tables",
    "net.ipv4.conf.all.route_localnet",
    "vm.overcommit_memory",
    "vm.panic_on_oom",
    "kernel.panic",
    "kernel.panic_on_oops",
    "kernel.keys.root_maxkeys",
    "kernel.keys.root_maxbytes",
    "net.netfilter.nf_conntrack_max",
    "net.netfilter.nf_conntrack_tcp_timeout_established",
    "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
)
# Paths outside the run directory that a component may create, and what ``down`` does with one
# that did not exist before ``up``: remove it, or prune it of what is ours (libcni's cache is
# shared with any other CNI user, podman for one).
HOST_PATHS = {
    "/run/containerd": "remove",
    "/var/lib/kubelet": "remove",
    "/var/log/pods": "remove",
    "/var/log/containers": "remove",
    "/usr/libexec/kubernetes": "remove",
    "/etc/kubernetes": "remove",
    "/var/lib/cni": "prune",
}
IPTABLES = ("iptables", "ip6tables")
NFT_FAMILY = {"iptables": "ip", "ip6tables": "ip6"}
BUILTIN_CHAINS = {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}
CHAIN_PREFIX = "KUBE-"
CGROUPS = Path("/sys/fs/cgroup")


class NodeTierBusy(RuntimeError):
    """Another cluster directory holds this machine's node tier."""


@dataclass
class HostRecord:
    """The host as it was before ``up`` changed it: what ``down`` restores."""

    cluster: str
    sysctls: dict[str, str] = field(default_factory=dict)
    absent_paths: list[str] = field(default_factory=list)
    iptables: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    absent_cgroups: list[str] = field(default_factory=list)

    @classmethod
    def load(cls) -> HostRecord | None:
        try:
            return cls(**json.loads((RUN_DIR / "host.json").read_text()))
        except (OSError, ValueError, TypeError):
            return None


# ------------------------------------------------------------------------------ host state


def _sysctl_path(key: str) -> Path:
    return Path("/proc/sys") / key.replace(".", "/")


def read_sysctls() -> dict[str, str]:
    out = {}
    for key in SYSCTLS:
        with contextlib.suppress(OSError):
            out[key] = _sysctl_path(key).read_text().strip()
    return out


def _set_sysctl(key: str, value: str) -> None:
    with contextlib.suppress(OSError):
        _sysctl_path(key).write_text(value + "\n")


def iptables_save(family: str) -> dict[str, tuple[list[str], list[str]]]:
    """Each table of ``family`` as (its chains, its ``-A`` rules)."""
    if shutil.which(f"{family}-save") is None:
        return {}
    proc = subprocess.run([f"{family}-save"], capture_output=True, text=True, check=False)
    tables: dict[str, tuple[list[str], list[str]]] = {}
    chains: list[str] = []
    rules: list[str] = []
    for line in proc.stdout.splitlines():
        if line.startswith("*"):
            chains, rules = [], []
            tables[line[1:]] = (chains, rules)
        elif line.startswith(":"):
            chains.append(line[1:].split()[0])
        elif line.startswith("-A "):
            rules.append(line)
    return tables


def iptables_chains() -> dict[str, dict[str, list[str]]]:
    return {family: {table: chains for table, (chains, _) in iptables_save(family).items()}
            for family in IPTABLES}


def _kubepods() -> list[Path]:
    return [h / "kubepods" for h in sorted(CGROUPS.iterdir()) if h.is_dir()] \
        if CGROUPS.is_dir() else []


def snapshot(cluster: Path) -> HostRecord:
    """What the host looks like now, as far as the node tier changes it (``KUBE-*`` chains
    found are a dead run's leftovers, never part of the state to restore)."""
    chains = {family: {table: [c for c in names if not c.startswith(CHAIN_PREFIX)]
                       for table, names in tables.items()}
              for family, tables in iptables_chains().items()}
    return HostRecord(
        cluster=str(cluster),
        sysctls=read_sysctls(),
        absent_paths=[p for p in HOST_PATHS if not os.path.lexists(p)],
        iptables=chains,
        absent_cgroups=[str(p) for p in _kubepods() if not p.exists()],
    )


def leftovers(record: HostRecord) -> list[str]:
    """How the host differs from ``record`` in what the tier changes (empty after a clean
    ``down``)."""
    found = []
    now = read_sysctls()
    found += [f"sysctl {k}={now.get(k)} (was {v})" for k, v in record.sysctls.items()
              if now.get(k) != v]
    if Path(f"/sys/class/net/{BRIDGE}").exists():
        found.append(f"bridge {BRIDGE}")
    for family, tables in iptables_chains().items():
        found += [f"{family} table {t}" for t in tables if t not in record.iptables.get(family, {})]
        for table, chains in tables.items():
            before = set(record.iptables.get(family, {}).get(table, []))
            found += [f"{family} -t {table} chain {c}" for c in chains
                      if c.startswith(CHAIN_PREFIX) and c not in before]
    found += [f"path {p}" for p in record.absent_paths if os.path.lexists(p)]
    found += [f"cgroup {p}" for p in record.absent_cgroups if os.path.exists(p)]
    found += [f"mount {m}" for m in _mounts_under(RUN_DIR)]
    if RUN_DIR.exists():
        found.append(f"path {RUN_DIR}")
    return found


# ------------------------------------------------------------------------------ the claim


def _pid_alive(cluster: Path, name: str) -> bool:
    try:
        pid = int((cluster / "pids" / f"{name}.pid").read_text())
        comm = Path(f"/proc/{pid}/comm").read_text().strip()
    except (OSError, ValueError):
        return False
    return comm == name[:15]


def claim(cluster: Path, wait: float | None = None) -> HostRecord:
    """Take the machine's node tier for ``cluster``: record the host as it is, then create the
    run directory (the claim). A claim whose processes are gone is undone first. Another live
    holder is waited for up to ``wait`` seconds (default ``LWS_NODE_WAIT``, else 0): two test
    sessions then take turns instead of failing."""
    if wait is None:
        wait = float(os.environ.get("LWS_NODE_WAIT", "0"))
    give_up = time.monotonic() + wait
    while RUN_DIR.exists():
        held = HostRecord.load()
        if held is not None and Path(held.cluster) != cluster and any(
                _pid_alive(Path(held.cluster), name) for name in PROCESSES):
            if time.monotonic() < give_up:
                time.sleep(2)
                continue
            raise NodeTierBusy(
                f"the node tier is up in {held.cluster} (one per machine): stop it first with "
                f"python -m e2e.cluster --dir {held.cluster} down")
        release(held)
        break
    record = snapshot(cluster)
    try:
        RUN_DIR.mkdir(parents=True)
    except FileExistsError:
        raise NodeTierBusy("another `up` took the node tier at the same moment") from None
    (RUN_DIR / "host.json").write_text(json.dumps(asdict(record), indent=2) + "\n")
    return record


def holds(cluster: Path) -> bool:
    held = HostRecord.load()
    return held is not None and Path(held.cluster) == cluster


def prepare_host() -> None:
    """Forwarding and bridge netfilter for Service traffic, and the bridge with the host's
    address on the pod network (the API server advertises it, so it must exist first)."""
    _set_sysctl("net.ipv4.ip_forward", "1")
    if not _sysctl_path("net.bridge.bridge-nf-call-iptables").exists():
        subprocess.run(["modprobe", "br_netfilter"], check=False, capture_output=True)
    _set_sysctl("net.bridge.bridge-nf-call-iptables", "1")
    _set_sysctl("net.bridge.bridge-nf-call-ip6tables", "1")
    if not Path(f"/sys/class/net/{BRIDGE}").exists():
        subprocess.run(["ip", "link", "add", BRIDGE, "type", "bridge"], check=True)
    subprocess.run(["ip", "addr", "replace", f"{GATEWAY}/24", "dev", BRIDGE], check=True)
    subprocess.run(["ip", "link", "set", BRIDGE, "up"], check=True)


def apiserver_flags(pki: Pki) -> list[str]:
    return [
        "--bind-address=0.0.0.0",
        f"--advertise-address={GATEWAY}",
        "--enable-aggregator-routing=true",
        f"--kubelet-certificate-authority={pki.ca_crt}",
        f"--kubelet-client-certificate={pki.admin_crt}",
        f"--kubelet-client-key={pki.admin_key}",
        "--kubelet-preferred-address-types=InternalIP",
    ]


# ------------------------------------------------------------------------------ start


def runtime(cluster: LocalCluster) -> Runtime:
    return Runtime(RUN_DIR, cluster.dir / "containerd.toml")


def _kubeconfig(path: Path, port: int, pki: Pki, cert: Path, key: Path) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "local", "cluster": {"server": f"https://127.0.0.1:{port}",
                                                   "certificate-authority": str(pki.ca_crt)}}],
        "users": [{"name": "user", "user": {"client-certificate": str(cert),
                                            "client-key": str(key)}}],
        "contexts": [{"name": "local", "context": {"cluster": "local", "user": "user"}}],
        "current-context": "local",
    }, sort_keys=False))
    path.chmod(0o600)
    return path


def _kubelet_config(path: Path, pki: Pki, cert: Path, key: Path, rt: Runtime,
                    ports: dict[str, int]) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # This machine class mounts cgroup v1 (hybrid) and grants no CAP_SYS_RESOURCE.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "cgroupRoot": "/",
        "protectKernelDefaults": False,
        "oomScoreAdj": 0,
        "failSwapOn": False,
        "containerRuntimeEndpoint": rt.endpoint,
        "address": GATEWAY,
        "port": ports["kubelet"],
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports["kubelet-healthz"],
        "tlsCertFile": str(cert),
        "tlsPrivateKeyFile": str(key),
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": False},
                           "x509": {"clientCAFile": str(pki.ca_crt)}},
        "authorization": {"mode": "AlwaysAllow"},
        "registerWithTaints": [{"key": LABEL, "value": "true", "effect": "NoSchedule"}],
        "podLogsDir": str(RUN_DIR / "pod-logs"),
        "volumePluginDir": str(RUN_DIR / "volume-plugins"),
        "resolvConf": "/etc/resolv.conf",
        "imageGCHighThresholdPercent": 99,
        "imageGCLowThresholdPercent": 98,
        "evictionHard": {"memory.available": "100Mi", "nodefs.available": "1%",
                         "imagefs.available": "1%"},
        "serializeImagePulls": False,
        "maxPods": 60,
        "nodeStatusUpdateFrequency": "10s",
    }, sort_keys=False))
    return path


def start(cluster: LocalCluster, state: State, deadline: float, bin_dir: Path,
          image_cache: Path) -> None:
    """Start containerd, import the pause and probe images, start the kubelet and kube-proxy,
    and wait until the node is Ready and kube-proxy has synced its rules."""
    pki = Pki(cluster.dir / "pki")
    port = state.ports["apiserver"]
    ports = {n: free_port() for n in ("kubelet", "kubelet-healthz", "kube-proxy-healthz",
                                      "kube-proxy-metrics")}
    state.ports.update(ports)
    cluster._save(state)
    rt = runtime(cluster)
    rt.write_config(POD_SUBNET, GATEWAY, BRIDGE)
    cluster._spawn("containerd", ["containerd", "--config", str(rt.config)])
    while rt.ctr("version", check=False) == "":
        if not cluster.running("containerd"):
            raise RuntimeError(f"containerd exited; see {cluster.logs / 'containerd.log'}")
        if time.monotonic() > deadline:
            raise TimeoutError("containerd does not answer")
        time.sleep(0.2)
    for archive in build_images(image_cache).values():
        rt.import_image(archive)

    node_dir = cluster.dir / "node"
    node_dir.mkdir(exist_ok=True)
    cert, key = issue_cert(pki, "kubelet", f"system:node:{NODE_NAME}", "system:nodes",
                           sans=[GATEWAY, "127.0.0.1", NODE_NAME])
    kubelet_kc = _kubeconfig(node_dir / "kubelet.kubeconfig", port, pki, cert, key)
    proxy_cert, proxy_key = issue_cert(pki, "kube-proxy", "system:kube-proxy")
    proxy_kc = _kubeconfig(node_dir / "kube-proxy.kubeconfig", port, pki, proxy_cert, proxy_key)
    config = _kubelet_config(node_dir / "kubelet.yaml", pki, cert, key, rt, ports)
    cluster._spawn("kubelet", [
        str(bin_dir / "kubelet"),
        f"--config={config}",
        f"--kubeconfig={kubelet_kc}",
        f"--root-dir={RUN_DIR / 'kubelet'}",
        f"--hostname-override={NODE_NAME}",
        f"--node-ip={GATEWAY}",
        f"--node-labels={LABEL}=true",
        "--v=1",
    ])
    cluster._spawn("kube-proxy", [
        str(bin_dir / "kube-proxy"),
        f"--kubeconfig={proxy_kc}",
        f"--hostname-override={NODE_NAME}",
        "--proxy-mode=iptables",
        f"--cluster-cidr={POD_SUBNET}",
        f"--healthz-bind-address=127.0.0.1:{ports['kube-proxy-healthz']}",
        f"--metrics-bind-address=127.0.0.1:{ports['kube-proxy-metrics']}",
        # Leave the machine's conntrack table and route_localnet alone.
        "--conntrack-max-per-core=0", "--conntrack-min=0",
        "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
        "--iptables-localhost-nodeports=false",
        "--v=1",
    ])
    _wait_node_ready(cluster, deadline)
    _wait_http(cluster, "kube-proxy", f"http://127.0.0.1:{ports['kube-proxy-healthz']}/healthz",
               deadline)


def _wait_node_ready(cluster: LocalCluster, deadline: float) -> None:
    while True:
        for name in ("containerd", "kubelet"):
            if not cluster.running(name):
                raise RuntimeError(f"{name} exited; see {cluster.logs / (name + '.log')}")
        out = cluster.kubectl("get", "node", NODE_NAME, "--ignore-not-found", "-o",
                              'jsonpath={.status.conditions[?(@.type=="Ready")].status}',
                              check=False)
        if out.strip() == "True":
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"node {NODE_NAME} not Ready")
        time.sleep(0.5)


def _wait_http(cluster: LocalCluster, name: str, url: str, deadline: float) -> None:
    while True:
        if not cluster.running(name):
            raise RuntimeError(f"{name} exited; see {cluster.logs / (name + '.log')}")
        with contextlib.suppress(OSError), urllib.request.urlopen(url, timeout=2) as resp:
            if resp.status == 200:
                return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name} not healthy at {url}")
        time.sleep(0.5)


def healthy(cluster: LocalCluster) -> bool:
    return holds(cluster.dir) and all(cluster.running(n) for n in PROCESSES)


# ------------------------------------------------------------------------------ stop


def stop(cluster: LocalCluster) -> None:
    """Stop this cluster's node processes and, if it holds the claim, undo the host changes."""
    ours = holds(cluster.dir)
    if not ours and not any(cluster.running(name) for name in PROCESSES):
        return
    for name in PROCESSES:
        pid = cluster._live_pid(name)
        if name == "containerd" and ours:
            _kill_containers()
        if pid is not None:
            terminate(pid)
        (cluster.pids / f"{name}.pid").unlink(missing_ok=True)
    if holds(cluster.dir):
        release(HostRecord.load())


def release(record: HostRecord | None) -> None:
    """Undo the node tier's host changes as ``record`` saw the host before (what can be undone
    without a record, when ``up`` died before writing it, is undone all the same)."""
    if record is not None:
        for pid, comm, cmdline in _processes():
            if comm in PROCESSES and f"{record.cluster}/" in cmdline:
                _kill(pid)
    _kill_containers()
    _unmount_under(RUN_DIR)
    _delete_bridge()
    if record is not None:
        _iptables_undo(record.iptables)
        for key, value in record.sysctls.items():
            _set_sysctl(key, value)
        for path in record.absent_cgroups:
            _rmdir_tree(Path(path))
        for path in record.absent_paths:
            _undo_path(Path(path), HOST_PATHS.get(path, "prune"))
    shutil.rmtree(RUN_DIR, ignore_errors=True)


def _processes() -> Iterator[tuple[int, str, str]]:
    """(pid, command name, command line) of every process."""
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            comm = (entry / "comm").read_text().strip()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(
                errors="replace")
        except OSError:
            continue
        yield int(entry.name), comm, cmdline


def _kill(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def _kill_containers() -> None:
    """SIGKILL every process in the kubelet's cgroups and every shim of our containerd."""
    for _ in range(20):
        pids = set()
        for root in _kubepods():
            if root.is_dir():
                for procs in root.rglob("cgroup.procs"):
                    with contextlib.suppress(OSError, ValueError):
                        pids |= {int(p) for p in procs.read_text().split()}
        pids |= {pid for pid, comm, cmdline in _processes()
                 if comm.startswith("containerd-shim") and str(RUN_DIR) in cmdline}
        pids.discard(os.getpid())
        if not pids:
            return
        for pid in pids:
            _kill(pid)
        time.sleep(0.2)


def _mounts_under(root: Path) -> list[str]:
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = line.split()[4].encode().decode("unicode_escape")
            if point == str(root) or point.startswith(f"{root}/"):
                found.append(point)
    return found


def _unmount_under(root: Path) -> None:
    for _ in range(5):
        points = _mounts_under(root)
        if not points:
            return
        for point in sorted(set(points), key=len, reverse=True):
            if subprocess.run(["umount", point], capture_output=True, check=False).returncode:
                subprocess.run(["umount", "-l", point], capture_output=True, check=False)


def _delete_bridge() -> None:
    if not Path(f"/sys/class/net/{BRIDGE}").exists():
        return
    for port in Path(f"/sys/class/net/{BRIDGE}/brif").iterdir():
        subprocess.run(["ip", "link", "del", port.name], capture_output=True, check=False)
    subprocess.run(["ip", "link", "del", BRIDGE], capture_output=True, check=False)


def _iptables_undo(before: dict[str, dict[str, list[str]]]) -> None:
    """Delete every ``KUBE-*`` chain and every rule jumping to one, then the tables that did not
    exist before and are empty again (iptables over nf_tables creates a table on first use and
    never deletes it: ``nft`` does). All ``KUBE-*`` chains, not only new ones: the tier assumes
    no other Kubernetes node on the machine (its kube-proxy would fight ours over them), so any
    found are a dead run's leftovers."""
    for family in IPTABLES:
        for table, (chains, rules) in iptables_save(family).items():
            added = {c for c in chains if c.startswith(CHAIN_PREFIX)}
            if not added:
                continue
            run = [family, "-w", "-t", table]
            for rule in rules:
                words = shlex.split(rule)
                target = next((words[i + 1] for i, w in enumerate(words[:-1])
                               if w in ("-j", "-g", "--jump", "--goto")), None)
                if words[1] not in added and target in added:
                    subprocess.run([*run, "-D", *words[1:]], capture_output=True, check=False)
            for chain in sorted(added):
                subprocess.run([*run, "-F", chain], capture_output=True, check=False)
            for chain in sorted(added):
                subprocess.run([*run, "-X", chain], capture_output=True, check=False)
        if shutil.which("nft") is None:
            continue
        for table, (chains, rules) in iptables_save(family).items():
            if table not in before.get(family, {}) and not rules \
                    and set(chains) <= BUILTIN_CHAINS:
                subprocess.run(["nft", "delete", "table", NFT_FAMILY[family], table],
                               capture_output=True, check=False)


def _rmdir_tree(root: Path) -> None:
    """Remove a cgroup directory tree (cgroupfs removes directories, never files)."""
    if not root.is_dir():
        return
    dirs = sorted((p for p in root.rglob("*") if p.is_dir()), key=lambda p: len(p.parts),
                  reverse=True)
    for _ in range(20):
        for d in [*dirs, root]:
            with contextlib.suppress(OSError):
                d.rmdir()
        if not root.exists():
            return
        time.sleep(0.2)


def _undo_path(path: Path, how: str) -> None:
    if not os.path.lexists(path):
        return
    _unmount_under(path)
    if how == "remove":
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
        return
    # Prune: what is ours (``_ours``), then empty directories.
    for entry in sorted(path.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            if _ours(entry):
                if entry.is_dir() and not entry.is_symlink():
                    shutil.rmtree(entry)
                else:
                    entry.unlink()
            elif entry.is_dir() and not any(entry.iterdir()):
                entry.rmdir()
    with contextlib.suppress(OSError):
        path.rmdir()


def _ours(entry: Path) -> bool:
    """Whether an entry of a shared path was made for our node: it names our network, points
    into the run directory, or is a libcni cache file naming a sandbox under the run directory
    (containerd's loopback results, ``cni-loopback-<sandbox>-lo``, which a sandbox torn down by
    ``down`` rather than by the kubelet leaves behind)."""
    if CNI_NETWORK in entry.name:
        return True
    if entry.is_symlink():
        return str(RUN_DIR) in os.readlink(entry)
    if entry.is_file():
        with entry.open("rb") as f:
            return str(RUN_DIR).encode() in f.read(1 << 20)
    return False


def ensure_node_built() -> Path:
    """The kubelet and kube-proxy of the pinned Kubernetes, built into the cache if missing."""
    out = cache_root() / "k8s-node" / f"v{versions()['K8S_VERSION']}" / "bin"
    if not ((out / "kubelet").exists() and (out / "kube-proxy").exists()):
        subprocess.run(["bash", str(HERE / "build.sh"), "node"], check=True)
    return out


def image_cache() -> Path:
    return cache_root() / "k8s-node" / f"v{versions()['K8S_VERSION']}" / "images"


def prerequisites() -> None:
    """Root (the tier changes the host) and the Debian packages."""
    if os.geteuid() != 0:
        raise RuntimeError("the node tier runs containerd and a kubelet: it needs root")
    ensure_packages()
