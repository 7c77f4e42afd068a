"""The local control plane: pinned builds of etcd, Kubernetes and kwok run as plain processes."""

from .launcher import TIERS, LocalCluster, ensure_built
from .node import PLACEMENT
from .nodes import NodeLayout

__all__ = ["PLACEMENT", "TIERS", "LocalCluster", "NodeLayout", "ensure_built"]
