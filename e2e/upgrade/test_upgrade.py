"""Upgrading the operator never touches a running workload (docs/architecture.md: "No hidden
memory").

The previous release (``PREVIOUS``, the last commit that landed before this work) runs as
``lws-operator run`` from a virtualenv of its own and brings several LeaderWorkerSets to Ready:
sizes 1 and > 1, a subgroup policy, exclusive placement, ordinal group identity (the default).
It is stopped and the current code started in its place, with the same namespace, certificate
Secret and webhook registrations, as a rolling Deployment update would. After the new operator
has reconciled every LeaderWorkerSet several times (its own reconcile counter shows it) and a
quiet period more, every pod is the same incarnation with the same restart counts, every
StatefulSet has the same generation, template revision and spec, and the new operator sent no
write for a StatefulSet, pod or Service.

The old code comes from this repository's history with ``git archive`` (no worktree is
registered in the shared repository) and is installed into a virtualenv cached per commit under
``~/.cache/lws-operator``, so only the first run pays for the install.
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import shutil
import subprocess
import sys
import urllib.request
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from e2e.cluster import LocalCluster
from e2e.cluster.launcher import cache_root, free_port
from e2e.cluster.nodes import RACK_LABEL
from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.clusters import REPO, Clusters
from e2e.harness.launcher import OperatorProcess
from e2e.harness.metrics import WRITE_VERBS
from e2e.kube import MERGE_PATCH, Kube, condition, is_ready, wait_for

pytestmark = pytest.mark.full

PREVIOUS = "8a7f47e"


def previous_release(commit: str = PREVIOUS) -> Path:
    """The ``lws-operator`` executable of ``commit``, installed on first use."""
    found = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--verify", "--quiet",
                            f"{commit}^{{commit}}"], capture_output=True, text=True)
    if found.returncode != 0:
        pytest.skip(f"commit {commit} is not in this clone's history (a shallow clone?)")
    full = found.stdout.strip()
    root = cache_root() / f"release-{full[:12]}"
    exe = root / "venv" / "bin" / "lws-operator"
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two sessions installing at once
        if (root / "venv" / ".installed").exists():
            return exe
        shutil.rmtree(root / "src", ignore_errors=True)
        shutil.rmtree(root / "venv", ignore_errors=True)
        (root / "src").mkdir()
        archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", full],
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(root / "src")], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "venv", str(root / "venv")], check=True)
        subprocess.run([str(root / "venv" / "bin" / "pip"), "install", "--quiet",
                        str(root / "src")], check=True)
        (root / "venv" / ".installed").touch()
    return exe


def workloads() -> list[dict[str, Any]]:
    def lws(name: str, replicas: int, size: int, annotations: dict[str, str] | None = None,
            **template: Any) -> dict[str, Any]:
        return (LeaderWorkerSet(name).annotations(annotations or {}).replicas(replicas)
                .size(size).template(**template).image("serve:1", name="main").build())

    return [
        lws("single", 2, 1),
        lws("groups", 2, 3, leaderTemplate={"spec": {"containers": [
            {"name": "leader", "image": "serve:1"}]}}),
        lws("subgroups", 1, 4, subGroupPolicy={"subGroupSize": 2}),
        lws("exclusive", 2, 2, annotations={P + "exclusive-topology": RACK_LABEL}),
    ]


async def all_ready(kube: Kube, namespace: str, bodies: list[dict[str, Any]]) -> bool:
    for body in bodies:
        name, spec = body["metadata"]["name"], body["spec"]
        lws = await kube.get(API, KIND, name, namespace)
        pods = await kube.list("v1", "Pod", namespace, label_selector=f"{P}name={name}")
        expected = spec["replicas"] * spec["leaderWorkerTemplate"]["size"]
        if (condition(lws, "Available") != "True" or len(pods) != expected
                or not all(is_ready(p) for p in pods)):
            return False
    return True


async def snapshot(kube: Kube, namespace: str) -> dict[str, Any]:
    """What a restart or rollout would change: pod incarnations and restarts, StatefulSet
    incarnations, generations, revision labels and specs."""
    pods = await kube.list("v1", "Pod", namespace)
    sets = await kube.list("apps/v1", "StatefulSet", namespace)
    return {
        "pods": {p["metadata"]["name"]: (
            p["metadata"]["uid"], bool(p["metadata"].get("deletionTimestamp")),
            sum(int(s.get("restartCount") or 0)
                for s in (p.get("status") or {}).get("containerStatuses") or []))
            for p in pods},
        "statefulsets": {s["metadata"]["name"]: (
            s["metadata"]["uid"], s["metadata"]["generation"],
            (s["metadata"].get("labels") or {}).get(P + "template-revision-hash"),
            json.dumps(s["spec"], sort_keys=True))
            for s in sets},
    }


def scrape(port: int) -> dict[str, list[tuple[dict[str, str], float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, []).append((sample.labels, sample.value))
    return out


def reconciles(metrics: dict[str, list[tuple[dict[str, str], float]]]) -> float:
    return sum(v for labels, v in metrics.get("controller_runtime_reconcile_total", [])
               if labels.get("controller") == "leaderworkerset")


def writes(metrics: dict[str, list[tuple[dict[str, str], float]]]) -> dict[str, float]:
    """The operator's write requests by "verb resource"."""
    out: dict[str, float] = {}
    for labels, value in metrics.get("lws_operator_api_requests_total", []):
        if labels["verb"] in WRITE_VERBS and value:
            key = f"{labels['verb']} {labels['resource']}"
            out[key] = out.get(key, 0.0) + value
    return out


