"""The group disruption budget under a real ``kubectl drain`` (the cluster's pinned kubectl).

A LeaderWorkerSet of 4 groups of 2 pods, with ``max-disrupted-groups: "1"``, runs on three kwok
nodes of its own; three more nodes wait empty. ``kubectl drain`` of the three busy nodes (it
cordons them all, then evicts their pods, each pod retried every 5 s while it is answered 429)
must finish with every group Ready on the spare nodes, and never more than one group down at
any moment. "Down" is judged from a pod watch, as the budget counts it: a group is down unless
both of its pods exist, are not being deleted and are Ready. The view is checked on every watch
event and sampled every 150 ms besides (``polling``), so the maximum is a maximum over the
whole drain, not over a few snapshots.

About 55 s (53 s measured, the module's in-process operator start included): 4 groups, each
evicted, recreated and Ready (kwok's 1 s ready delay) before the next may go, and the drain's
5 s retry interval between them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from e2e.cluster.nodes import HOSTNAME_LABEL, NodeLayout, node_manifests
from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import LeaderWorkerSet
from e2e.harness.launcher import Operator
from e2e.harness.pod_view import PodView
from e2e.kube import MERGE_PATCH, is_ready, polling, wait_for
from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    MAX_DISRUPTED_GROUPS_ANNOTATION,
    NAME_LABEL,
    REASON_EVICTION_REFUSED,
)

pytestmark = pytest.mark.full

API = "leaderworkerset.x-k8s.io/v1"
NAME, REPLICAS, SIZE, BUDGET = "drained", 4, 2, 1
POOL = "e2e.lws-operator.dev/drain-pool"


class Downtime:
    """Every pod of the set as a watch shows it; the most groups seen down at once."""

    def __init__(self, op: Operator) -> None:
        self.view = PodView(op.kube, op.namespace, f"{NAME_LABEL}={NAME}", on_event=self.judge)
        self.worst = 0
        self.samples = 0
        self.started = time.monotonic()
        self.timeline: list[tuple[float, tuple[str, ...]]] = []  # each change of the down set

    def down(self) -> list[str]:
        live: dict[str, list[dict[str, Any]]] = {str(g): [] for g in range(REPLICAS)}
        for pod in self.view.pods.values():
            group = pod["metadata"]["labels"].get(GROUP_INDEX_LABEL)
            if group in live and not pod["metadata"].get("deletionTimestamp"):
                live[group].append(pod)
        return sorted(g for g, pods in live.items()
                      if len(pods) < SIZE or not all(is_ready(p) for p in pods))

    def judge(self) -> None:
        down = tuple(self.down())
        self.worst = max(self.worst, len(down))
        if not self.timeline or self.timeline[-1][1] != down:
            self.timeline.append((time.monotonic() - self.started, down))

    async def sample(self) -> None:
        self.samples += 1
        self.judge()

    async def start(self) -> None:
        await self.view.start()

    async def stop(self) -> None:
        await self.view.stop()


async def kubectl(op: Operator, *args: str) -> tuple[int, str]:
    """The cluster's own kubectl, as a subprocess the event loop does not wait on (the webhooks
    answering its evictions run on this loop)."""
    proc = await asyncio.create_subprocess_exec(
        str(op.cluster.bin / "kubectl"), "--kubeconfig", op.kubeconfig, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    out, _ = await proc.communicate()
    return int(proc.returncode or 0), out.decode()


async def test_a_drain_takes_down_at_most_the_budget_of_groups(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    names = [f"drain-{ns}-{i}" for i in range(6)]
    busy, spare = names[:3], names[3:]
    for name, node in zip(names, node_manifests(NodeLayout(gpu_nodes=6, tpu_nodes=0)),
                          strict=True):
        node["metadata"]["name"] = name
        node["metadata"]["labels"][HOSTNAME_LABEL] = name
        if name in busy:
            node["metadata"]["labels"][POOL] = ns
        await op.kube.create(node)
    downtime = Downtime(op)
    try:
        lws = (LeaderWorkerSet(NAME).replicas(REPLICAS).size(SIZE).image("engine:v1")
               .annotation(MAX_DISRUPTED_GROUPS_ANNOTATION, str(BUDGET))
               .worker_pod(nodeSelector={POOL: ns})
               .worker_annotations({READY_DELAY_ANNOTATION: "1s"}).build())
        await op.kube.create(lws, ns)

        async def all_ready() -> bool:
            pods = await op.kube.list("v1", "Pod", ns, label_selector=f"{NAME_LABEL}={NAME}")
            live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
            return len(live) == REPLICAS * SIZE and all(is_ready(p) for p in live)

        await wait_for(all_ready, timeout=90, what="every group Ready")
        pods = await op.kube.list("v1", "Pod", ns, label_selector=f"{NAME_LABEL}={NAME}")
        assert {p["spec"]["nodeName"] for p in pods} <= set(busy)
        for name in spare:  # room for the groups to come back
            await op.kube.patch("v1", "Node", name, {"metadata": {"labels": {POOL: ns}}},
                                content_type=MERGE_PATCH)
        await downtime.start()
        assert downtime.down() == []
        downtime.started, downtime.timeline = time.monotonic(), []
        async with polling(downtime.sample, interval=0.15):
            code, out = await kubectl(op, "drain", *busy, "--ignore-daemonsets",
                                      "--delete-emptydir-data", "--timeout=240s")
            assert code == 0, out
            await wait_for(all_ready, timeout=90, what="every group Ready after the drain")
        print("\n[drain] groups down over time: " + ", ".join(
            f"{t:.1f}s {list(down)}" for t, down in downtime.timeline), flush=True)
        assert downtime.worst == BUDGET, (downtime.worst, out)
        assert downtime.samples > 10
        # The drain was held back by the budget (a 429, retried) and not by anything else.
        assert "Cannot evict pod as it would violate the group disruption budget" in out
        pods = await op.kube.list("v1", "Pod", ns, label_selector=f"{NAME_LABEL}={NAME}")
        assert {p["spec"]["nodeName"] for p in pods} <= set(spare)
        refused = [s.value for m in op.registry.collect() if m.name == "lws_evictions"
                   for s in m.samples if s.name == "lws_evictions_total"
                   and s.labels == {"namespace": ns, "name": NAME, "decision": "refused"}]
        assert refused
        assert refused[0] > 0
        await op.recorded()  # the guard's Events go through the controller's recorder
        events = await op.kube.list("events.k8s.io/v1", "Event", ns)
        assert any(e.get("reason") == REASON_EVICTION_REFUSED
                   and e["regarding"]["name"] == NAME for e in events)
    finally:
        await downtime.stop()
        for name in names:
            await op.kube.delete("v1", "Node", name)
