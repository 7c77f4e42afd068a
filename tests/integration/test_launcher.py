"""`up` and `down` of the local control plane are idempotent and touch only their own processes."""

from __future__ import annotations

import os
from pathlib import Path

from e2e.cluster import LocalCluster


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A reaped-late child of this process shows as a zombie: not running any more.
    status = Path(f"/proc/{pid}/status").read_text()
    return "\nState:\tZ" not in status


def test_up_and_down_are_idempotent(tmp_path: Path) -> None:
    cluster = LocalCluster(tmp_path / "cluster")
    cluster.down()  # nothing started yet: a no-op
    cluster.up("api")
    pids = {p.stem: int(p.read_text()) for p in cluster.pids.glob("*.pid")}
    assert set(pids) == {"etcd", "kube-apiserver"}
    assert "v1.37.2" in cluster.kubectl("version", "-o", "json")

    cluster.up("api")  # healthy: reused, not restarted
    assert {p.stem: int(p.read_text()) for p in cluster.pids.glob("*.pid")} == pids

    # A stale pid file naming some other live process must not make `down` kill it.
    (cluster.pids / "kwok.pid").write_text(f"{os.getpid()}\n")
    cluster.down()
    cluster.down()
    assert not any(_alive(pid) for pid in pids.values())
    assert _alive(os.getpid())
    assert not list(cluster.pids.glob("*.pid"))
