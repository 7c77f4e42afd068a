"""``make demo``: the operator's main job on the local control plane, start to finish.

Brings the full-tier cluster up (building it on first use), installs the CRD, starts
``lws-operator run`` in the background (webhooks registered by URL, logs in
``.cluster/logs/lws-operator.log``), applies the guide's architecture example (replicas 2, size 4),
waits until every group is Ready, and prints the groups as a tree: LeaderWorkerSet → group →
pods, with node, readiness and revision. ``make cluster-down`` stops everything, operator
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

REPO = Path(__file__).resolve().parents[1]
P = "leaderworkerset.sigs.k8s.io/"
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


def tree(cluster: LocalCluster, name: str) -> str:
    lws = get(cluster, "lws", name, "-n", "default")
    pods = get(cluster, "pods", "-n", "default", "-l", f"{P}name={name}")["items"]
    status = lws.get("status") or {}
    lines = [f"LeaderWorkerSet {name}  (replicas {lws['spec']['replicas']}, size "
             f"{lws['spec']['leaderWorkerTemplate']['size']}; ready {status.get('readyReplicas')},"
             f" updated {status.get('updatedReplicas')})"]
    groups: dict[int, list[dict[str, Any]]] = {}
    for pod in pods:
        groups.setdefault(int(pod["metadata"]["labels"][P + "group-index"]), []).append(pod)
    for index in sorted(groups):
        members = sorted(groups[index],
                         key=lambda p: int(p["metadata"]["labels"][P + "worker-index"]))
        last_group = index == max(groups)
        lines.append(f"{'└' if last_group else '├'}── group {index}")
        for i, pod in enumerate(members):
            ready = any(c["type"] == "Ready" and c["status"] == "True"
                        for c in pod["status"].get("conditions") or [])
            role = "leader" if pod["metadata"]["labels"][P + "worker-index"] == "0" else "worker"
            branch = "└" if i == len(members) - 1 else "├"
            indent = " " if last_group else "│"
            lines.append(
                f"{indent}   {branch}── {pod['metadata']['name']:<28} {role:<6} "
                f"node {pod['spec'].get('nodeName', '-'):<13} "
                f"{'Ready' if ready else 'NotReady':<8} "
                f"revision {pod['metadata']['labels'][P + 'template-revision-hash']}")
    return "\n".join(lines)


def main() -> int:
    cluster = LocalCluster(os.environ.get("CLUSTER_DIR", REPO / ".cluster"))
    took = cluster.up("full", NodeLayout())
    print(f"cluster ready in {took:.1f}s (20 fake GPU/TPU nodes)")
    cluster.install_crd()
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
    print(tree(cluster, name))
    print(f"""
Explore:  export KUBECONFIG={cluster.kubeconfig} PATH={cluster.bin}:$PATH
          kubectl get lws,sts,pods,svc -o wide
          kubectl scale lws {name} --replicas=3
          kubectl patch lws {name} --type=merge -p \\
            '{{"spec":{{"leaderWorkerTemplate":{{"size":2}}}}}}'   # resize: a rolling update
Logs:     {cluster.logs / 'lws-operator.log'}
Stop:     make cluster-down""")
    return 0


if __name__ == "__main__":
    sys.exit(main())
