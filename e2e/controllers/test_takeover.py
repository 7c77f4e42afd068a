"""Taking LeaderWorkerSets over from the upstream Go controller restarts nothing.

The objects are left exactly as upstream leaves them, with the operator not running: the
LeaderWorkerSet as upstream's webhook stored it (none of the LWS docs' additions: created before any
webhook of ours serves the namespace), its ControllerRevision ``<lws>-<key>-1`` holding Go's JSON
(``GO_DATA``, upstream's ``getPatch`` bytes for the template beside it, checked against
``json.Marshal`` of the ``k8s.io/api`` types) under upstream's key (FNV-1 of those bytes), the
shared Service, the leader StatefulSet applied by field manager ``lws`` with that key, a worker
StatefulSet created per leader pod from the revision, and the status of a finished rollout. Pods
come up through the pod webhook (upstream's and ours label pods identically). Then the operator
starts, and no pod, no StatefulSet template and no revision key may change; the revision, kept
in the history from then on, is recorded fully Ready with its Go bytes untouched. Handing a set
with a kept history to the upstream controller and back is ``test_handback``'s.

The templates hold zero values Go's ``omitempty`` drops from the revision while the live object
keeps them (env ``value: ""``, ``args: []``, ``workingDir: ""``, ``stdin: false``), next to a
shell command with ``>`` and ``&&`` (Go escapes both) and ``1000m``/``1024Mi`` (Go prints ``1``/
``1Gi``): before the fix, each such group was recreated on takeover.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import uuid
from dataclasses import dataclass
from typing import Any

import pytest

from e2e.cluster import LocalCluster
from e2e.harness.admission import options_for, start_webhooks, stop_webhooks
from e2e.harness.clusters import Clusters
from e2e.harness.launcher import start_controllers
from e2e.kube import Kube, is_ready, polling, wait_for
from lws_operator.api.constants import FIELD_MANAGER, FULLY_READY_ANNOTATION
from lws_operator.controllers.runtime import ControllerRuntime
from lws_operator.logic.identity.revision import apply_revision, fnv1_32, safe_encode
from lws_operator.logic.objects.owners import lws_reference
from lws_operator.logic.status.set_status import hpa_pod_selector
from lws_operator.logic.workloads.services import shared_service
from lws_operator.logic.workloads.statefulsets import leader_statefulset, worker_statefulset

pytestmark = pytest.mark.full

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"
SIZE = 2


@dataclass(frozen=True)
class Upstream:
    """One LeaderWorkerSet as upstream left it: its worker container and Go's revision data."""

    name: str
    replicas: int
    container: dict[str, Any]
    go_data: str

    @property
    def key(self) -> str:
        return safe_encode(str(fnv1_32(self.go_data.encode())))


SETS = [
    Upstream("env-empty", 2, {
        "name": "main", "image": "nginx:1.27", "env": [{"name": "EMPTY", "value": ""}],
        "resources": {}},
        '{"spec":{"leaderWorkerTemplate":{"$patch":"replace","restartPolicy":'
        '"RecreateGroupOnPodRestart","size":2,"workerTemplate":{"metadata":{},"spec":'
        '{"containers":[{"env":[{"name":"EMPTY"}],"image":"nginx:1.27","name":"main",'
        '"resources":{}}]}}},"networkConfig":{"$patch":"replace","subdomainPolicy":"Shared"}}}'),
    Upstream("zero-values", 1, {
        "name": "main", "image": "nginx:1.27",
        "command": ["sh", "-c", "echo ready > /tmp/ready && sleep infinity"],
        "args": [], "workingDir": "", "stdin": False,
        "resources": {"requests": {"cpu": "1000m", "memory": "1024Mi"}}},
        '{"spec":{"leaderWorkerTemplate":{"$patch":"replace","restartPolicy":'
        '"RecreateGroupOnPodRestart","size":2,"workerTemplate":{"metadata":{},"spec":'
        '{"containers":[{"command":["sh","-c","echo ready \\u003e /tmp/ready \\u0026\\u0026 '
        'sleep infinity"],"image":"nginx:1.27","name":"main","resources":{"requests":'
        '{"cpu":"1","memory":"1Gi"}}}]}}},"networkConfig":{"$patch":"replace",'
        '"subdomainPolicy":"Shared"}}}'),
]


