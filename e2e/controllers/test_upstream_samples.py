"""Every upstream LeaderWorkerSet sample, applied unchanged on the full tier (the drop-in
check): each converges, every pod carries exactly the labels, annotations and environment the
upstream controller gives it, a steady-state window and a restarted operator cost no write, and
the operator logs no traceback.

The manifests are copies of upstream's samples as the reference snapshot holds them
(``upstream_samples/``, byte-identical to upstream's at the reference commit; copied so the
test runs from a fresh clone). Every file there is classified below; a new one fails the test
until it is. The expected values are computed here from upstream's label keys, pod webhook
(pod_webhook.go) and worker StatefulSet (pod_controller.go),
not by the operator's code: pod names, group keys (SHA-1 of ``<namespace>/<leader>``), the
``LWS_*`` variables, the TPU variables (upstream's accelerators/tpu.go, no subgroups), the
exclusive-placement terms and the workers' node selector (LWS docs "Exclusive Topology Placement").

Two samples need more than the default cluster offers: the TPU sample runs 3 groups of 4 pods
each asking for a whole 4-chip TPU host (12 hosts; the cluster has 4), so the test adds 8 TPU
nodes like the existing ones for that sample and removes them afterwards. The others fit as
they are (cpu 50m per pod; the exclusive sample needs 3 free node pools of the 5).
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from e2e.cluster.nodes import NODEPOOL_LABEL
from e2e.harness.clusters import REPO
from e2e.harness.launcher import Operator, start_controllers
from e2e.harness.tpu import (
    extra_tpu_nodes,
    lws_env,
    requests_tpus,
    settled,
    tpu_env,
)
from e2e.kube import wait_for

pytestmark = pytest.mark.full

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"
HERE = Path(__file__).parent / "upstream_samples"
# The reference snapshot beside the main checkout (/work/main) or a worktree (/work/wt/<name>).
REFERENCES = [base / "shared" / "reference" / "upstream-samples"
              for base in (REPO.parent, REPO.parent.parent)]

LWS_SAMPLES = ("leaderworkerset_v1_leaderworkerset.yaml", "leaderworkerset_exclusiveplacement.yaml",
               "leaderworkerset_multi_template.yaml", "leaderworkerset_tpu.yaml")
HPA_SAMPLE = "hpaexample.yaml"  # applied with the sample it scales (its scaleTargetRef)
NOT_LEADERWORKERSETS = {
    "disaggregatedset_v1_3role.yaml": "a DisaggregatedSet (disaggregatedset.x-k8s.io): "
                                      "applied by test_disaggregatedset.py",
    "disaggregatedset_v1_disaggregatedset.yaml": "a DisaggregatedSet: applied by "
                                                 "test_disaggregatedset.py",
    "lws_v1alpha1_configuration.yaml": "the operator's configuration file, not an object to "
                                       "apply (tests/unit/api/test_config.py loads it)",
}
EXTRA_TPU_NODES = [f"tpu-node-{i:03d}" for i in range(4, 12)]


def test_every_sample_is_classified_and_a_faithful_copy() -> None:
    files = sorted(p.name for p in HERE.glob("*.yaml"))
    assert files == sorted((*LWS_SAMPLES, HPA_SAMPLE, *NOT_LEADERWORKERSETS))
    for reference in REFERENCES:
        if not reference.is_dir():  # the reference snapshot is not part of a clone
            continue
        assert sorted(p.name for p in reference.glob("*.yaml")) == files
        for name in files:
            assert (HERE / name).read_bytes() == (reference / name).read_bytes(), name


# ------------------------------------------------------------- expectations (from upstream's code)


def _env(entries: list[dict[str, str]]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in entries}


def test_the_expected_tpu_env_reproduces_the_spec_examples() -> None:
    """The examples of upstream's accelerators/tpu_test.go: the expectations above are not a
    guess."""
    leader = _env(tpu_env("test-sample", 1, 0, 5, 1, 0, True, "default"))
    assert leader["TPU_WORKER_HOSTNAMES"] == ",".join(
        ["test-sample-1.default"] + [f"test-sample-1-{k}.default" for k in range(1, 5)])
    assert leader["TPU_WORKER_ID"] == "0"
    worker = _env(tpu_env("test-sample", 1, 3, 5, 1, 0, False, "default"))
    assert worker["TPU_WORKER_HOSTNAMES"] == ",".join(
        f"test-sample-1-{k}.default" for k in range(1, 5))
    assert worker["TPU_WORKER_ID"] == "2"
    for pod, ids in ((0, ("0", "1")), (1, ("2", "3"))):
        for position in (0, 1):
            env = _env(tpu_env("L", 0, pod, 2, 2, position, True, "sub"))
            assert env["TPU_WORKER_HOSTNAMES"] == "L-0.sub,L-0.sub,L-0-1.sub,L-0-1.sub"
            assert env["TPU_PROCESS_ADDRESSES"] == (
                "L-0.sub:8476,L-0.sub:8477,L-0-1.sub:8476,L-0-1.sub:8477")
            assert env["TPU_WORKER_ID"] == ids[position]
            assert env["TPU_PROCESS_PORT"] == str(8476 + position)
            assert env["TPU_NAME"] == "L-0"


def exclusive_terms(key: str, topology: str) -> dict[str, Any]:
    """Upstream's exclusive affinity (pod_webhook.go): a leader's required affinity to its own
    group and anti-affinity to others."""
    return {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchExpressions": [
                {"key": P + "group-key", "operator": "In", "values": [key]}]},
            "topologyKey": topology}]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchExpressions": [
                {"key": P + "group-key", "operator": "Exists"},
                {"key": P + "group-key", "operator": "NotIn", "values": [key]}]},
            "topologyKey": topology}]},
    }


# Labels the API server copies from the node at binding (the PodTopologyLabelsAdmission
# plugin), as it does for any pod: upstream's pods get them too.
NODE_TOPOLOGY_LABELS = ("topology.kubernetes.io/zone", "topology.kubernetes.io/region")


def check_pod(pod: dict[str, Any], doc: dict[str, Any], ns: str, group: int, worker: int,
              revision: str, node_labels: dict[str, str]) -> None:
    """Every label, annotation and env entry of one pod, and its placement terms."""
    name = doc["metadata"]["name"]
    lwt = doc["spec"]["leaderWorkerTemplate"]
    size = lwt["size"]
    leader_template = lwt.get("leaderTemplate") or lwt["workerTemplate"]
    template = leader_template if worker == 0 else lwt["workerTemplate"]
    topology = (doc["metadata"].get("annotations") or {}).get(P + "exclusive-topology")
    meta, spec = pod["metadata"], pod["spec"]
    pod_name = f"{name}-{group}" if worker == 0 else f"{name}-{group}-{worker}"
    key = hashlib.sha1(f"{ns}/{name}-{group}".encode()).hexdigest()
    assert meta["name"] == pod_name

    labels = dict(meta["labels"])
    assert labels.pop("controller-revision-hash")  # the StatefulSet controller's own
    for copied in NODE_TOPOLOGY_LABELS:
        if copied in labels:
            assert labels.pop(copied) == node_labels.get(copied), (pod_name, copied)
    assert labels == {
        **((template.get("metadata") or {}).get("labels") or {}),
        P + "name": name, P + "group-index": str(group), P + "worker-index": str(worker),
        P + "group-key": key, P + "template-revision-hash": revision,
        "statefulset.kubernetes.io/pod-name": pod_name,
        "apps.kubernetes.io/pod-index": str(group if worker == 0 else worker),
    }, pod_name

    leader_requests = bool(requests_tpus(leader_template))
    annotations: dict[str, str] = {**((template.get("metadata") or {}).get("annotations") or {}),
                                   P + "size": str(size)}
    if topology:
        annotations[P + "exclusive-topology"] = topology
    if worker:
        annotations[P + "leader-name"] = f"{name}-{group}"
        if leader_requests:
            annotations[P + "leader-requests-tpus"] = "true"
    assert meta.get("annotations") == annotations, pod_name

    assert spec["hostname"] == pod_name
    assert spec["subdomain"] == name
    tpu_positions = requests_tpus(template)
    if tpu_positions:
        assert spec["nodeName"].startswith("tpu-"), pod_name
    containers = [*spec["containers"], *(spec.get("initContainers") or [])]
    template_containers = [*template["spec"]["containers"],
                           *(template["spec"].get("initContainers") or [])]
    for position, (container, written) in enumerate(
            zip(containers, template_containers, strict=True)):
        expected = [*lws_env(name, ns, group, worker, size), *(written.get("env") or [])]
        if position in tpu_positions:
            expected += tpu_env(name, group, worker, size, len(tpu_positions),
                                tpu_positions.index(position), leader_requests)
        assert container["name"] == written["name"]
        assert container.get("env") == expected, (pod_name, container["name"])

    if topology and worker == 0:
        assert spec.get("affinity") == exclusive_terms(key, topology), pod_name
    else:
        assert spec.get("affinity") == template["spec"].get("affinity"), pod_name
    expected_selector = dict(template["spec"].get("nodeSelector") or {})
    got_selector = dict(spec.get("nodeSelector") or {})
    if topology and worker:
        # LWS docs "Exclusive Topology Placement": the workers follow their leader's domain (its
        # value is checked against the leader's node by the caller).
        assert got_selector.get(topology), pod_name
        expected_selector[topology] = got_selector[topology]
    assert got_selector == expected_selector, pod_name


# ------------------------------------------------------------------ harness


class Tracebacks(logging.Handler):
    """Every log record of the process that carries a traceback."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        text = self.format(record)
        if record.exc_info or "Traceback" in text:
            self.records.append(text[:3000])


