"""The node tier's container runtime: Debian's containerd 1.6, runc and CNI plugins, and the
images a pod on the real node needs without a registry.

containerd runs as a process of the cluster like every other component, with a configuration of
its own (written into the cluster directory) whose root, state, runc root, CNI configuration,
IP allocations and network namespaces all live under one run directory (see ``node.py``), so
that nothing of it touches the machine's default containerd paths except the shim sockets,
which containerd 1.6 always puts under ``/run/containerd/s``.

Images are made locally: ``pause`` (the sandbox image) is a static C program, ``probe`` a
static Go program (see ``node_images/``); each is packed as a one-layer docker archive and
imported with ``ctr images import``. Both archives are cached under the cache root, keyed by a
hash of their source.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
IMAGES_SRC = HERE / "node_images"
NAMESPACE = "k8s.io"  # the containerd namespace the CRI plugin uses
PAUSE_IMAGE = "lws-operator.local/pause:1"
PROBE_IMAGE = "lws-operator.local/probe:1"
CNI_NETWORK = "lws-node"
CNI_BIN_DIR = Path("/usr/lib/cni")  # where Debian's containernetworking-plugins installs them

# What the tier needs from the machine: the Debian package that brings each file. Installed by
# ``ensure_packages`` only where the file is missing (apt-get, so root).
PACKAGES = {
    "containerd": Path("/usr/bin/containerd"),
    "runc": Path("/usr/sbin/runc"),
    "containernetworking-plugins": CNI_BIN_DIR / "bridge",
    "iptables": Path("/usr/sbin/iptables"),
    "conntrack": Path("/usr/sbin/conntrack"),
    "nftables": Path("/usr/sbin/nft"),  # to delete the iptables tables the tier created
}


def ensure_packages() -> list[str]:
    """Install the Debian packages whose files are missing; returns the packages installed."""
    missing = [pkg for pkg, path in PACKAGES.items() if not path.exists()]
    if not missing:
        return []
    if shutil.which("apt-get") is None:
        raise RuntimeError(f"the node tier needs the packages {missing} (no apt-get here)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    lock = ["-o", "DPkg::Lock::Timeout=600"]
    install = ["apt-get", *lock, "install", "-y", "-q", "--no-install-recommends", *missing]
    if subprocess.run(install, env=env, check=False).returncode != 0:
        subprocess.run(["apt-get", *lock, "update", "-q"], env=env, check=True)
        subprocess.run(install, env=env, check=True)
    return missing


@dataclass(frozen=True)
class Runtime:
    """Where one containerd keeps everything (all under ``run``) and its configuration file."""

    run: Path
    config: Path

    @property
    def socket(self) -> Path:
        return self.run / "containerd.sock"

    @property
    def endpoint(self) -> str:
        return f"unix://{self.socket}"

    @property
    def cni_conf_dir(self) -> Path:
        return self.run / "cni"

    def write_config(self, subnet: str, gateway: str, bridge: str) -> None:
        """containerd's TOML and the CNI network (a bridge with host-local addresses)."""
        run = self.run
        for sub in ("root", "state", "runc", "opt", "cni", "ipam"):
            (run / sub).mkdir(parents=True, exist_ok=True)
        cri = 'plugins."io.containerd.grpc.v1.cri"'
        self.config.write_text(f"""version = 2
root = "{run / 'root'}"
state = "{run / 'state'}"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{self.socket}"

[plugins."io.containerd.internal.v1.opt"]
  path = "{run / 'opt'}"

[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  # No CAP_SYS_RESOURCE in the VMs this runs in: never ask for a lower oom_score_adj than ours.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_apparmor = true

[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{self.cni_conf_dir}"
  max_conf_num = 1

[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"

[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

[{cri}.containerd.runtimes.runc.options]
  BinaryName = "{PACKAGES['runc']}"
  Root = "{run / 'runc'}"
  SystemdCgroup = false
""")
        network = {
            "cniVersion": "1.0.0",
            "name": CNI_NETWORK,
            "plugins": [
                {
                    "type": "bridge",
                    "bridge": bridge,
                    "isGateway": True,
                    # Pods talk to the host and to each other only: no masquerading rules.
                    "ipMasq": False,
                    "hairpinMode": True,
                    "ipam": {
                        "type": "host-local",
                        "ranges": [[{"subnet": subnet, "gateway": gateway}]],
                        "routes": [{"dst": "0.0.0.0/0"}],
                        "dataDir": str(run / "ipam"),
                    },
                },
                {"type": "loopback"},
            ],
        }
        (self.cni_conf_dir / f"10-{CNI_NETWORK}.conflist").write_text(
            json.dumps(network, indent=2) + "\n")

    def ctr(self, *args: str, check: bool = True) -> str:
        proc = subprocess.run(
            ["ctr", "--address", str(self.socket), "--namespace", NAMESPACE, *args],
            capture_output=True, text=True, check=False,
        )
        if check and proc.returncode != 0:
            raise RuntimeError(f"ctr {' '.join(args)} failed: {proc.stderr.strip()}")
        return proc.stdout

    def import_image(self, archive: Path) -> None:
        """Import a docker or OCI archive (``podman save``, ``docker save``) and unpack it for the
        CRI plugin; the kubelet then finds its tags without pulling."""
        self.ctr("images", "import", "--no-unpack=false", str(archive))

    def images(self) -> list[str]:
        return [line.split()[0] for line in self.ctr("images", "ls", "-q").splitlines() if line]


