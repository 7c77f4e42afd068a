"""The object builders run over objects exactly as the running operator holds them.

Each case walks the path production walks (``tests/harness/as_operated.py``): the LeaderWorkerSet as
stored and cached; its revision; the leader StatefulSet (or Deployment) built from it; the leader
pod that object creates, defaulted, admitted by our webhook, scheduled and Ready, then passed
through the pod cache's real store; the worker StatefulSet built from *that* cached leader; its
pods admitted in turn. The outputs a user sees are asserted exactly: the worker template's
annotations and every container's environment on every pod.

The expected environments are written out from upstream's code and the LWS docs (the leader is TPU
worker 0 when it holds TPUs, its host name first), not computed by ``logic.mutation.tpu``. Before
the fix, the cached leader had no containers, so the TPU cases got no ``leader-requests-tpus`` and
workers 0..size-2 without the leader's host (found running upstream's samples).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import pytest

from lws_operator.logic.hash_mode.hash_groups import leader_deployment
from lws_operator.logic.identity.revision import apply_revision
from lws_operator.logic.identity.revision_decision import decide_revision
from lws_operator.logic.workloads.statefulsets import leader_statefulset, worker_statefulset
from tests.harness.as_operated import NAMESPACE, cached, created_pod, env_of, running, stored_lws

P = "leaderworkerset.sigs.k8s.io/"
TPU = {"limits": {"google.com/tpu": 4}, "requests": {"google.com/tpu": 4}}
CPU = {"limits": {"cpu": "1"}}

# upstream's sample leaderworkerset_tpu.yaml, spec and labels as shipped.
TPU_SAMPLE: dict[str, Any] = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
    "metadata": {"labels": {"app.kubernetes.io/name": "leaderworkerset"}},
    "spec": {"replicas": 3, "leaderWorkerTemplate": {"size": 4, "workerTemplate": {"spec": {
        "nodeSelector": {"cloud.google.com/gke-tpu-topology": "4x4",
                         "cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice"},
        "containers": [{"name": "nginx", "image": "nginxinc/nginx-unprivileged:1.27",
                        "resources": TPU, "ports": [{"containerPort": 8080}]}]}}}},
}


def _variant(size: int = 4, leader: dict[str, Any] | None = None,
             worker: dict[str, Any] | None = None, **spec: Any) -> dict[str, Any]:
    out = copy.deepcopy(TPU_SAMPLE)
    lwt = out["spec"]["leaderWorkerTemplate"]
    lwt["size"] = size
    if worker is not None:
        lwt["workerTemplate"]["spec"]["containers"][0]["resources"] = worker
    if leader is not None:
        lwt["leaderTemplate"] = {"spec": {"containers": [
            {"name": "leader", "image": "coordinator:1", "resources": leader}]}}
    for key, value in spec.items():
        if key == "subGroupPolicy":
            lwt[key] = value
        else:
            out["spec"][key] = value
    return out


@dataclass
class Group:
    worker_template_annotations: dict[str, str]
    pods: dict[str, dict[str, Any]]  # by pod name, leader first
    built_from_full_leader: dict[str, Any]
    built_from_cached_leader: dict[str, Any]


def run_group(manifest: dict[str, Any], group: int = 0, hashed: bool = False) -> Group:
    """One group created the way the operator creates it, every input read from the cache."""
    full_lws = stored_lws(manifest)
    lws = cached("LeaderWorkerSet", full_lws)
    decision = decide_revision(lws, None, [])
    assert decision.create is not None
    revision = cached("ControllerRevision", {
        **decision.create, "metadata": {**decision.create["metadata"], "uid": "rev-uid"}})
    key = decision.current_key
    if hashed:
        owner = leader_deployment(lws, key)
        assert owner == leader_deployment(full_lws, key)
        leader_full = created_pod(owner["spec"]["template"], f"sample-7c9d8b6f5-x{group}k2p",
                                  owner=owner, service_name=None, uid=f"leader-{group}",
                                  random_key=f"{group:08x}" + "e" * 32)
    else:
        owner = leader_statefulset(lws, key, 0, int(lws["spec"]["replicas"]))
        assert owner == leader_statefulset(full_lws, key, 0, int(lws["spec"]["replicas"]))
        leader_full = created_pod(owner["spec"]["template"], f"sample-{group}", owner=owner,
                                  service_name=owner["spec"]["serviceName"],
                                  uid=f"leader-{group}")
    leader_full = running(leader_full)
    leader = cached("Pod", leader_full)
    revision_lws = apply_revision(lws, dict(revision["data"]))
    sts = worker_statefulset(revision_lws, lws, leader, None)
    pods = {leader_full["metadata"]["name"]: leader_full}
    for ordinal in range(1, int(sts["spec"]["replicas"]) + 1):
        name = f"{sts['metadata']['name']}-{ordinal}"
        pods[name] = running(created_pod(sts["spec"]["template"], name, owner=sts,
                                         service_name=sts["spec"]["serviceName"],
                                         uid=f"worker-{group}-{ordinal}"))
    return Group(dict(sts["spec"]["template"]["metadata"]["annotations"]), pods,
                 worker_statefulset(revision_lws, lws, leader_full, None), sts)


def lws_env(host: str, subdomain: str, size: int, worker: int) -> list[tuple[str, str]]:
    """Upstream's AddLWSVariables: the three LWS variables, first, in this order."""
    return [("LWS_LEADER_ADDRESS", f"{host}.{subdomain}.{NAMESPACE}"),
            ("LWS_GROUP_SIZE", str(size)), ("LWS_WORKER_INDEX", str(worker))]