@pytest.fixture(scope="module")
def tracebacks() -> Iterator[Tracebacks]:
    handler = Tracebacks()
    root, ours = logging.getLogger(), logging.getLogger("lws_operator")
    level = ours.level
    ours.setLevel(logging.INFO)  # tracebacks logged at any level are seen
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)
    ours.setLevel(level)


def test_the_traceback_check_sees_the_operators_log(tracebacks: Tracebacks) -> None:
    """A traceback logged by the controller at info level is caught (the check is live)."""
    logged = len(tracebacks.records)
    try:
        raise ValueError("probe")
    except ValueError:
        logging.getLogger("lws_operator.controllers.leaderworkerset").info("probe", exc_info=True)
    assert len(tracebacks.records) == logged + 1
    assert "ValueError: probe" in tracebacks.records.pop()


async def _owned(op: Operator, name: str) -> list[str]:
    selector = f"{P}name={name}"
    out = [f"Pod/{p['metadata']['name']}" for p in await op.kube.list(
        "v1", "Pod", op.namespace, label_selector=selector)]
    for api, kind in (("apps/v1", "StatefulSet"), ("apps/v1", "Deployment"),
                      ("apps/v1", "ControllerRevision"), ("v1", "Service")):
        out += [f"{kind}/{o['metadata']['name']}" for o in await op.kube.list(
            api, kind, op.namespace, label_selector=selector)]
    return out


