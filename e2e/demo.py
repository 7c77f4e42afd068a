"""``make demo``: the operator's main job on the local control plane, start to finish.

Brings the full-tier cluster up (building it on first use), installs the CRD, starts
``lws-operator run`` in the background (webhooks registered by URL, logs in
``.cluster/logs/lws-operator.log``), applies the LWS docs' architecture example (replicas 2,
size 4), waits until every group is Ready, and prints the groups as ``kubectl lws tree`` draws
them (the package's ``kubectl-lws`` plugin): LeaderWorkerSet → group → pods, with node,
readiness, revision and restarts. Then a two-role DisaggregatedSet (prefill and decode),
shown as a tree (DisaggregatedSet → role LeaderWorkerSets → groups → pods, and the per-role
Services), and a rollout of it printed step by step: each line one state of the coordinated
rolling update, old|new groups per role. ``make cluster-down`` stops everything, operator
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
    SLICE_LABEL,
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


def tree(cluster: LocalCluster, name: str) -> str:
    """LeaderWorkerSet → groups → pods, as ``kubectl lws tree NAME`` draws it."""
    return plugin(cluster, "tree", name)


def ds_children(cluster: LocalCluster) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = get(cluster, "lws", "-n", "default", "-l",
                                      f"{NAME_LABEL}={DS_NAME}")["items"]
    return [o for o in items if not o["metadata"].get("deletionTimestamp")]


def ds_tree(cluster: LocalCluster) -> str:
    """DisaggregatedSet → its LeaderWorkerSets (slice, revision, role) → groups → pods, then
    the per-role Services."""
    ds = get(cluster, "disaggregatedset", DS_NAME, "-n", "default")
    conditions = {c["type"]: c["status"] for c in (ds.get("status") or {}).get(
        "conditions") or []}
    lines = [f"DisaggregatedSet {DS_NAME}  (roles "
             f"{', '.join(r['name'] for r in ds['spec']['roles'])}; Available "
             f"{conditions.get('Available', '-')})"]
    order = [r["name"] for r in ds["spec"]["roles"]]  # spec order, slice by slice
    children = sorted(ds_children(cluster), key=lambda o: (
        o["metadata"]["labels"][SLICE_LABEL], o["metadata"]["labels"][REVISION_LABEL],
        order.index(o["metadata"]["labels"][ROLE_LABEL])))
    services = get(cluster, "svc", "-n", "default", "-l", f"{NAME_LABEL}={DS_NAME}")["items"]
    for i, lws in enumerate(children):
        labels = lws["metadata"]["labels"]
        last = i == len(children) - 1 and not services
        sub = tree(cluster, lws["metadata"]["name"]).splitlines()
        lines.append(f"{'└' if last else '├'}── role {labels[ROLE_LABEL]} (slice "
                     f"{labels[SLICE_LABEL]}, revision {labels[REVISION_LABEL]}): {sub[0]}")
        lines += [f"{' ' if last else '│'}   {line}" for line in sub[1:]]
    for i, svc in enumerate(sorted(services, key=lambda s: s["metadata"]["name"])):
        lines.append(f"{'└' if i == len(services) - 1 else '├'}── Service "
                     f"{svc['metadata']['name']} (headless, selects role "
                     f"{svc['spec']['selector'].get(ROLE_LABEL)} at revision "
                     f"{svc['spec']['selector'].get(REVISION_LABEL)})")
    return "\n".join(lines)


def ds_state(cluster: LocalCluster, old: str) -> tuple[str, bool]:
    """One line: old|new groups (spec.replicas) per role, and whether the rollout is done
    (only the new revision left, every group ready)."""
    children = ds_children(cluster)
    parts, done = [], bool(children)
    for role, replicas, _ in DS_ROLES:
        mine = [o for o in children if o["metadata"]["labels"][ROLE_LABEL] == role]
        old_n = sum(o["spec"].get("replicas", 1) for o in mine
                    if o["metadata"]["labels"][REVISION_LABEL] == old)
        new = [o for o in mine if o["metadata"]["labels"][REVISION_LABEL] != old]
        new_n = sum(o["spec"].get("replicas", 1) for o in new)
        ready = sum((o.get("status") or {}).get("readyReplicas", 0) for o in new)
        parts.append(f"{role} {old_n}|{new_n} (new ready {ready})")
        done = done and old_n == 0 and not any(
            o["metadata"]["labels"][REVISION_LABEL] == old for o in mine) and ready == replicas
    return "  ".join(parts), done


def ds_demo(cluster: LocalCluster) -> None:
    """The two-role set as a tree, then a rollout of it step by step."""
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

    old = wait_until("the DisaggregatedSet to be Ready", converged, timeout=180)
    print()
    print(ds_tree(cluster))
    print("\nRolling it to vllm/vllm-openai:v2; each line is one state (old|new groups):")
    cluster.kubectl("apply", "-f", "-", stdin=json.dumps(disaggregated("vllm/vllm-openai:v2")))
    last, step, deadline = "", 0, time.monotonic() + 300
    while time.monotonic() < deadline:
        line, done = ds_state(cluster, old)
        if line != last:
            print(f"  step {step:>2}  {line}")
            last, step = line, step + 1
        if done:
            break
        time.sleep(0.3)
    else:
        raise SystemExit("timed out waiting for the rollout")
    print()
    print(ds_tree(cluster))


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