def tpu_env(hosts: list[str], worker_id: int, name: str) -> list[tuple[str, str]]:
    """Upstream's tpu.go: appended in this order; one TPU container, so the default port 8476."""
    return [("TPU_WORKER_HOSTNAMES", ",".join(hosts)), ("TPU_WORKER_ID", str(worker_id)),
            ("TPU_NAME", name), ("TPU_PROCESS_ADDRESSES", ",".join(f"{h}:8476" for h in hosts)),
            ("TPU_PROCESS_PORT", "8476")]


@pytest.mark.parametrize("group", [0, 2])
def test_upstream_tpu_sample_leader_is_tpu_worker_zero(group: int) -> None:
    g = run_group(TPU_SAMPLE, group)
    leader = f"sample-{group}"
    assert g.worker_template_annotations == {
        P + "size": "4", P + "leader-name": leader, P + "leader-requests-tpus": "true"}
    hosts = [f"{leader}.sample"] + [f"{leader}-{k}.sample" for k in (1, 2, 3)]
    for worker in range(4):
        name = leader if worker == 0 else f"{leader}-{worker}"
        assert env_of(g.pods[name]) == [
            lws_env(leader, "sample", 4, worker) + tpu_env(hosts, worker, leader)], name
    assert g.built_from_cached_leader == g.built_from_full_leader


def test_without_tpus_nothing_tpu() -> None:
    g = run_group(_variant(worker=CPU))
    assert g.worker_template_annotations == {P + "size": "4", P + "leader-name": "sample-0"}
    for worker, name in enumerate(g.pods):
        assert env_of(g.pods[name]) == [lws_env("sample-0", "sample", 4, worker)], name
    assert g.built_from_cached_leader == g.built_from_full_leader


def test_cpu_leader_tpu_workers_count_from_the_first_worker() -> None:
    """The LWS docs' heterogeneous groups: the leader is no TPU host; workers are 0..size-2."""
    g = run_group(_variant(leader=CPU))
    assert g.worker_template_annotations == {P + "size": "4", P + "leader-name": "sample-0"}
    hosts = [f"sample-0-{k}.sample" for k in (1, 2, 3)]
    assert env_of(g.pods["sample-0"]) == [lws_env("sample-0", "sample", 4, 0)]
    for worker in (1, 2, 3):
        assert env_of(g.pods[f"sample-0-{worker}"]) == [
            lws_env("sample-0", "sample", 4, worker) + tpu_env(hosts, worker - 1, "sample-0")]
    assert g.built_from_cached_leader == g.built_from_full_leader


def test_unique_per_replica_subdomain() -> None:
    g = run_group(_variant(size=2, networkConfig={"subdomainPolicy": "UniquePerReplica"}), 1)
    assert g.worker_template_annotations == {
        P + "size": "2", P + "leader-name": "sample-1", P + "leader-requests-tpus": "true"}
    hosts = ["sample-1.sample-1", "sample-1-1.sample-1"]
    assert env_of(g.pods["sample-1"]) == [
        lws_env("sample-1", "sample-1", 2, 0) + tpu_env(hosts, 0, "sample-1")]
    assert env_of(g.pods["sample-1-1"]) == [
        lws_env("sample-1", "sample-1", 2, 1) + tpu_env(hosts, 1, "sample-1")]