async def _remove(op: Operator, name: str) -> None:
    """Delete the set and wait until nothing it owned is left (the garbage collector's deletes
    would count as writes in the next sample's window)."""
    await op.kube.delete(API, KIND, name, op.namespace)

    async def gone() -> bool:
        return (await op.kube.get(API, KIND, name, op.namespace) is None
                and not await _owned(op, name))

    await wait_for(gone, timeout=120, what=f"{name} and everything it owned to be gone")


async def _state(op: Operator, name: str) -> dict[str, str]:
    """Pod UIDs and the resourceVersions of everything the operator writes for the set."""
    selector = f"{P}name={name}"
    lws = await op.kube.get(API, KIND, name, op.namespace)
    assert lws is not None
    out = {f"{KIND}/{name}": lws["metadata"]["resourceVersion"]}
    for pod in await op.kube.list("v1", "Pod", op.namespace, label_selector=selector):
        out[f"Pod/{pod['metadata']['name']}"] = pod["metadata"]["uid"]
    for api, kind in (("apps/v1", "StatefulSet"), ("apps/v1", "ControllerRevision"),
                      ("v1", "Service")):
        for obj in await op.kube.list(api, kind, op.namespace, label_selector=selector):
            out[f"{kind}/{obj['metadata']['name']}"] = obj["metadata"]["resourceVersion"]
    return out


