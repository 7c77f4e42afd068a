"""End to end: the volcano scheduler provider (upstream's pkg/schedulerprovider) against Volcano's
PodGroup CRD.

No Volcano scheduler runs: pods keep the default scheduler, and what is asserted is LWS's part,
as upstream's volcano e2e suite (test/e2e/e2e_gang_scheduling_test.go) does: the group-name
annotation on every pod and one
volcano PodGroup per group and revision with the right minMember, minResources and queue.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from e2e.cluster import LocalCluster
from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.clusters import Clusters, install_volcano_crd
from e2e.harness.converge import converged
from e2e.harness.launcher import Operator, running_operator
from e2e.kube import wait_for

pytestmark = pytest.mark.full

VOLCANO = "scheduling.volcano.sh/v1beta1"
NGINX = "nginx:1.27"  # the LWS docs' architecture example: nginx workers with one GPU each
GPU = {"limits": {"nvidia.com/gpu": "1"}}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def volcano_operator(clusters: Clusters) -> AsyncIterator[Operator]:
    """Like the harness's ``operator``, with ``--scheduler-provider volcano`` on both sides."""
    cluster: LocalCluster = clusters.get("full")
    cluster.install_crd()
    install_volcano_crd(cluster)
    async with running_operator(cluster, scheduler_provider="volcano") as op:
        yield op


async def volcano_groups(op: Operator, name: str, revision: str | None = None
                         ) -> list[dict[str, Any]]:
    selector = f"{P}name={name}" + (f",{P}template-revision-hash={revision}" if revision else "")
    return await op.kube.list(VOLCANO, "PodGroup", op.namespace, label_selector=selector)


async def test_pod_groups_per_group_and_revision(volcano_operator: Operator) -> None:
    op, ns = volcano_operator, volcano_operator.namespace
    body = (LeaderWorkerSet("vc").replicas(2).size(4).image(NGINX, name="nginx", resources=GPU)
            .annotations({"scheduling.volcano.sh/queue-name": "team-a",
                          "volcano.sh/preemptable": "false"}).build())
    await op.kube.create(body, ns)
    pods = await converged(op, "vc", 2, 4)
    revision = pods[0]["metadata"]["labels"][P + "template-revision-hash"]
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == (
            f"vc-{labels[P + 'group-index']}-{revision}")
        assert "schedulingGroup" not in pod["spec"]

    async def two() -> list[dict[str, Any]] | None:
        groups = await volcano_groups(op, "vc")
        return groups if len(groups) == 2 else None

    groups = await wait_for(two, timeout=30, what="two volcano PodGroups")
    assert groups is not None
    assert sorted(g["metadata"]["name"] for g in groups) == [f"vc-0-{revision}",
                                                            f"vc-1-{revision}"]
    for group in groups:
        assert group["spec"] == {"minMember": 4, "queue": "team-a",
                                 "minResources": {"nvidia.com/gpu": "4"}}
        assert group["metadata"]["annotations"] == {"volcano.sh/preemptable": "false"}
        assert group["metadata"]["ownerReferences"][0]["kind"] == "Pod"

    # A rolling update produces new PodGroups for the new revision; the old ones go with
    # their leaders.
    container = body["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    container["image"] = "nginx:1.28"
    await op.kube.patch(API, KIND, "vc", {"spec": {"leaderWorkerTemplate": body["spec"][
        "leaderWorkerTemplate"]}}, ns)

    async def rolled() -> list[dict[str, Any]] | None:
        current = await converged(op, "vc", 2, 4, timeout=120)
        new = current[0]["metadata"]["labels"][P + "template-revision-hash"]
        if new == revision:
            return None
        groups = await volcano_groups(op, "vc")
        live = [g for g in groups if not g["metadata"].get("deletionTimestamp")]
        names = sorted(g["metadata"]["name"] for g in live)
        return live if names == [f"vc-0-{new}", f"vc-1-{new}"] else None

    await wait_for(rolled, timeout=180, what="new-revision PodGroups only")


async def test_leader_ready_uses_a_min_member_of_one(volcano_operator: Operator) -> None:
    op, ns = volcano_operator, volcano_operator.namespace
    await op.kube.create(
        LeaderWorkerSet("vcready").replicas(1).size(3).spec(startupPolicy="LeaderReady")
        .image(NGINX, name="nginx", resources=GPU).build(), ns)
    await converged(op, "vcready", 1, 3)
    groups = await volcano_groups(op, "vcready")
    assert [g["spec"]["minMember"] for g in groups] == [1]
