"""The local clusters of a test session, one per tier, started on first use.

The ``clusters``, ``cluster``, ``kube`` and ``namespace`` fixtures in ``conftest.py`` hand these
out; tests that type a fixture or need the repository root import them from here, never from
``conftest``.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TextIO

from e2e.cluster import LocalCluster, NodeLayout

REPO = Path(__file__).resolve().parents[2]
VOLCANO_CRDS = REPO / "e2e" / "cluster" / "volcano-crds.yaml"


@contextlib.contextmanager
def private_cluster(name: str, tier: str, layout: NodeLayout | None = None, *, timeout: float = 180,
                apiserver_flags: Sequence[str] = (), crd: bool = False) -> Iterator[LocalCluster]:
    """A cluster of a test module's own in ``.cluster/<name>-<pid>`` (for faults that must not
    leave marks on the session's shared clusters: API server restarts, a compacted etcd, flags
    of its own), with the committed CRD installed when ``crd``; stopped and removed after."""
    directory = REPO / ".cluster" / f"{name}-{os.getpid()}"
    cluster = LocalCluster(directory)
    cluster.up(tier, layout or NodeLayout(), timeout=timeout, apiserver_flags=apiserver_flags)
    try:
        if crd:
            cluster.install_crd()
        yield cluster
    finally:
        cluster.down()
        shutil.rmtree(directory, ignore_errors=True)


class Clusters:
    """Starts each tier's cluster on first use and stops all of them at session end.

    A session holds an exclusive lock on each cluster directory it uses, so a second pytest
    session running at the same time (two developers, or an IDE) takes a directory of its own
    instead of tearing down the first one's cluster under it.
    """

    def __init__(self) -> None:
        self.started: dict[str, LocalCluster] = {}
        self.locks: list[TextIO] = []
        self.external = os.environ.get("LWS_E2E_KUBECONFIG")

    def _directory(self, tier: str) -> Path:
        root = REPO / ".cluster"
        root.mkdir(exist_ok=True)
        for candidate in [f"test-{tier}", *(f"test-{tier}-{os.getpid()}-{i}" for i in range(9))]:
            lock = (root / f"{candidate}.lock").open("w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            self.locks.append(lock)
            return root / candidate
        raise RuntimeError(f"no free cluster directory for tier {tier}")

    def get(self, tier: str) -> LocalCluster:
        if self.external:
            return LocalCluster.external(Path(self.external))
        if tier not in self.started:
            directory = self._directory(tier)
            cluster = LocalCluster(directory)
            cluster.up(tier, NodeLayout(), timeout=180)  # stops what it started on failure
            self.started[tier] = cluster
        return self.started[tier]

    def stop(self) -> None:
        keep = os.environ.get("LWS_KEEP_CLUSTER") == "1"
        for cluster in self.started.values():
            if not keep or cluster.dir.name.count("-") > 1:  # private directories never stay
                cluster.down()
        for lock in self.locks:
            lock.close()


def install_volcano_crd(cluster: LocalCluster, timeout: float = 60.0) -> None:
    """Volcano's PodGroup CRD (no Volcano scheduler), Established and discoverable."""
    cluster.kubectl("apply", "--server-side", "--field-manager=lws-operator-tests", "-f",
                    str(VOLCANO_CRDS))
    deadline = time.monotonic() + timeout
    while True:
        out = cluster.kubectl("get", "crd", "podgroups.scheduling.volcano.sh", "-o",
                              "jsonpath={.status.conditions}")
        established = any(c["type"] == "Established" and c["status"] == "True"
                          for c in (json.loads(out) if out.strip() else None) or [])
        # The operator finds the API by discovery, which may lag behind Established.
        if established and '"podgroups"' in cluster.kubectl(
                "get", "--raw", "/apis/scheduling.volcano.sh/v1beta1", check=False):
            return
        if time.monotonic() > deadline:
            raise TimeoutError("the volcano PodGroup CRD is not Established")
        time.sleep(0.5)