async def _no_writes_at_rest(op: Operator, name: str) -> None:
    """Passes over the settled set, then a second operator instance priming against it (a
    restart), write nothing: the operator's own counters and the API server's agree."""

    async def alone() -> bool:
        # An earlier module's namespace being deleted: the namespace controller's deletes
        # count on the server.
        return not [n for n in await op.kube.list("v1", "Namespace")
                    if (n.get("status") or {}).get("phase") == "Terminating"]

    await wait_for(alone, timeout=180, what="other test namespaces to be deleted")
    await asyncio.sleep(2)  # the last status write and its watch events settle
    before, server_before, state = op.writes(), await op.server_writes(), await _state(op, name)
    await op.resync()
    assert op.writes() == before
    assert await op.server_writes() == server_before
    second = await start_controllers(op.kubeconfig, workers=2)

    async def primed() -> bool:
        runtime = second.runtime
        return runtime.cache.synced and len(runtime.queue) == 0 and not runtime.queue.processing()

    try:
        await wait_for(primed, timeout=60, what="the restarted instance's passes")
        await asyncio.sleep(2)
    finally:
        await second.close()
    restarted = Operator(op.kube, op.namespace, second.runtime, second.registry, op.kubeconfig,
                         op.cluster)
    assert restarted.writes() == {}
    assert await op.server_writes() == server_before
    assert await _state(op, name) == state


# ------------------------------------------------------------------ the samples


@pytest_asyncio.fixture(loop_scope="session")
async def capacity(operator: Operator, sample: str) -> AsyncIterator[None]:
    """The TPU sample's twelve hosts while it runs (gone after its set is): the 8 hosts
    ``EXTRA_TPU_NODES`` beside the cluster's 4, named as a 12-host layout would name them."""
    doc = yaml.safe_load((HERE / sample).read_text())
    if not requests_tpus(doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]):
        yield
        return
    async with extra_tpu_nodes(operator.kube, EXTRA_TPU_NODES):
        yield