# ------------------------------------------------------------------------------------- images


def _layer(files: dict[str, tuple[bytes, int]]) -> bytes:
    """A reproducible tar of ``files`` (path -> content, mode), parents included."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for path in sorted(files):
            parts = path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type, info.mode = tarfile.DIRTYPE, 0o755
                    tar.addfile(info)
            data, mode = files[path]
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def docker_archive(out: Path, name: str, files: dict[str, tuple[bytes, int]],
                   entrypoint: list[str]) -> Path:
    """Write a one-layer image as a ``docker save`` archive tagged ``name``."""
    layer = _layer(files)
    diff_id = hashlib.sha256(layer).hexdigest()
    config = json.dumps({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Entrypoint": entrypoint, "Env": ["PATH=/"], "User": "65532:65532"},
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created_by": "e2e/cluster/containerd.py"}],
    }, sort_keys=True).encode()
    config_name = f"{hashlib.sha256(config).hexdigest()}.json"
    manifest = json.dumps([{"Config": config_name, "RepoTags": [name],
                            "Layers": [f"{diff_id}/layer.tar"]}]).encode()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    with tarfile.open(tmp, mode="w") as tar:
        for path, data in ((config_name, config), (f"{diff_id}/layer.tar", layer),
                           ("manifest.json", manifest)):
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    tmp.replace(out)
    return out


def _source_key(*paths: Path) -> str:
    digest = hashlib.sha256()
    for path in paths:
        digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def build_images(cache: Path) -> dict[str, Path]:
    """The pause and probe image archives, built into ``cache`` unless already there."""
    pause_src, probe_src = IMAGES_SRC / "pause.c", IMAGES_SRC / "probe.go"
    pause = cache / f"pause-{_source_key(pause_src)}.tar"
    probe = cache / f"probe-{_source_key(probe_src)}.tar"
    with tempfile.TemporaryDirectory() as tmp:
        if not pause.exists():
            binary = Path(tmp) / "pause"
            subprocess.run(["gcc", "-static", "-Os", "-s", "-o", str(binary), str(pause_src)],
                           check=True)
            docker_archive(pause, PAUSE_IMAGE, {"pause": (binary.read_bytes(), 0o755)},
                           ["/pause"])
        if not probe.exists():
            binary = Path(tmp) / "probe"
            env = {**os.environ, "CGO_ENABLED": "0", "GOFLAGS": "-buildvcs=false"}
            subprocess.run(["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(binary),
                            str(probe_src)], check=True, env=env, cwd=tmp)
            docker_archive(probe, PROBE_IMAGE, {"probe": (binary.read_bytes(), 0o755)},
                           ["/probe"])
    return {PAUSE_IMAGE: pause, PROBE_IMAGE: probe}
