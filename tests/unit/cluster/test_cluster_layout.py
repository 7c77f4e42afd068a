"""The fake node inventory and kwok stage configuration of the local control plane."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from e2e.cluster.nodes import NodeLayout, gpu_rack, node_manifests
from e2e.cluster.stages import (
    READY_DELAY_ANNOTATION,
    STOP_AFTER_GRACE_ANNOTATION,
    UPSTREAM_STAGES,
    kwok_configuration,
    render_stages,
)


@pytest.mark.parametrize(
    ("index", "gpu_nodes", "expected"),
    [
        (0, 16, ("zone-a", "rack-0")),
        (3, 16, ("zone-a", "rack-0")),
        (4, 16, ("zone-a", "rack-1")),
        (8, 16, ("zone-b", "rack-2")),
        (15, 16, ("zone-b", "rack-3")),
        (0, 1, ("zone-a", "rack-0")),
        (699, 700, ("zone-b", "rack-174")),
        (351, 700, ("zone-a", "rack-87")),
        (352, 700, ("zone-b", "rack-88")),
    ],
)
def test_gpu_rack_layout(index: int, gpu_nodes: int, expected: tuple[str, str]) -> None:
    assert gpu_rack(index, gpu_nodes) == expected


def test_default_inventory() -> None:
    nodes = node_manifests(NodeLayout())
    assert len(nodes) == 20
    names = [n["metadata"]["name"] for n in nodes]
    assert len(set(names)) == 20
    gpu = [n for n in nodes if "nvidia.com/gpu" in n["status"]["capacity"]]
    tpu = [n for n in nodes if "google.com/tpu" in n["status"]["capacity"]]
    assert len(gpu) == 16
    assert len(tpu) == 4
    racks = Counter(n["metadata"]["labels"]["topology.kubernetes.io/rack"] for n in gpu)
    assert set(racks.values()) == {4}
    assert len(racks) == 4
    zones = Counter(n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in gpu)
    assert zones == {"zone-a": 8, "zone-b": 8}
    for node in nodes:
        meta = node["metadata"]
        assert meta["annotations"] == {"kwok.x-k8s.io/node": "fake"}
        assert meta["labels"]["kubernetes.io/hostname"] == meta["name"]
        assert meta["labels"]["cloud.google.com/gke-nodepool"]
        assert node["status"]["capacity"]["cpu"] == "64"
        assert node["status"]["capacity"]["memory"] == "512Gi"
        assert node["status"]["capacity"]["pods"] == "110"
        assert node["status"]["allocatable"] == node["status"]["capacity"]
    assert {n["metadata"]["labels"]["cloud.google.com/gke-tpu-topology"] for n in tpu} == {"4x4"}
    pools = Counter(n["metadata"]["labels"]["cloud.google.com/gke-nodepool"] for n in nodes)
    assert pools == {"gpu-rack-0": 4, "gpu-rack-1": 4, "gpu-rack-2": 4, "gpu-rack-3": 4,
                     "tpu-pool": 4}
    assert all(n["status"]["capacity"]["nvidia.com/gpu"] == "8" for n in gpu)


def test_inventory_scales_to_benchmark_size() -> None:
    layout = NodeLayout(gpu_nodes=700, gpus_per_node=4, tpu_nodes=0)
    nodes = node_manifests(layout)
    assert len(nodes) == layout.total == 700
    assert {n["status"]["capacity"]["nvidia.com/gpu"] for n in nodes} == {"4"}


def _fake_upstream(tmp_path: Path) -> Path:
    for rel in UPSTREAM_STAGES:
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        name = Path(rel).stem
        path.write_text(f"apiVersion: kwok.x-k8s.io/v1alpha1\nkind: Stage\nmetadata:\n"
                        f"  name: {name}\nspec: {{}}\n")
    return tmp_path


def test_stages_combine_upstream_and_ours(tmp_path: Path) -> None:
    docs = list(yaml.safe_load_all(render_stages(_fake_upstream(tmp_path), 1500)))
    names = [d["metadata"]["name"] for d in docs]
    assert names[: len(UPSTREAM_STAGES)] == [Path(r).stem for r in UPSTREAM_STAGES]
    assert names[len(UPSTREAM_STAGES):] == [
        "lws-e2e-pod-ready", "lws-e2e-pod-readiness-gates", "lws-e2e-pod-stop",
        "lws-e2e-pod-stop-after-grace", "lws-e2e-pod-remove"]
    assert "pod-delete" not in names  # kwok's removes a pod at a random time within its grace
    ready = docs[len(UPSTREAM_STAGES)]
    assert ready["spec"]["delay"]["durationMilliseconds"] == 1500
    assert READY_DELAY_ANNOTATION in ready["spec"]["delay"]["durationFrom"]["expressionFrom"]
    template = ready["spec"]["next"]["statusTemplate"]
    # A gated pod must not be reported Ready by the first stage (a kubelet would not either).
    assert '{{ if $gated }}"False"{{ else }}"True"{{ end }}' in template
    assert "phase: Running" in template


def test_deleted_pods_stop_then_go(tmp_path: Path) -> None:
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(
        render_stages(_fake_upstream(tmp_path), 0))}
    prompt, grace = docs["lws-e2e-pod-stop"], docs["lws-e2e-pod-stop-after-grace"]
    assert prompt["spec"]["delay"] == {"durationMilliseconds": 1000}
    # The grace-honouring stop waits until the deletionTimestamp (= deletion + grace period).
    assert grace["spec"]["delay"]["durationFrom"] == {
        "expressionFrom": ".metadata.deletionTimestamp"}
    # Exactly one of the two matches any pod: the annotation splits them.
    ops = {d["metadata"]["name"]: [e["operator"] for e in d["spec"]["selector"]["matchExpressions"]
                                   if STOP_AFTER_GRACE_ANNOTATION in e["key"]]
           for d in (prompt, grace)}
    assert ops == {"lws-e2e-pod-stop": ["NotIn"], "lws-e2e-pod-stop-after-grace": ["In"]}
    # Removal waits for the finalizers (foreground deletion, retained pods).
    remove = docs["lws-e2e-pod-remove"]["spec"]
    assert {"key": ".metadata.finalizers", "operator": "DoesNotExist"} in (
        remove["selector"]["matchExpressions"])
    assert remove["next"] == {"delete": True}


@pytest.mark.parametrize(("nodes", "workers"), [(20, 20), (80, 80), (1, 4)])
def test_kwok_gets_a_pod_worker_per_node(nodes: int, workers: int) -> None:
    options = yaml.safe_load(kwok_configuration(nodes))["options"]
    assert options["podPlayStageParallelism"] == workers
    # A configuration file replaces kwok's defaults: every pool must still have workers.
    assert all(options[k] >= 1 for k in ("nodePlayStageParallelism", "nodeLeaseParallelism",
                                         "podsOnNodeSyncParallelism"))
