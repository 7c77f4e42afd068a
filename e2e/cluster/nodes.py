"""Fake node inventory for kwok: GPU racks and a TPU pool, as plain Node manifests.

Pure data so the layout (zones, racks, capacity) is unit-testable and the same for every tier size.
GPU nodes are laid out in racks of four, each rack its own node pool (so the upstream exclusive
placement sample, keyed on the node pool, finds a pool per group); the racks split evenly over
two zones. A small TPU pool lets the upstream TPU sample schedule.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

KWOK_ANNOTATION = {"kwok.x-k8s.io/node": "fake"}
RACK_SIZE = 4
ZONES = ("zone-a", "zone-b")
RACK_LABEL = "topology.kubernetes.io/rack"
ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
NODEPOOL_LABEL = "cloud.google.com/gke-nodepool"
TPU_TOPOLOGY_LABEL = "cloud.google.com/gke-tpu-topology"
TPU_ACCELERATOR_LABEL = "cloud.google.com/gke-tpu-accelerator"


@dataclass(frozen=True)
class NodeLayout:
    """How many fake nodes to create and what each offers."""

    gpu_nodes: int = 16
    gpus_per_node: int = 8
    tpu_nodes: int = 4
    tpu_chips_per_node: int = 4

    @property
    def total(self) -> int:
        return self.gpu_nodes + self.tpu_nodes


def _node(name: str, labels: dict[str, str], extra_capacity: dict[str, str]) -> dict[str, Any]:
    capacity = {"cpu": "64", "memory": "512Gi", "pods": "110", **extra_capacity}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": dict(KWOK_ANNOTATION),
            "labels": {
                "type": "kwok",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                HOSTNAME_LABEL: name,
                **labels,
            },
        },
        "status": {"capacity": capacity, "allocatable": dict(capacity)},
    }


def gpu_rack(index: int, gpu_nodes: int) -> tuple[str, str]:
    """(zone, rack) of GPU node ``index``: racks of four, the racks split over two zones."""
    racks = max(1, -(-gpu_nodes // RACK_SIZE))
    rack = index // RACK_SIZE
    racks_per_zone = max(1, -(-racks // len(ZONES)))
    return ZONES[min(rack // racks_per_zone, len(ZONES) - 1)], f"rack-{rack}"


def node_manifests(layout: NodeLayout) -> list[dict[str, Any]]:
    """Every fake node of ``layout``, GPU nodes first."""
    nodes = []
    for i in range(layout.gpu_nodes):
        zone, rack = gpu_rack(i, layout.gpu_nodes)
        nodes.append(
            _node(
                f"gpu-node-{i:03d}",
                {ZONE_LABEL: zone, RACK_LABEL: rack, NODEPOOL_LABEL: f"gpu-{rack}"},
                {"nvidia.com/gpu": str(layout.gpus_per_node)},
            )
        )
    for i in range(layout.tpu_nodes):
        nodes.append(
            _node(
                f"tpu-node-{i:03d}",
                {
                    ZONE_LABEL: ZONES[0],
                    RACK_LABEL: "tpu-rack-0",
                    NODEPOOL_LABEL: "tpu-pool",
                    TPU_TOPOLOGY_LABEL: "4x4",
                    TPU_ACCELERATOR_LABEL: "tpu-v5-lite-podslice",
                },
                {"google.com/tpu": str(layout.tpu_chips_per_node)},
            )
        )
    return nodes
