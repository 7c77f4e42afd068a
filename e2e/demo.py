"""``make demo``: the operator's main job on the local control plane, start to finish.

Brings the full-tier cluster up (building it on first use), installs the CRD, starts
``lws-operator run`` in the background (webhooks registered by URL, logs in
``.cluster/logs/lws-operator.log``), applies the LWS docs' architecture example (replicas 2,
size 4), waits until every group is Ready, and prints the groups as ``kubectl lws tree`` draws
them (the package's ``kubectl-lws`` plugin): LeaderWorkerSet → group → pods, with node,
readiness, revision and restarts. Then a two-role DisaggregatedSet (prefill and decode),
shown by the plugin as a tree (DisaggregatedSet → role LeaderWorkerSets → groups → pods, and
the per-role Services), the coordinated rollout a new image would take (``kubectl lws plan``),
and that rollout followed by ``kubectl lws rollout status``: each role's groups and each step,
old|new groups per role, as it happens. ``make cluster-down`` stops everything, operator
included.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from e2e.cluster import LocalCluster, NodeLayout
from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.disaggregated import (
    CRD_FILES,
    NAME_LABEL,
    REVISION_LABEL,
    ROLE_LABEL,
    install_crds,
)

REPO = Path(__file__).resolve().parents[1]
PLUGIN = Path(sys.executable).parent / "kubectl-lws"
SAMPLE: dict[str, Any] = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "metadata": {"name": "leaderworkerset-sample", "namespace": "default"},
    "spec": {
        "replicas": 2,
        "leaderWorkerTemplate": {
            "size": 4,
            "workerTemplate": {"spec": {"containers": [{
                "name": "vllm", "image": "vllm/vllm-openai:latest",
                "resources": {"limits": {"nvidia.com/gpu": "8"}},
            }]}},
        },
    },
}

DS_NAME = "disaggregated-sample"
DS_ROLES = (("prefill", 2, 2), ("decode", 2, 1))  # name, replicas, size


def disaggregated(image: str) -> dict[str, Any]:
    """A two-role DisaggregatedSet; its pods turn Ready 2 s after they start (kwok), so each
    step of a rollout is visible."""
    return {
        "apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
        "metadata": {"name": DS_NAME, "namespace": "default"},
        "spec": {"roles": [{
            "name": role,
            "spec": {"replicas": replicas, "leaderWorkerTemplate": {
                "size": size,
                "workerTemplate": {
                    "metadata": {"annotations": {READY_DELAY_ANNOTATION: "2s"}},
                    "spec": {"containers": [{"name": "vllm", "image": image}]}}}},
        } for role, replicas, size in DS_ROLES]},
    }


def start_operator(cluster: LocalCluster) -> None:
    """Start ``lws-operator run`` detached, recorded in the cluster's pid files so that
    ``make cluster-down`` stops it with the rest."""
    if cluster.running("lws-operator"):
        return
    cluster.kubectl("create", "namespace", "lws-system", check=False)
    log = (cluster.logs / "lws-operator.log").open("ab")
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "lws-operator"), "run",
         "--kubeconfig", str(cluster.kubeconfig), "--namespace", "lws-system",
         "--webhook-host", "127.0.0.1", "--webhook-port", "9443", "--health-port", "8081",
         "--metrics-bind-address", "127.0.0.1:8080", "--metrics-secure=false",
         "--log-format", "text"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    log.close()
    (cluster.pids / "lws-operator.pid").write_text(f"{proc.pid}\n")


def wait_until(what: str, probe: Any, timeout: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.5)


def get(cluster: LocalCluster, *args: str) -> Any:
    return json.loads(cluster.kubectl("get", *args, "-o", "json"))


def plugin(cluster: LocalCluster, *args: str, capture: bool = True) -> str:
    """Run ``kubectl lws ARGS`` (the package's ``kubectl-lws`` script) against the demo
    cluster's ``default`` namespace; its output, or printed straight to the terminal (so it is
    coloured there) with ``capture=False``."""
    command = [str(PLUGIN), "--kubeconfig", str(cluster.kubeconfig), "-n", "default", *args]
    if not capture:
        sys.stdout.flush()
        subprocess.run(command, check=True)
        return ""
    return subprocess.run(command, check=True, capture_output=True,
                          text=True).stdout.rstrip("\n")


def ds_children(cluster: LocalCluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(cluster, "lws", "-n", "default", "-l",
                                      f"{NAME_LABEL}={DS_NAME}")["items"]
    return [o for o in items if not o["metadata"].get("deletionTimestamp")]


def ds_demo(cluster: LocalCluster) -> None:
    """The two-role set as the plugin draws it, the rollout a new image would take (``kubectl
    lws plan``), then that rollout followed by ``kubectl lws rollout status``, step by step."""
    body = disaggregated("vllm/vllm-openai:v1")
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(body))

    def converged() -> str | None:
        children = ds_children(cluster)
        revisions = {o["metadata"]["labels"][REVISION_LABEL] for o in children}
        ready = {o["metadata"]["labels"][ROLE_LABEL]: (o.get("status") or {}).get(
            "readyReplicas", 0) for o in children}
        if len(revisions) == 1 and ready == {r: n for r, n, _ in DS_ROLES}:
            return revisions.pop()
        return None

    wait_until("the DisaggregatedSet to be Ready", converged, timeout=180)
    print()
    plugin(cluster, "tree", DS_NAME, capture=False)
    print("\nThe rollout a new image would take (kubectl lws plan, nothing written):")
    plugin(cluster, "plan", DS_NAME, "--set-image", "vllm=vllm/vllm-openai:v2", capture=False)
    print("\nRolling it to vllm/vllm-openai:v2 (kubectl lws rollout status):")
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(disaggregated("vllm/vllm-openai:v2")))
    plugin(cluster, "rollout", "status", DS_NAME, "--timeout=5m", capture=False)
    print()
    plugin(cluster, "tree", DS_NAME, capture=False)


def main() -> int:
    cluster = LocalCluster(os.environ.get("CLUSTER_DIR", REPO / ".cluster"))
    took = cluster.up("full", NodeLayout())
    print(f"cluster ready in {took:.1f}s (20 fake GPU/TPU nodes)")
    cluster.install_crd()
    if CRD_FILES:  # before the operator starts, so it watches DisaggregatedSets from its start
        install_crds(cluster)
    start_operator(cluster)
    wait_until("the operator's webhooks", lambda: cluster.kubectl(
        "get", "mutatingwebhookconfiguration", "lws-mutating-webhook-configuration",
        "--ignore-not-found", "-o", "name").strip())
    applied = wait_until("the sample to be admitted", lambda: subprocess.run(
        [str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.kubeconfig), "apply", "-f", "-"],
        input=json.dumps(SAMPLE), text=True, capture_output=True).returncode == 0)
    assert applied
    name = SAMPLE["metadata"]["name"]
    wait_until("every group to be Ready", lambda: (
        get(cluster, "lws", name, "-n", "default").get("status") or {}).get("readyReplicas") == 2)
    print()
    plugin(cluster, "tree", name, capture=False)
    if CRD_FILES:
        ds_demo(cluster)
    print(f"""
Explore:  export KUBECONFIG={cluster.kubeconfig} PATH={cluster.bin}:{PLUGIN.parent}:$PATH
          kubectl lws tree {name} --watch               # the plugin: groups as a tree
          kubectl lws tree {DS_NAME}                         # a DisaggregatedSet: its roles
          kubectl lws rollout status {name}             # wait for a rollout, like kubectl's
          kubectl lws plan {name} --set-image vllm=vllm/vllm-openai:v2   # a dry run
          kubectl get lws,sts,pods,svc -o wide
          kubectl get disaggregatedsets,lws,pods,svc
          kubectl scale lws {name} --replicas=3
          kubectl patch lws {name} --type=merge -p \\
            '{{"spec":{{"leaderWorkerTemplate":{{"size":2}}}}}}'   # resize: a rolling update
Logs:     {cluster.logs / 'lws-operator.log'}
Stop:     make cluster-down""")
    return 0


if __name__ == "__main__":
    sys.exit(main())
