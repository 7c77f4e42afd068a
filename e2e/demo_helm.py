"""``make demo-helm``: ``make demo`` as users run the operator, through ``helm install``.

Builds the operator image from the Dockerfile (``make image``; a no-op when this tree's image
exists), brings the node tier up (the full tier plus one real kubelet node with containerd: root,
host changes undone by ``make cluster-down``), imports the image into the node and installs the
chart with its defaults (two replicas, leader election, self-managed webhook certificates, the
PodDisruptionBudget, probes), its pods placed on the real node. Then the same demo as
``make demo``: the LWS docs' architecture example (replicas 2, size 4) on the kwok nodes, shown as
a tree, and the two-role DisaggregatedSet with its rollout step by step. Webhooks are reached
through their Service, the operator logs with ``kubectl logs``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from e2e import demo
from e2e.cluster import LocalCluster, NodeLayout
from e2e.helm import release as r
from e2e.image import build


def main() -> int:
    begin = time.monotonic()
    image = build()
    print(f"image {image.reference} ({image.size / 2**20:.0f} MiB, {image.base_kind} base) "
          f"ready after {time.monotonic() - begin:.1f}s")
    cluster = LocalCluster(os.environ.get("CLUSTER_DIR", demo.REPO / ".cluster"))
    took = cluster.up("node", NodeLayout())
    print(f"cluster ready in {took:.1f}s (20 fake GPU/TPU nodes and the real node)")
    cluster.import_image(image.archive)
    start = time.monotonic()
    r.install(cluster, image, verb="upgrade")  # upgrade --install: a second run reuses it
    pods = r.wait("the operator pods", lambda: r.rolled_out(cluster, image))
    holder = r.wait("a leader", lambda: r.lease_holder(cluster), timeout=90)
    print(f"helm install: {len(pods)} operator pods Ready on the real node after "
          f"{time.monotonic() - start:.1f}s; {holder} leads")
    print(cluster.kubectl("get", "pods", "-n", r.NAMESPACE, "-o", "wide"))
    applied = demo.wait_until("the sample to be admitted", lambda: subprocess.run(
        [str(cluster.bin / "kubectl"), "--kubeconfig", str(cluster.kubeconfig), "apply", "-f",
         "-"], input=json.dumps(demo.SAMPLE), text=True, capture_output=True).returncode == 0)
    assert applied
    name = demo.SAMPLE["metadata"]["name"]
    demo.wait_until("every group to be Ready", lambda: (
        demo.get(cluster, "lws", name, "-n", "default").get("status") or {}).get(
            "readyReplicas") == 2)
    print()
    demo.plugin(cluster, "tree", name, capture=False)
    if demo.CRD_FILES:
        demo.ds_demo(cluster)
    print(f"""
Whole run: {time.monotonic() - begin:.0f}s
Explore:  export KUBECONFIG={cluster.kubeconfig} PATH={cluster.bin}:{demo.PLUGIN.parent}:$PATH
          kubectl lws tree {name} --watch
          kubectl get pods -n {r.NAMESPACE} -o wide        # the operator's two pods
          kubectl get lease -n {r.NAMESPACE} {r.LEASE}     # which one leads
Logs:     kubectl logs -n {r.NAMESPACE} deploy/{r.DEPLOYMENT}
Stop:     make cluster-down""")
    return 0


if __name__ == "__main__":
    sys.exit(main())
