"""Fault injection on the full tier: what a test does to make a container, pod or node fail.

kwok has no kubelet: a pod's status is whatever the API says, so faults are API writes that mimic
what a kubelet would report (a container restart, a failed pod) or labels that trigger kwok's chaos
stages (pod failure, node NotReady).
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from ..kube import JSON_PATCH, MERGE_PATCH, Kube

POD_FAILED_LABEL = "pod-container-running-failed.stage.kwok.x-k8s.io"
NODE_NOT_READY_LABEL = "node-not-ready.stage.kwok.x-k8s.io"


async def restart_container(kube: Kube, namespace: str, pod: str, container: int = 0) -> int:
    """Report one more restart of container ``container``, as a kubelet would; returns the count.

    kwok's pod-ready stage only matches Pending pods, so it leaves a Running pod's status alone.
    A JSON patch with a ``test`` on the current count makes concurrent restarts safe.
    """
    current = await kube.get("v1", "Pod", pod, namespace)
    if current is None:
        raise LookupError(f"pod {namespace}/{pod} not found")
    statuses = current.get("status", {}).get("containerStatuses") or []
    if len(statuses) <= container:
        raise LookupError(f"pod {namespace}/{pod} has no status for container {container}")
    before = int(statuses[container].get("restartCount", 0))
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    base = f"/status/containerStatuses/{container}"
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": f"{base}/restartCount", "value": before},
        {"op": "replace", "path": f"{base}/restartCount", "value": before + 1},
        {"op": "add", "path": f"{base}/lastState", "value": {"terminated": {
            "exitCode": 137, "reason": "Error", "startedAt": now, "finishedAt": now}}},
    ]
    await kube.patch("v1", "Pod", pod, ops, namespace, content_type=JSON_PATCH,
                     subresource="status")
    return before + 1


async def fail_pod(kube: Kube, namespace: str, pod: str, delay: str = "0s") -> None:
    """Make a Running pod's containers terminate with an error (kwok's chaos stage)."""
    await kube.patch("v1", "Pod", pod, {"metadata": {
        "labels": {POD_FAILED_LABEL: "true"},
        "annotations": {f"{POD_FAILED_LABEL}/delay": delay},
    }}, namespace, content_type=MERGE_PATCH)


async def set_node_ready(kube: Kube, node: str, ready: bool) -> None:
    """Take a node NotReady (kwok's chaos stage) or give it back."""
    labels: dict[str, Any] = {NODE_NOT_READY_LABEL: None if ready else "true"}
    annotations: dict[str, Any] = {f"{NODE_NOT_READY_LABEL}/delay": None if ready else "0s"}
    await kube.patch("v1", "Node", node, {"metadata": {
        "labels": labels, "annotations": annotations}}, content_type=MERGE_PATCH)