def stored_lws(s: Upstream) -> dict[str, Any]:
    """The LeaderWorkerSet as upstream's defaulting webhook stores it."""
    return {
        "apiVersion": API, "kind": KIND, "metadata": {"name": s.name},
        "spec": {
            "replicas": s.replicas, "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                "partition": 0, "maxUnavailable": 1, "maxSurge": 0}},
            "networkConfig": {"subdomainPolicy": "Shared"},
            "leaderWorkerTemplate": {"size": SIZE, "restartPolicy": "RecreateGroupOnPodRestart",
                                     "workerTemplate": {"spec": {"containers": [s.container]}}},
        },
    }


async def pods_of(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    return [p for p in await kube.list("v1", "Pod", ns, label_selector=f"{P}name={name}")
            if not p["metadata"].get("deletionTimestamp")]


async def leave_as_upstream(cluster: LocalCluster, kube: Kube, ns: str, s: Upstream,
                            lws: dict[str, Any]) -> None:
    """Everything upstream's controllers would have written for ``lws``, in their order."""
    data = json.loads(s.go_data)
    # Created by a Go client (kubectl), as upstream creates it: its data is stored as Go's
    # compact JSON, which decides how the operator may later write the revision's number and
    # annotations (``logic.identity.writes``).
    await asyncio.to_thread(cluster.kubectl, "-n", ns, "create", "-f", "-", stdin=json.dumps({
        "apiVersion": "apps/v1", "kind": "ControllerRevision",
        "metadata": {"name": f"{s.name}-{s.key}-1", "namespace": ns,
                     "labels": {P + "name": s.name, P + "template-revision-hash": s.key},
                     "ownerReferences": [lws_reference(lws)]},
        "data": data, "revision": 1}))
    await kube.create(shared_service(lws), ns)
    res = await kube.dyn.resources.get(api_version="apps/v1", kind="StatefulSet")
    await kube.dyn.server_side_apply(res, body=leader_statefulset(lws, s.key, 0, s.replicas),
                                     namespace=ns, field_manager=FIELD_MANAGER,
                                     force_conflicts=True)

    async def leaders() -> list[dict[str, Any]] | None:
        found = [p for p in await pods_of(kube, ns, s.name)
                 if p["metadata"]["labels"].get(P + "worker-index") == "0"]
        return found if len(found) == s.replicas else None

    revision_lws = apply_revision(lws, data)
    for leader in await wait_for(leaders, timeout=60, what=f"{s.name} leader pods") or []:
        await kube.create(worker_statefulset(revision_lws, lws, leader, None), ns)


async def finish_as_upstream(kube: Kube, ns: str, s: Upstream) -> None:
    """Every pod Ready, both StatefulSet controllers done, and upstream's status written."""

    async def ready() -> bool:
        pods = await pods_of(kube, ns, s.name)
        sets = await kube.list("apps/v1", "StatefulSet", ns, label_selector=f"{P}name={s.name}")
        return (len(pods) == s.replicas * SIZE and all(is_ready(p) for p in pods)
                and len(sets) == 1 + s.replicas
                and all(st["status"].get("observedGeneration") == st["metadata"]["generation"]
                        and st["status"].get("currentRevision")
                        == st["status"].get("updateRevision") for st in sets))

    await wait_for(ready, timeout=120, what=f"{s.name} to run as upstream left it")
    lws = await kube.get(API, KIND, s.name, ns)
    assert lws is not None
    generation = lws["metadata"]["generation"]
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    await kube.patch(API, KIND, s.name, {"status": {
        "observedGeneration": generation, "replicas": s.replicas,
        "readyReplicas": s.replicas, "updatedReplicas": s.replicas,
        "hpaPodSelector": hpa_pod_selector(s.name),
        "conditions": [{"type": "Available", "status": "True", "reason": "AllGroupsReady",
                        "message": "All replicas are ready", "lastTransitionTime": now,
                        "observedGeneration": generation}]}}, ns, subresource="status")


async def observed(kube: Kube, ns: str) -> dict[str, Any]:
    """What a restart would change: pod UIDs, StatefulSet templates and keys, revision keys."""
    out: dict[str, Any] = {}
    for s in SETS:
        pods = await pods_of(kube, ns, s.name)
        sets = await kube.list("apps/v1", "StatefulSet", ns, label_selector=f"{P}name={s.name}")
        revisions = await kube.list("apps/v1", "ControllerRevision", ns,
                                    label_selector=f"{P}name={s.name}")
        out[s.name] = {
            "pods": sorted((p["metadata"]["name"], p["metadata"]["uid"]) for p in pods),
            "statefulsets": {st["metadata"]["name"]: (
                st["metadata"]["labels"].get(P + "template-revision-hash"),
                st["spec"]["template"]) for st in sets},
            "revision keys": sorted({r["metadata"]["labels"][P + "template-revision-hash"]
                                     for r in revisions}),
        }
    return out


async def takeover(kubeconfig: str, kube: Kube, ns: str) -> list[dict[str, Any]]:
    """Start the operator, let it settle, watch a while longer; what was seen meanwhile."""
    seen: list[dict[str, Any]] = []

    async def record() -> None:
        seen.append(await observed(kube, ns))

    controllers = await start_controllers(kubeconfig, workers=2)
    runtime: ControllerRuntime = controllers.runtime

    async def settled() -> bool:
        """Primed, and every LeaderWorkerSet had its pass (the queue is empty and idle)."""
        return runtime.cache.synced and len(runtime.queue) == 0 and not runtime.queue.processing()

    try:
        async with polling(record, interval=1.0):
            await wait_for(settled, timeout=60, what="the operator's first passes")
            await asyncio.sleep(5)  # time for a StatefulSet rollout to show
            await wait_for(settled, timeout=60, what="the operator's passes to settle")
    finally:
        await controllers.close()
    return seen


async def test_takeover_from_upstream_restarts_nothing(clusters: Clusters) -> None:
    cluster = clusters.get("full")
    await asyncio.to_thread(cluster.install_crd)
    kubeconfig = str(cluster.kubeconfig)
    kube = await Kube.connect(kubeconfig)
    ns = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        # Stored before any webhook of ours serves the namespace: no field the LWS docs add is set.
        stored = {s.name: await kube.create(stored_lws(s), ns) for s in SETS}
        for s in SETS:
            assert "groupIdentity" not in stored[s.name]["spec"]
            assert stored[s.name]["spec"]["leaderWorkerTemplate"]["workerTemplate"] == {
                "spec": {"containers": [s.container]}}, "GO_DATA is Go's JSON of this template"
        hooks = await start_webhooks(kubeconfig, options_for(ns))  # pod admission
        try:
            for s in SETS:
                await leave_as_upstream(cluster, kube, ns, s, stored[s.name])
            for s in SETS:
                await finish_as_upstream(kube, ns, s)
            before = await observed(kube, ns)
            for s in SETS:
                assert before[s.name]["revision keys"] == [s.key]
            seen = await takeover(kubeconfig, kube, ns)
            assert seen
            for snapshot in seen:
                for s in SETS:
                    assert snapshot[s.name]["pods"] == before[s.name]["pods"], \
                        f"{s.name}: a pod was recreated on takeover"
                    assert snapshot[s.name]["statefulsets"] == before[s.name]["statefulsets"], \
                        f"{s.name}: a StatefulSet changed its template or key on takeover"
                    assert snapshot[s.name]["revision keys"] == [s.key]
            # The history kept from here on: upstream's revision, as it was, recorded fully Ready
            # (the set is: every group updated and Ready), which no pod noticed.
            for s in SETS:
                (revision,) = [r for r in await kube.list(
                    "apps/v1", "ControllerRevision", ns, label_selector=f"{P}name={s.name}")
                    if r["metadata"]["ownerReferences"][0]["kind"] == KIND]
                assert revision["data"] == json.loads(s.go_data)
                assert revision["revision"] == 1
                assert FULLY_READY_ANNOTATION in (revision["metadata"].get("annotations") or {})
        finally:
            for s in SETS:
                await kube.delete(API, KIND, s.name, ns)
            await stop_webhooks(hooks)
    finally:
        await kube.delete("v1", "Namespace", ns)
        await kube.close()