@pytest_asyncio.fixture(loop_scope="session")
async def cluster_and_kube(clusters: Clusters) -> AsyncIterator[tuple[LocalCluster, Kube]]:
    cluster = clusters.get("full")
    cluster.install_crd()
    kube = await Kube.connect(str(cluster.kubeconfig))
    yield cluster, kube
    await kube.close()


async def test_upgrade_from_previous_release_leaves_workloads_alone(
        cluster_and_kube: tuple[LocalCluster, Kube], tmp_path: Path) -> None:
    cluster, kube = cluster_and_kube
    old_exe = await asyncio.to_thread(previous_release)
    run_id = uuid.uuid4().hex[:8]
    namespace = f"t-{run_id}"
    old = OperatorProcess.local(str(cluster.kubeconfig), run_id, tmp_path / "old.log",
                          executable=old_exe)
    metrics_port = free_port()
    new = OperatorProcess.local(str(cluster.kubeconfig), run_id, tmp_path / "new.log",
                          extra_args=["--metrics-bind-address", f"127.0.0.1:{metrics_port}",
                                      "--metrics-secure=false"])
    for ns in (namespace, old.namespace):
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    bodies = workloads()
    try:
        await old.start()
        for body in bodies:
            await kube.create(body, namespace)
        await wait_for(lambda: all_ready(kube, namespace, bodies), timeout=120, interval=1.0,
                       what="every workload Ready under the previous release")
        before = await snapshot(kube, namespace)
        assert await old.stop() == 0, old.log_tail()

        await new.start()

        async def passes_at_least(count: int) -> float:
            done = reconciles(await asyncio.to_thread(scrape, metrics_port))
            return done if done >= count else 0.0

        # The start enqueues every LeaderWorkerSet once; an annotation on each leader pod
        # (what monitoring agents and users add all the time) wakes each one again. Not on the
        # LeaderWorkerSet: its annotations are copied to the leader StatefulSet, a real change.
        first = await wait_for(lambda: passes_at_least(len(bodies)), timeout=60,
                               what="a pass over every LeaderWorkerSet")
        leaders = await kube.list("v1", "Pod", namespace, label_selector=f"{P}worker-index=0")
        for leader in leaders:
            await kube.patch("v1", "Pod", leader["metadata"]["name"],
                             {"metadata": {"annotations": {"example.com/touched": run_id}}},
                             namespace, content_type=MERGE_PATCH)
        await wait_for(lambda: passes_at_least(int(first) + len(bodies)), timeout=60,
                       what="a second pass over every LeaderWorkerSet")
        await asyncio.sleep(10)  # quiet period: late writes or restarts would show by now
        after = await snapshot(kube, namespace)
        metrics = await asyncio.to_thread(scrape, metrics_port)
    finally:
        await old.stop()
        await new.stop()
        for body in bodies:
            await kube.delete(API, KIND, body["metadata"]["name"], namespace)
        await kube.delete("v1", "Namespace", namespace)
        await kube.delete("v1", "Namespace", old.namespace)

    assert after["pods"] == before["pods"]
    assert after["statefulsets"] == before["statefulsets"]
    workload_writes = {k: v for k, v in writes(metrics).items()
                       if k.partition(" ")[2].split("/")[0] in ("statefulsets", "pods",
                                                                 "services")}
    assert workload_writes == {}, writes(metrics)
    assert reconciles(metrics) >= 2 * len(bodies)
