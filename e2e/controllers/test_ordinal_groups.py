"""End to end on the full tier: the operator (controllers and webhooks, in-process) against real
kube-controller-manager, kube-scheduler and kwok nodes.

What a user sees is asserted: the LWS docs' architecture example (names, labels, annotations, env),
scaling, a rolling update of the template, UniquePerReplica Services, LeaderReady, deletion, and
that a LeaderWorkerSet at rest costs no API writes.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.converge import converged, pods_of
from e2e.harness.launcher import Operator, start_controllers
from e2e.kube import MERGE_PATCH, is_ready, wait_for
from lws_operator.api.constants import FULLY_READY_ANNOTATION
from lws_operator.controllers.runtime import ControllerRuntime

pytestmark = pytest.mark.full

SAMPLES = Path(__file__).parent / "upstream_samples"  # upstream's, see test_upstream_samples


def sample(name: str, replicas: int = 2, size: int = 4, **spec: Any) -> dict[str, Any]:
    """The LWS docs' architecture example: nginx workers with one GPU each."""
    return (LeaderWorkerSet(name).replicas(replicas).size(size)
            .image("nginx:1.27", name="nginx", resources={"limits": {"nvidia.com/gpu": "1"}})
            .spec(**spec).build())


async def test_architecture_example(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    await op.kube.create(sample("leaderworkerset-sample"), ns)
    pods = await converged(op, "leaderworkerset-sample", 2, 4)
    names = sorted(p["metadata"]["name"] for p in pods)
    assert names == sorted(f"leaderworkerset-sample-{g}{suffix}" for g in (0, 1)
                           for suffix in ("", "-1", "-2", "-3"))
    by_name = {p["metadata"]["name"]: p for p in pods}
    for group in (0, 1):
        leader = by_name[f"leaderworkerset-sample-{group}"]
        key = hashlib.sha1(f"{ns}/leaderworkerset-sample-{group}".encode()).hexdigest()
        for worker in range(4):
            pod = leader if worker == 0 else by_name[f"leaderworkerset-sample-{group}-{worker}"]
            labels, annotations = pod["metadata"]["labels"], pod["metadata"]["annotations"]
            assert labels[P + "name"] == "leaderworkerset-sample"
            assert labels[P + "group-index"] == str(group)
            assert labels[P + "worker-index"] == str(worker)
            assert labels[P + "group-key"] == key
            assert labels[P + "template-revision-hash"]
            assert annotations[P + "size"] == "4"
            if worker:
                assert annotations[P + "leader-name"] == f"leaderworkerset-sample-{group}"
            env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
            assert env == {
                "LWS_LEADER_ADDRESS": f"leaderworkerset-sample-{group}.leaderworkerset-sample.{ns}",
                "LWS_GROUP_SIZE": "4", "LWS_WORKER_INDEX": str(worker)}
            assert pod["spec"]["subdomain"] == "leaderworkerset-sample"
    leader_sts = await op.kube.get("apps/v1", "StatefulSet", "leaderworkerset-sample", ns)
    assert leader_sts is not None
    assert leader_sts["spec"]["replicas"] == 2
    assert leader_sts["spec"]["podManagementPolicy"] == "Parallel"
    for group in (0, 1):
        sts = await op.kube.get("apps/v1", "StatefulSet", f"leaderworkerset-sample-{group}", ns)
        assert sts is not None
        assert sts["spec"]["replicas"] == 3
        assert sts["spec"]["ordinals"] == {"start": 1}
        assert sts["metadata"]["ownerReferences"][0]["kind"] == "Pod"
    service = await op.kube.get("v1", "Service", "leaderworkerset-sample", ns)
    assert service is not None
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    lws = await op.kube.get(API, KIND, "leaderworkerset-sample", ns)
    assert lws is not None
    assert lws["status"]["hpaPodSelector"] == (
        f"{P}name=leaderworkerset-sample,{P}worker-index=0")

    async def events() -> set[tuple[str, str, str]] | None:
        got = {(e["reason"], e["type"], e["note"]) for e in await op.kube.list(
            "events.k8s.io/v1", "Event", ns)
            if e["regarding"].get("name") == "leaderworkerset-sample"
            and e.get("reportingController") == "leaderworkerset"}
        return got if ("AllGroupsReady", "Normal", "All replicas are ready, with 2 groups ready "
                       "of total 2 groups") in got else None

    recorded = await wait_for(events, what="the LeaderWorkerSet's Events")
    assert recorded is not None
    key = leader_sts["metadata"]["labels"][P + "template-revision-hash"]
    assert ("CreatingRevision", "Normal", f"Creating revision with key {key} for a newly created "
            "LeaderWorkerSet") in recorded
    assert ("GroupsProgressing", "Normal", "Created leader statefulset leaderworkerset-sample") in (
        recorded)
    for group in (0, 1):
        assert ("GroupsProgressing", "Normal", "Created worker statefulset for leader pod "
                f"leaderworkerset-sample-{group}") in recorded


async def test_scale_up_and_down(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    await op.kube.create(sample("scaled", replicas=2, size=2), ns)
    await converged(op, "scaled", 2, 2)
    for replicas in (5, 1):
        await op.kube.patch(API, KIND, "scaled", {"spec": {"replicas": replicas}}, ns,
                            content_type=MERGE_PATCH, subresource="scale")
        pods = await converged(op, "scaled", replicas, 2)
        leaders = sorted(p["metadata"]["name"] for p in pods
                         if p["metadata"]["labels"][P + "worker-index"] == "0")
        assert leaders == [f"scaled-{i}" for i in range(replicas)]


async def test_rolling_update_of_the_template(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    await op.kube.create(sample("rolled", replicas=3, size=2), ns)
    before = {p["metadata"]["labels"][P + "template-revision-hash"]
              for p in await converged(op, "rolled", 3, 2)}
    await op.kube.patch(API, KIND, "rolled", {"spec": {"leaderWorkerTemplate": {"workerTemplate": {
        "spec": {"containers": [{"name": "nginx", "image": "nginx:1.28"}]}}}}}, ns,
        content_type=MERGE_PATCH)

    async def rolled() -> list[dict[str, Any]] | None:
        pods = await converged(op, "rolled", 3, 2)
        images = {p["spec"]["containers"][0]["image"] for p in pods}
        return pods if images == {"nginx:1.28"} else None

    pods = await wait_for(rolled, timeout=120, what="every pod on the new template")
    assert pods is not None
    after = {p["metadata"]["labels"][P + "template-revision-hash"] for p in pods}
    assert len(after) == 1
    assert after.isdisjoint(before)

    async def kept() -> bool:
        """Once the update is done, the old revision is kept as history (unlike upstream's,
        which deletes it), numbered below the new one, and both were fully Ready."""
        revisions = await op.kube.list("apps/v1", "ControllerRevision", ns,
                                       label_selector=f"{P}name=rolled")
        ours = sorted((r for r in revisions
                       if r["metadata"]["ownerReferences"][0]["kind"] == KIND),
                      key=lambda r: r["revision"])
        return ([r["metadata"]["labels"][P + "template-revision-hash"] for r in ours]
                == [*before, *after] and all(
                    FULLY_READY_ANNOTATION in (r["metadata"].get("annotations") or {})
                    for r in ours))

    await wait_for(kept, what="the old revision kept once the update is done")


async def test_unique_per_replica_services(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    await op.kube.create(sample("unique", replicas=2, size=2,
                                networkConfig={"subdomainPolicy": "UniquePerReplica"}), ns)
    pods = await converged(op, "unique", 2, 2)
    for group in (0, 1):
        service = await op.kube.get("v1", "Service", f"unique-{group}", ns)
        assert service is not None
        assert service["spec"]["selector"] == {P + "name": "unique", P + "group-index": str(group)}
        assert service["metadata"]["ownerReferences"][0]["name"] == f"unique-{group}"
    for pod in pods:
        group = pod["metadata"]["labels"][P + "group-index"]
        assert pod["spec"]["subdomain"] == f"unique-{group}"


async def test_leader_ready_holds_the_workers(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    body = sample("patient", replicas=1, size=3, startupPolicy="LeaderReady")
    body["spec"]["leaderWorkerTemplate"]["leaderTemplate"] = {
        "metadata": {"annotations": {READY_DELAY_ANNOTATION: "4s"}},
        "spec": {"containers": [{"name": "leader", "image": "nginx:1.27"}]}}
    await op.kube.create(body, ns)

    async def leader_running_not_ready() -> dict[str, Any] | None:
        pod = await op.kube.get("v1", "Pod", "patient-0", ns)
        return pod if pod and pod["spec"].get("nodeName") and not is_ready(pod) else None

    await wait_for(leader_running_not_ready, what="the leader scheduled, not yet Ready")
    assert await op.kube.get("apps/v1", "StatefulSet", "patient-0", ns) is None
    await converged(op, "patient", 1, 3)


def quantity_sample(name: str, identity: str = "Ordinal") -> dict[str, Any]:
    """A set whose template writes its quantities as no API server stores them (seen
    with upstream's samples): bare integers as upstream's TPU and vLLM samples do
    (``google.com/tpu: 4``,
    ``cpu: 125``), a decimal fraction, milli-units of a whole number, ``Mi`` of a whole
    ``Gi``, in the container's resources, a downward-API divisor and an emptyDir size limit.
    (A JSON float such as ``cpu: 0.5`` never gets this far: the CRD's int-or-string schema
    refuses it, as upstream's does.)"""
    body = sample(name, replicas=2, size=2)
    if identity != "Ordinal":
        body["spec"]["groupIdentity"] = identity
    pod = body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]
    container = pod["containers"][0]
    container["resources"] = {
        "limits": {"nvidia.com/gpu": 1, "cpu": "1000m", "memory": "1024Mi"},
        "requests": {"nvidia.com/gpu": 1, "cpu": "0.5", "memory": 536870912}}
    container["env"] = [{"name": "CPUS", "valueFrom": {"resourceFieldRef": {
        "resource": "limits.cpu", "divisor": 1}}}]
    container["volumeMounts"] = [{"name": "scratch", "mountPath": "/scratch"}]
    pod["volumes"] = [{"name": "scratch", "emptyDir": {"sizeLimit": "1024Mi"}}]
    return body


async def test_a_converged_lws_costs_no_writes(operator: Operator) -> None:
    """Sets at rest, one with plain quantities and two (Ordinal and Hash) whose templates write
    them in non-canonical forms, cost no write while every one gets passes over and over."""
    op, ns = operator, operator.namespace
    await op.kube.create(sample("quiet", replicas=2, size=2), ns)
    await op.kube.create(quantity_sample("quiet-quantities"), ns)
    await op.kube.create(quantity_sample("quiet-hash-quantities", identity="Hash"), ns)
    for name in ("quiet", "quiet-quantities", "quiet-hash-quantities"):
        await converged(op, name, 2, 2)
    async def alone() -> bool:
        # Other modules' namespaces (ours are "t-…", the chaos and bench ones are named
        # otherwise) are deleted in the background: the namespace controller's deletions count
        # on the server, so measure once no namespace is terminating.
        namespaces = await op.kube.list("v1", "Namespace")
        names = {n["metadata"]["name"] for n in namespaces}
        terminating = [n for n in namespaces if n.get("status", {}).get("phase") == "Terminating"]
        return not terminating and not {n for n in names if n.startswith("t-")} - {ns, f"{ns}-op"}

    await wait_for(alone, timeout=180, what="other test namespaces to be deleted")
    await asyncio.sleep(2)  # let the last status write and its watch events settle
    before, server_before = op.writes(), await op.server_writes()
    assert server_before[("POST", "leaderworkersets")] >= 1  # the counters are really read
    # A resync: every LeaderWorkerSet gets a pass, several times over.
    await op.resync()
    assert op.writes() == before
    # Cross-checked on the server: nobody wrote to the kinds we manage in the meantime.
    assert await op.server_writes() == server_before


async def test_deletion_removes_everything(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    await op.kube.create(sample("doomed", replicas=2, size=2), ns)
    await converged(op, "doomed", 2, 2)
    await op.kube.delete(API, KIND, "doomed", ns)

    async def gone() -> bool:
        sts = await op.kube.list("apps/v1", "StatefulSet", ns, label_selector=f"{P}name=doomed")
        services = await op.kube.list("v1", "Service", ns, label_selector=f"{P}name=doomed")
        return not sts and not services and not await pods_of(op, "doomed")

    await wait_for(gone, timeout=90, what="everything owned by the LWS to be deleted")


async def test_the_hpa_sample_scales_through_the_scale_subresource(operator: Operator) -> None:
    """The upstream HPA sample, unchanged: below its minReplicas (3) the autoscaler scales the
    architecture example's LWS (2 replicas) up through /scale, with no metrics pipeline."""
    op, ns = operator, operator.namespace
    if await op.kube.get(API, KIND, "leaderworkerset-sample", ns) is None:
        await op.kube.create(sample("leaderworkerset-sample"), ns)
    hpa = yaml.safe_load((SAMPLES / "hpaexample.yaml").read_text())
    await op.kube.create(hpa, ns)

    async def scaled() -> bool:
        got = await op.kube.get("autoscaling/v2", "HorizontalPodAutoscaler", "example-hpa", ns)
        lws = await op.kube.get(API, KIND, "leaderworkerset-sample", ns)
        return bool(got and lws and lws["spec"]["replicas"] == 3
                    and (got.get("status") or {}).get("desiredReplicas") == 3)

    await wait_for(scaled, timeout=90, what="the HPA to scale the LWS to its minReplicas")
    await converged(op, "leaderworkerset-sample", 3, 4)


async def test_a_restarted_operator_changes_nothing(operator: Operator) -> None:
    """A second operator instance starting against settled LeaderWorkerSets (what a restart or
    an upgrade does) primes its caches and reconciles every one of them without a single write,
    and no pod or StatefulSet changes; templates with non-canonical quantities included (in
    Ordinal and Hash mode: a leader StatefulSet and a leader Deployment)."""
    op, ns = operator, operator.namespace
    names = ("steady", "steady-quantities", "steady-hash-quantities")
    await op.kube.create(sample("steady", replicas=2, size=2), ns)
    await op.kube.create(quantity_sample("steady-quantities"), ns)
    await op.kube.create(quantity_sample("steady-hash-quantities", identity="Hash"), ns)
    for name in names:
        await converged(op, name, 2, 2)
    await asyncio.sleep(2)

    async def state() -> dict[str, str]:
        """Every pod's UID and every leader and worker object's resourceVersion."""
        out: dict[str, str] = {}
        for name in names:
            selector = f"{P}name={name}"
            out.update({f"Pod/{p['metadata']['name']}": p["metadata"]["uid"]
                        for p in await pods_of(op, name)})
            for kind in ("StatefulSet", "Deployment"):
                out.update({f"{kind}/{o['metadata']['name']}": o["metadata"]["resourceVersion"]
                            for o in await op.kube.list("apps/v1", kind, ns,
                                                        label_selector=selector)})
        return out

    before = await state()
    assert "Deployment/steady-hash-quantities" in before  # both leader kinds are covered
    second = await start_controllers(op.kubeconfig, workers=2)
    await wait_for(lambda: _settled(second.runtime), timeout=60,
                   what="the second instance's passes")
    await asyncio.sleep(2)
    await second.close()
    restarted = Operator(op.kube, ns, second.runtime, second.registry, op.kubeconfig, op.cluster)
    assert restarted.writes() == {}
    assert await state() == before


async def _settled(runtime: ControllerRuntime) -> bool:
    """Primed, and every LeaderWorkerSet had its pass (the queue is empty and idle)."""
    return runtime.cache.synced and len(runtime.queue) == 0 and not runtime.queue.processing()


async def test_resize_rolls_every_group_to_the_new_size(operator: Operator) -> None:
    """size is part of the revision: 4 -> 2 -> 1 -> 3 each converge with default rollout
    settings, crossing size 1 in both directions (the worker StatefulSets go and come back)."""
    op, ns = operator, operator.namespace
    await op.kube.create(sample("resized", replicas=2, size=4), ns)
    await converged(op, "resized", 2, 4)
    for size in (2, 1, 3):
        await op.kube.patch(API, KIND, "resized", {"spec": {"leaderWorkerTemplate": {
            "size": size}}}, ns, content_type=MERGE_PATCH)

        async def resized(size: int = size) -> list[dict[str, Any]] | None:
            pods = await converged(op, "resized", 2, size)
            sizes = {p["metadata"]["annotations"][P + "size"] for p in pods}
            return pods if sizes == {str(size)} else None

        await wait_for(resized, timeout=120, what=f"every group at size {size}")
        workers = [s for s in await op.kube.list("apps/v1", "StatefulSet", ns,
                                                 label_selector=f"{P}name=resized")
                   if s["metadata"]["name"] != "resized"]
        assert len(workers) == (0 if size == 1 else 2)


async def test_volume_claim_templates_give_every_pod_its_own_claim(operator: Operator) -> None:
    op, ns = operator, operator.namespace
    body = sample("stateful", replicas=2, size=2)
    lwt = body["spec"]["leaderWorkerTemplate"]
    lwt["volumeClaimTemplates"] = [{"metadata": {"name": "cache"}, "spec": {
        "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]
    lwt["workerTemplate"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "cache", "mountPath": "/cache"}]
    await op.kube.create(body, ns)
    pods = await converged(op, "stateful", 2, 2)
    claims = {c["metadata"]["name"]: c for c in await op.kube.list(
        "v1", "PersistentVolumeClaim", ns)}
    for pod in pods:
        claim = claims[f"cache-{pod['metadata']['name']}"]
        assert claim["status"]["phase"] == "Bound"
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert volumes["cache"]["persistentVolumeClaim"]["claimName"] == claim["metadata"]["name"]