@pytest.mark.parametrize("sample", LWS_SAMPLES)
async def test_the_upstream_sample_converges_exactly(operator: Operator, tracebacks: Tracebacks,
                                                     capacity: None, sample: str) -> None:
    op, ns = operator, operator.namespace
    logged = len(tracebacks.records)
    doc = yaml.safe_load((HERE / sample).read_text())
    name = doc["metadata"]["name"]
    replicas, size = doc["spec"]["replicas"], doc["spec"]["leaderWorkerTemplate"]["size"]
    for left in await op.kube.list(API, KIND, ns):  # they share names and node pools
        await _remove(op, left["metadata"]["name"])
    with_hpa = sample == "leaderworkerset_v1_leaderworkerset.yaml"
    try:
        await op.kube.create(doc, ns)
        if with_hpa:
            hpa = yaml.safe_load((HERE / HPA_SAMPLE).read_text())
            assert hpa["spec"]["scaleTargetRef"]["name"] == name
            await op.kube.create(hpa, ns)
        pods = {p["metadata"]["name"]: p for p in await settled(op, name, replicas, size)}

        if with_hpa:
            async def read_scale() -> bool:
                got = await op.kube.get("autoscaling/v2", "HorizontalPodAutoscaler",
                                        "example-hpa", ns)
                return ((got or {}).get("status") or {}).get("currentReplicas") == replicas

            await wait_for(read_scale, timeout=90, what="the HPA to read the scale subresource")
            scaled = await op.kube.get(API, KIND, name, ns)
            assert scaled is not None
            assert scaled["spec"]["replicas"] == replicas  # at its minReplicas: nothing to scale
            assert scaled["status"]["hpaPodSelector"] == f"{P}name={name},{P}worker-index=0"

        # At rest, and after a restart, nothing is written (checked before the pods, so a wrong
        # pod does not hide the writes).
        await _no_writes_at_rest(op, name)

        live = await op.kube.get(API, KIND, name, ns)
        assert live is not None
        lws_labels = live["metadata"].get("labels") or {}
        lws_annotations = live["metadata"].get("annotations") or {}
        leader_sts = await op.kube.get("apps/v1", "StatefulSet", name, ns)
        assert leader_sts is not None
        revision = leader_sts["metadata"]["labels"][P + "template-revision-hash"]
        # upstream's SSAWithStatefulset: the set's own labels and annotations, overlaid.
        assert leader_sts["metadata"]["labels"] == {
            **lws_labels, P + "name": name, P + "template-revision-hash": revision}
        assert leader_sts["metadata"]["annotations"] == {
            **lws_annotations, P + "replicas": str(replicas)}
        assert leader_sts["spec"]["template"]["metadata"]["labels"][
            P + "template-revision-hash"] == revision
        revisions = await op.kube.list("apps/v1", "ControllerRevision", ns,
                                       label_selector=f"{P}name={name}")
        # The LeaderWorkerSet's one revision (the StatefulSets' own carry the same labels).
        assert [r["metadata"]["labels"][P + "template-revision-hash"] for r in revisions
                if r["metadata"]["ownerReferences"][0]["kind"] == KIND] == [revision]
        assert sorted(pods) == sorted(
            f"{name}-{g}" + (f"-{w}" if w else "") for g in range(replicas) for w in range(size))
        lwt = doc["spec"]["leaderWorkerTemplate"]
        leader_requests = bool(requests_tpus(lwt.get("leaderTemplate") or lwt["workerTemplate"]))
        for group in range(replicas):
            for worker in range(size):
                pod = pods[f"{name}-{group}" + (f"-{worker}" if worker else "")]
                placed_on = await op.kube.get("v1", "Node", pod["spec"]["nodeName"])
                assert placed_on is not None
                check_pod(pod, doc, ns, group, worker, revision, placed_on["metadata"]["labels"])
            sts = await op.kube.get("apps/v1", "StatefulSet", f"{name}-{group}", ns)
            assert sts is not None
            assert sts["spec"]["replicas"] == size - 1
            assert sts["metadata"]["ownerReferences"][0]["name"] == f"{name}-{group}"
            # upstream's constructWorkerStatefulSetApplyConfiguration (pod_controller.go)
            assert sts["metadata"]["labels"] == {
                **lws_labels, P + "name": name, P + "group-index": str(group),
                P + "group-key": hashlib.sha1(f"{ns}/{name}-{group}".encode()).hexdigest(),
                P + "template-revision-hash": revision}
            assert (sts["metadata"].get("annotations") or {}) == lws_annotations
            # upstream's accelerators/tpu.go and pod_controller.go: the worker template says
            # whether the leader pod requests TPUs.
            template_annotations = sts["spec"]["template"]["metadata"].get("annotations") or {}
            assert template_annotations.get(P + "leader-requests-tpus") == (
                "true" if leader_requests else None), f"{name}-{group}"

        topology = (doc["metadata"].get("annotations") or {}).get(P + "exclusive-topology")
        if topology:
            pools: dict[int, set[str]] = {}
            for pod in pods.values():
                host = await op.kube.get("v1", "Node", pod["spec"]["nodeName"])
                assert host is not None
                group = int(pod["metadata"]["labels"][P + "group-index"])
                pool = host["metadata"]["labels"][NODEPOOL_LABEL]
                pools.setdefault(group, set()).add(pool)
                if pod["metadata"]["labels"][P + "worker-index"] != "0":
                    leader = pods[f"{name}-{group}"]
                    placed = await op.kube.get("v1", "Node", leader["spec"]["nodeName"])
                    assert placed is not None
                    assert pod["spec"]["nodeSelector"][topology] == (
                        placed["metadata"]["labels"][topology])
            assert all(len(p) == 1 for p in pools.values()), pools  # a group in one pool
            assert len(set.union(*pools.values())) == replicas, pools  # a pool per group
            assert topology == NODEPOOL_LABEL

        assert tracebacks.records[logged:] == [], "\n\n".join(tracebacks.records[logged:][:3])
    finally:
        if with_hpa:
            await op.kube.delete("autoscaling/v2", "HorizontalPodAutoscaler", "example-hpa", ns)
        await _remove(op, name)