def test_leader_worker_subgroups_with_a_tpu_leader() -> None:
    """Size 4, subgroups of 2 (upstream's "Can deploy lws with subgroupsize set"): the leader
    and worker 1 are one slice, workers 2 and 3 the other (upstream's tpu.go with subgroups)."""
    g = run_group(_variant(subGroupPolicy={"subGroupSize": 2}))
    assert g.worker_template_annotations == {
        P + "size": "4", P + "leader-name": "sample-0", P + "leader-requests-tpus": "true",
        P + "subgroup-size": "2", P + "subgroup-policy-type": "LeaderWorker"}
    first, second = ["sample-0.sample", "sample-0-1.sample"], [
        "sample-0-2.sample", "sample-0-3.sample"]
    expected = {"sample-0": (first, 0, "0"), "sample-0-1": (first, 1, "0"),
                "sample-0-2": (second, 0, "1"), "sample-0-3": (second, 1, "1")}
    for worker, (name, (hosts, tpu_id, subgroup)) in enumerate(expected.items()):
        pod = g.pods[name]
        assert pod["metadata"]["labels"][P + "subgroup-index"] == subgroup
        assert env_of(pod) == [
            lws_env("sample-0", "sample", 4, worker) + tpu_env(hosts, tpu_id, "sample-0")], name


def test_leader_excluded_subgroups_with_a_cpu_leader() -> None:
    """Size 5, subgroups of 2, LeaderExcluded: the workers alone form the slices (1, 2) and
    (3, 4). (A LeaderExcluded leader that requests TPUs is rejected, as upstream does.)"""
    g = run_group(_variant(size=5, leader=CPU, subGroupPolicy={
        "subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"}))
    assert g.worker_template_annotations == {
        P + "size": "5", P + "leader-name": "sample-0", P + "subgroup-size": "2",
        P + "subgroup-policy-type": "LeaderExcluded"}
    assert env_of(g.pods["sample-0"]) == [lws_env("sample-0", "sample", 5, 0)]
    assert P + "subgroup-index" not in g.pods["sample-0"]["metadata"]["labels"]
    for worker in (1, 2, 3, 4):
        start = 1 if worker <= 2 else 3
        hosts = [f"sample-0-{start}.sample", f"sample-0-{start + 1}.sample"]
        pod = g.pods[f"sample-0-{worker}"]
        assert pod["metadata"]["labels"][P + "subgroup-index"] == str((worker - 1) // 2)
        assert env_of(pod) == [lws_env("sample-0", "sample", 5, worker)
                               + tpu_env(hosts, (worker - 1) % 2, "sample-0")]
    assert g.built_from_cached_leader == g.built_from_full_leader


def test_hash_identity_leader_host_name_first() -> None:
    """A Deployment's leader has a random name: its host name (``<lws>-<key prefix>``, kept in
    the cached spec) names the worker StatefulSet and leads the host list."""
    g = run_group(_variant(size=3, groupIdentity="Hash"), group=5, hashed=True)
    host = "sample-00000005"
    assert g.worker_template_annotations == {
        P + "size": "3", P + "leader-name": "sample-7c9d8b6f5-x5k2p",
        P + "leader-requests-tpus": "true", P + "group-identity": "Hash"}
    hosts = [f"{host}.sample", f"{host}-1.sample", f"{host}-2.sample"]
    for worker, name in enumerate(g.pods):
        assert env_of(g.pods[name]) == [
            lws_env(f"sample-{g.pods[name]['metadata']['labels'][P + 'group-index']}",
                    "sample", 3, worker) + tpu_env(hosts, worker, host)], name
    assert list(g.pods)[1:] == [f"{host}-1", f"{host}-2"]
    assert g.built_from_cached_leader == g.built_from_full_leader


def test_two_tpu_containers_and_a_tpu_init_container() -> None:
    """Every TPU container (regular first, then init) is one process (upstream's tpu.go, no
    subgroups): ids and ports count through them; the cached leader keeps each container's TPU
    request."""
    manifest = _variant(size=2)
    spec = manifest["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    spec["containers"].append({"name": "sidecar", "image": "s:1", "resources": TPU})
    spec["initContainers"] = [{"name": "setup", "image": "s:1", "resources": TPU}]
    g = run_group(manifest)
    assert g.worker_template_annotations[P + "leader-requests-tpus"] == "true"
    hosts = ["sample-0.sample"] * 3 + ["sample-0-1.sample"] * 3
    addresses = ",".join(f"{h}:{8476 + i % 3}" for i, h in enumerate(hosts))
    for worker, name in enumerate(g.pods):
        pod = g.pods[name]
        containers = [*pod["spec"]["containers"], *pod["spec"]["initContainers"]]
        for i, container in enumerate(containers):
            env = {e["name"]: e["value"] for e in container["env"]}
            assert env["TPU_WORKER_HOSTNAMES"] == ",".join(hosts)
            assert env["TPU_WORKER_ID"] == str(worker * 3 + i)
            assert env["TPU_PROCESS_ADDRESSES"] == addresses
            assert env["TPU_PROCESS_PORT"] == str(8476 + i)
    assert g.built_from_cached_leader == g.built_from_full_leader
