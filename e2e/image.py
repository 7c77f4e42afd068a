"""The operator image as tests use it: built by ``hack/image.sh`` (``make image``), run with podman.

``build()`` returns the image of the current tree (a no-op when it exists already: the tag is a
hash of the build's inputs), ``latest()`` the last one built on this machine without building.
Every podman call goes through ``podman()``, which uses the containers.conf that
``hack/image-host.sh`` writes into the cache (runc, explicit ulimits), never the host's own.
The cache and podman's storage belong to the machine: ``latest()`` is the last image built
from any work tree.

An ``Image`` carries its podman reference and a docker-archive of it, which a containerd node
imports (``ctr images import``), and the chart values that run it without a registry.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from e2e.cluster.launcher import cache_root

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "hack" / "image.sh"


def image_cache() -> Path:
    return cache_root() / "image"


@dataclass(frozen=True)
class Image:
    reference: str  # repository:tag, as podman and a containerd node name it
    repository: str
    tag: str
    archive: Path  # docker-archive (podman save) of the image
    base: str  # the image given as the Dockerfile's PYTHON_IMAGE
    base_kind: str  # "local" (made by hack/image.sh) or "default" (the Dockerfile's own)
    size: int  # bytes, as podman reports it

    @classmethod
    def from_info(cls, data: dict[str, Any]) -> Image:
        return cls(reference=data["reference"], repository=data["repository"], tag=data["tag"],
                   archive=Path(data["archive"]), base=data["base"],
                   base_kind=data["base_kind"], size=int(data["size"]))

    def helm_values(self) -> dict[str, Any]:
        """The chart's image values for this image: it is never pulled, the node has it."""
        return {"image": {"repository": self.repository, "tag": self.tag, "pullPolicy": "Never"}}

    def helm_set_args(self) -> list[str]:
        """``helm_values`` as ``--set`` arguments."""
        image = self.helm_values()["image"]
        return [arg for key, value in image.items() for arg in ("--set", f"image.{key}={value}")]


def build(variant: str = "", base: str | None = None, timeout: float = 1800) -> Image:
    """The image of this tree, built if it does not exist yet (see ``hack/image.sh``).

    ``variant`` makes a distinct image (another tag) of the same tree, for a test that upgrades
    from one image to another; ``base`` is ``"local"`` or ``"default"`` to force the base.
    """
    env = {**os.environ, "LWS_IMAGE_VARIANT": variant}
    if base is not None:
        env["LWS_IMAGE_BASE"] = base
    proc = subprocess.run(["bash", str(SCRIPT)], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"hack/image.sh failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return Image.from_info(json.loads(proc.stdout.strip().splitlines()[-1]))


def latest() -> Image | None:
    """The image ``hack/image.sh`` built or found last on this machine, if it is still in
    podman's storage."""
    path = image_cache() / "latest.json"
    if not path.exists():
        return None
    image = Image.from_info(json.loads(path.read_text()))
    if podman("image", "exists", image.reference, check=False).returncode != 0:
        return None
    return image


def info(image: Image | str) -> dict[str, Any]:
    """``podman image inspect`` of the image (its Config: User, Entrypoint, Env, Labels...)."""
    reference = image.reference if isinstance(image, Image) else image
    data: list[dict[str, Any]] = json.loads(podman("image", "inspect", reference).stdout)
    return data[0]


def podman(*args: str, check: bool = True, timeout: float | None = 600,
           input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run podman with the project's containers.conf; stdout and stderr captured as text."""
    conf = image_cache() / "containers.conf"
    env = dict(os.environ)
    if conf.exists():
        env["CONTAINERS_CONF"] = str(conf)
    proc = subprocess.run(["podman", *args], env=env, capture_output=True, text=True,
                          timeout=timeout, input=input, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(f"podman {' '.join(args)} failed ({proc.returncode}): "
                           f"{proc.stderr.strip()[-2000:]}")
    return proc
