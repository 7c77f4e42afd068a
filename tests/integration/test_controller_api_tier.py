"""The controller against etcd + kube-apiserver alone, the StatefulSet controller simulated as
upstream's integration tests do (upstream's test/integration/controllers/leaderworkerset_test.go):
the test creates the pods a StatefulSet would
create and writes pod and StatefulSet status itself, so each step of a pass is observable.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import pytest_asyncio

from e2e.cluster import LocalCluster
from e2e.harness.admission import options_for, start_webhooks, stop_webhooks
from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.launcher import start_controllers
from e2e.kube import MERGE_PATCH, Kube, condition, wait_for

pytestmark = pytest.mark.api



@pytest_asyncio.fixture(loop_scope="session")
async def env(lws_crd: LocalCluster) -> AsyncIterator[tuple[Kube, str]]:
    """A fresh namespace with our webhooks and controllers; yields a client and the namespace."""
    kube = await Kube.connect(str(lws_crd.kubeconfig))
    ns = f"t-{uuid.uuid4().hex[:10]}"
    await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    hooks = await start_webhooks(str(lws_crd.kubeconfig), options_for(ns))
    controllers = await start_controllers(str(lws_crd.kubeconfig), workers=2)
    yield kube, ns
    await controllers.close()
    await stop_webhooks(hooks)
    await kube.delete("v1", "Namespace", ns)
    await kube.close()


def lws(replicas: int = 2, size: int = 2, **spec: Any) -> dict[str, Any]:
    return (LeaderWorkerSet("test-sample").replicas(replicas).size(size)
            .leader_image("nginx:1").image("nginx:1", name="worker").spec(**spec).build())


async def sts(kube: Kube, ns: str, name: str) -> dict[str, Any] | None:
    return await kube.get("apps/v1", "StatefulSet", name, ns)


async def wait_sts(kube: Kube, ns: str, name: str) -> dict[str, Any]:
    got = await wait_for(lambda: sts(kube, ns, name), what=f"statefulset {name}")
    assert got is not None
    return got


async def simulate(kube: Kube, ns: str, name: str) -> list[str]:
    """What the StatefulSet controller does for ``name``: create its missing pods from the
    template, replace pods at or above the partition whose revision is not the template's, and
    delete pods beyond its replicas. Returns the pod names it now has."""
    st = await wait_sts(kube, ns, name)
    spec = st["spec"]
    start = (spec.get("ordinals") or {}).get("start", 0)
    wanted = [f"{name}-{i}" for i in range(start, start + spec["replicas"])]
    template = spec["template"]
    key = template["metadata"]["labels"].get(P + "template-revision-hash")
    partition = ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get("partition", 0)
    owned = {p["metadata"]["name"]: p for p in await kube.list("v1", "Pod", ns) if any(
        r["uid"] == st["metadata"]["uid"] for r in p["metadata"].get("ownerReferences") or [])}
    for pod_name, pod in owned.items():
        ordinal = int(pod_name.rsplit("-", 1)[1])
        outdated = ordinal >= start + partition and (
            pod["metadata"]["labels"].get(P + "template-revision-hash") != key)
        if pod_name not in wanted or outdated:
            await kube.delete("v1", "Pod", pod_name, ns)
    current = {p["metadata"]["name"] for p in await kube.list("v1", "Pod", ns)}
    for pod_name in wanted:
        if pod_name in current:
            continue
        labels = {**template["metadata"].get("labels", {}),
                  "statefulset.kubernetes.io/pod-name": pod_name}
        await kube.create({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": pod_name, "labels": labels,
                         "annotations": template["metadata"].get("annotations", {}),
                         "ownerReferences": [{"apiVersion": "apps/v1", "kind": "StatefulSet",
                                              "name": name, "uid": st["metadata"]["uid"],
                                              "controller": True}]},
            "spec": {**template["spec"], "hostname": pod_name,
                     "subdomain": spec["serviceName"]},
        }, ns)
    return wanted


async def set_ready(kube: Kube, ns: str, pods: list[str], statefulsets: list[str]) -> None:
    """Mark pods Running and Ready and StatefulSets fully available, as upstream's helpers do."""
    for pod in pods:
        await kube.patch("v1", "Pod", pod, {"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}]}}, ns, content_type=MERGE_PATCH,
            subresource="status")
    for name in statefulsets:
        st = await wait_sts(kube, ns, name)
        n = st["spec"]["replicas"]
        await kube.patch("apps/v1", "StatefulSet", name, {"status": {
            "replicas": n, "readyReplicas": n, "availableReplicas": n, "currentReplicas": n,
            "updatedReplicas": n, "currentRevision": "", "updateRevision": ""}}, ns,
            content_type=MERGE_PATCH, subresource="status")


async def group_ready(kube: Kube, ns: str, size: int) -> None:
    """Create every group's pods and mark all of them ready."""
    leaders = await simulate(kube, ns, "test-sample")
    workers: list[str] = []
    if size > 1:
        for leader in leaders:
            await wait_sts(kube, ns, leader)
            workers += await simulate(kube, ns, leader)
    await set_ready(kube, ns, leaders + workers,
                    ["test-sample"] + (leaders if size > 1 else []))


async def notes(kube: Kube, ns: str) -> list[str]:
    return [e["note"] for e in await kube.list("events.k8s.io/v1", "Event", ns)
            if e.get("reportingController") == "leaderworkerset"]


async def wait_lws(kube: Kube, ns: str, check: Any, what: str) -> dict[str, Any]:
    async def probe() -> dict[str, Any] | None:
        got = await kube.get(API, KIND, "test-sample", ns)
        return got if got and check(got) else None

    got = await wait_for(probe, what=what)
    assert got is not None
    return got


async def test_groups_are_created_and_turn_available(env: tuple[Kube, str]) -> None:
    kube, ns = env
    await kube.create(lws(), ns)
    leader_sts = await wait_sts(kube, ns, "test-sample")
    assert leader_sts["spec"]["replicas"] == 2
    assert leader_sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 0
    assert await kube.get("v1", "Service", "test-sample", ns) is not None
    await wait_lws(kube, ns, lambda o: condition(o, "Progressing") == "True", "Progressing")
    leaders = await simulate(kube, ns, "test-sample")
    for leader in leaders:
        worker = await wait_sts(kube, ns, leader)
        assert worker["metadata"]["ownerReferences"][0]["name"] == leader
        assert worker["spec"]["replicas"] == 1
    await group_ready(kube, ns, 2)
    await wait_lws(kube, ns, lambda o: condition(o, "Available") == "True", "Available")

    async def recorded() -> list[str] | None:
        got = await notes(kube, ns)
        return got if "All replicas are ready, with 2 groups ready of total 2 groups" in got \
            else None

    got = await wait_for(recorded, what="AllGroupsReady event")
    assert got is not None
    assert "Replicas are progressing, with 0 groups ready of total 2 groups" in got
    assert "Created leader statefulset test-sample" in got
    assert "Created worker statefulset for leader pod test-sample-0" in got

    await kube.patch(API, KIND, "test-sample", {"spec": {"replicas": 3}}, ns,
                     content_type=MERGE_PATCH)
    await wait_lws(kube, ns, lambda o: condition(o, "Progressing") == "True"
                   and condition(o, "Available") == "False", "Progressing again")
    await wait_for(lambda: _has(kube, ns, "Replicas are progressing, with 2 groups ready of "
                                "total 3 groups"), what="the progressing event")


async def _has(kube: Kube, ns: str, note: str) -> bool:
    return note in await notes(kube, ns)


async def test_deleted_children_are_recreated(env: tuple[Kube, str]) -> None:
    kube, ns = env
    await kube.create(lws(), ns)
    await group_ready(kube, ns, 2)
    for api, kind, name in (("apps/v1", "StatefulSet", "test-sample-0"),
                            ("v1", "Service", "test-sample"),
                            ("apps/v1", "StatefulSet", "test-sample")):
        before = await kube.get(api, kind, name, ns)
        assert before is not None
        await kube.delete(api, kind, name, ns)

        async def recreated(api: str = api, kind: str = kind, name: str = name,
                            uid: str = before["metadata"]["uid"]) -> bool:
            got = await kube.get(api, kind, name, ns)
            return bool(got and got["metadata"]["uid"] != uid)

        await wait_for(recreated, what=f"{kind} {name} recreated")


async def test_size_one_has_no_worker_statefulsets(env: tuple[Kube, str]) -> None:
    kube, ns = env
    await kube.create(lws(size=1), ns)
    await group_ready(kube, ns, 1)
    await wait_lws(kube, ns, lambda o: condition(o, "Available") == "True", "Available")
    assert await sts(kube, ns, "test-sample-0") is None


async def test_leader_ready_waits_for_the_leader(env: tuple[Kube, str]) -> None:
    kube, ns = env
    await kube.create(lws(startupPolicy="LeaderReady"), ns)
    leaders = await simulate(kube, ns, "test-sample")
    await wait_lws(kube, ns, lambda o: condition(o, "Progressing") == "True", "a first pass")
    assert await sts(kube, ns, "test-sample-0") is None
    await set_ready(kube, ns, leaders[:1], [])
    await wait_sts(kube, ns, "test-sample-0")
    assert await sts(kube, ns, "test-sample-1") is None


async def change_leader_image(kube: Kube, ns: str) -> Callable[[int], Awaitable[bool]]:
    """Change the leader template (a new revision); returns a probe of the leader
    StatefulSet's partition for ``wait_for``."""
    await kube.patch(API, KIND, "test-sample", {"spec": {"leaderWorkerTemplate": {
        "leaderTemplate": {"spec": {"containers": [{"name": "leader", "image": "nginx:2"}]}}}}},
        ns, content_type=MERGE_PATCH)

    async def partition(value: int) -> bool:
        got = await sts(kube, ns, "test-sample")
        return bool(got and got["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == value)

    return partition


async def new_worker_sts(kube: Kube, ns: str, leader: str) -> None:
    """Wait for the worker StatefulSet of ``leader``'s new incarnation (its revision)."""
    pod = await kube.get("v1", "Pod", leader, ns)
    assert pod is not None
    key = pod["metadata"]["labels"][P + "template-revision-hash"]

    async def created() -> bool:
        got = await sts(kube, ns, leader)
        return bool(got and got["metadata"]["labels"][P + "template-revision-hash"] == key)

    await wait_for(created, what=f"the worker statefulset of the new leader {leader}")


async def test_template_change_with_the_default_strategy(env: tuple[Kube, str]) -> None:
    """Upstream's "leaderTemplate changed with default strategy": partition 4 -> 3 ('Updating
    replica 3'), then down as tail groups are updated and ready."""
    kube, ns = env
    await kube.create(lws(replicas=4), ns)
    await group_ready(kube, ns, 2)
    await wait_lws(kube, ns, lambda o: condition(o, "Available") == "True", "Available")
    partition = await change_leader_image(kube, ns)

    await wait_for(lambda: partition(3), what="partition 3")
    await wait_lws(kube, ns, lambda o: condition(o, "UpdateInProgress") == "True",
                   "UpdateInProgress")
    assert await _has(kube, ns, "Updating replica 3")
    # The StatefulSet controller replaces leader 3; the garbage collector (absent on this tier)
    # would remove the old leader's worker StatefulSet, and the controller builds a new one.
    await simulate(kube, ns, "test-sample")
    await kube.delete("apps/v1", "StatefulSet", "test-sample-3", ns)
    await new_worker_sts(kube, ns, "test-sample-3")
    workers = await simulate(kube, ns, "test-sample-3")
    await set_ready(kube, ns, ["test-sample-3", *workers], ["test-sample-3"])
    await wait_for(lambda: partition(2), what="partition 2 once group 3 is updated and ready")


async def counting_up(kube: Kube, ns: str, name: str, pods: list[str]) -> None:
    """The StatefulSet ``name`` as kube-controller-manager leaves it before it has counted its
    Ready pods: revisions settled and the generation observed, no replica available yet; its
    ``pods`` carry that revision and are marked Running and Ready."""
    st = await wait_sts(kube, ns, name)
    revision = f"{name}-5d8f9c"
    await kube.patch("apps/v1", "StatefulSet", name, {"status": {
        "replicas": st["spec"]["replicas"], "availableReplicas": 0, "readyReplicas": 0,
        "currentRevision": revision, "updateRevision": revision,
        "observedGeneration": st["metadata"]["generation"]}}, ns, content_type=MERGE_PATCH,
        subresource="status")
    for pod in pods:
        await kube.patch("v1", "Pod", pod, {"metadata": {"labels": {
            "controller-revision-hash": revision}}}, ns, content_type=MERGE_PATCH)
    await set_ready(kube, ns, pods, [])


async def test_a_group_is_ready_once_its_pods_show_it(env: tuple[Kube, str]) -> None:
    """A group whose worker pods are all Running and Ready on their StatefulSet's settled
    revision is Ready although the StatefulSet's status has not counted them (docs/migrating.md,
    Different on purpose): the set turns Available, and a rollout moves on past it, while
    that status still says no replica is available."""
    kube, ns = env
    await kube.create(lws(replicas=2, size=3), ns)
    leaders = await simulate(kube, ns, "test-sample")
    await set_ready(kube, ns, leaders, ["test-sample"])
    for leader in leaders:
        await counting_up(kube, ns, leader, await simulate(kube, ns, leader))
    got = await wait_lws(kube, ns, lambda o: condition(o, "Available") == "True", "Available")
    assert got["status"]["readyReplicas"] == 2

    partition = await change_leader_image(kube, ns)

    await wait_for(lambda: partition(1), what="partition 1")
    await simulate(kube, ns, "test-sample")  # leader 1 replaced on the new revision
    # What the garbage collector (absent on this tier) would do: the old group's workers go.
    await kube.delete("apps/v1", "StatefulSet", "test-sample-1", ns)
    for worker_pod in ("test-sample-1-1", "test-sample-1-2"):
        await kube.delete("v1", "Pod", worker_pod, ns)
    await new_worker_sts(kube, ns, "test-sample-1")
    await set_ready(kube, ns, ["test-sample-1"], [])
    await counting_up(kube, ns, "test-sample-1", await simulate(kube, ns, "test-sample-1"))
    await wait_for(lambda: partition(0), what="partition 0 once group 1's pods are Ready")
    worker = await sts(kube, ns, "test-sample-1")
    assert worker is not None
    assert worker["status"]["availableReplicas"] == 0  # its status never said so


async def test_missing_revision_is_recreated_for_the_leader_statefulset(
    env: tuple[Kube, str]
) -> None:
    """Upstream's "if a leaderSts exists, but a matching controllerRevision doesn't": a leader
    StatefulSet whose revision key has no ControllerRevision gets one."""
    kube, ns = env
    await kube.create(lws(), ns)
    await wait_sts(kube, ns, "test-sample")
    await kube.patch("apps/v1", "StatefulSet", "test-sample", {"metadata": {"labels": {
        P + "template-revision-hash": "template-hash"}}}, ns, content_type=MERGE_PATCH)

    async def revision() -> bool:
        revisions = await kube.list("apps/v1", "ControllerRevision", ns,
                                    label_selector=f"{P}template-revision-hash=template-hash")
        return bool(revisions)

    await wait_for(revision, what="a revision for the StatefulSet's key")
