"""Command line of the local control plane: ``python -m e2e.cluster up|down|status|build``."""

from __future__ import annotations

import argparse
import json
import sys

import yaml

from .launcher import TIERS, WITH_CONTROLLERS, LocalCluster, ensure_built
from .node import ensure_node_built
from .nodes import NodeLayout, node_manifests
from .stages import render_stages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m e2e.cluster", description=__doc__)
    parser.add_argument("--dir", default=".cluster", help="cluster directory (default .cluster)")
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start (or reuse) a cluster; idempotent")
    up.add_argument("--tier", choices=TIERS, default="full")
    up.add_argument("--nodes", type=int, default=16, help="GPU nodes (racks of 4, 2 zones)")
    up.add_argument("--gpus", type=int, default=8, help="nvidia.com/gpu per GPU node")
    up.add_argument("--tpu-nodes", type=int, default=4)
    up.add_argument("--ready-delay-ms", type=int, default=0,
                    help="how long kwok waits before a scheduled pod turns Running and Ready")
    up.add_argument("--timeout", type=float, default=180.0)
    sub.add_parser("down", help="stop the processes this directory started; idempotent")
    sub.add_parser("status", help="print the cluster's state as JSON")
    build = sub.add_parser("build", help="build the pinned binaries into the cache if missing")
    build.add_argument("--node", action="store_true",
                       help="also the kubelet and kube-proxy of the node tier")
    manifests = sub.add_parser(
        "manifests", help="print the fake nodes and kwok Stages as YAML, for an existing cluster "
        "running kwok (kind): python -m e2e.cluster manifests | kubectl apply -f -")
    manifests.add_argument("--nodes", type=int, default=16)
    manifests.add_argument("--gpus", type=int, default=8)
    manifests.add_argument("--tpu-nodes", type=int, default=4)
    manifests.add_argument("--ready-delay-ms", type=int, default=0)
    args = parser.parse_args(argv)

    cluster = LocalCluster(args.dir)
    if args.command == "build":
        ensure_built()
        if args.node:
            ensure_node_built()
    elif args.command == "up":
        layout = NodeLayout(gpu_nodes=args.nodes, gpus_per_node=args.gpus,
                            tpu_nodes=args.tpu_nodes)
        took = cluster.up(args.tier, layout, args.ready_delay_ms, timeout=args.timeout)
        nodes = layout.total if args.tier in WITH_CONTROLLERS else 0
        real = " and a real node" if args.tier == "node" else ""
        print(f"cluster ({args.tier}) ready in {took:.1f}s with {nodes} nodes{real}; "
              f"export KUBECONFIG={cluster.kubeconfig} PATH={cluster.bin}:$PATH")
    elif args.command == "down":
        cluster.down()
    elif args.command == "manifests":
        layout = NodeLayout(gpu_nodes=args.nodes, gpus_per_node=args.gpus,
                            tpu_nodes=args.tpu_nodes)
        print(yaml.safe_dump_all(node_manifests(layout), sort_keys=False), end="---\n")
        print(render_stages(ensure_built().kwok_stages, args.ready_delay_ms), end="")
    elif args.command == "status":
        state = cluster.state()
        print(json.dumps(state.__dict__ if state else None, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
