"""Leader and worker StatefulSet builders (upstream's leaderworkerset_controller.go,
pod_controller.go): exact objects for the typical cases."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from e2e.harness.builder import LeaderWorkerSet
from lws_operator.logic.identity.revision import apply_revision, revision_patch
from lws_operator.logic.workloads.statefulsets import (
    exclusive_topology_key,
    leader_max_unavailable,
    leader_statefulset,
    volume_claim_templates,
    worker_statefulset,
)

P = "leaderworkerset.sigs.k8s.io/"
UID = "7c0bd1b0-0000-4000-8000-000000000001"
POD_UID = "7c0bd1b0-0000-4000-8000-000000000002"
GROUP_KEY = "a" * 40
WORKER = {"spec": {"containers": [{"name": "w", "image": "worker:1"}]}}
LEADER = {
    "metadata": {"labels": {"role": "leader"}, "annotations": {"note": "kept"}},
    "spec": {"containers": [{"name": "l", "image": "leader:1"}]},
}
LWS_OWNER = {
    "apiVersion": "leaderworkerset.x-k8s.io/v1",
    "kind": "LeaderWorkerSet",
    "name": "sample",
    "uid": UID,
    "controller": True,
    "blockOwnerDeletion": True,
}
POD_OWNER = {
    "apiVersion": "v1",
    "kind": "Pod",
    "name": "sample-1",
    "uid": POD_UID,
    "controller": True,
    "blockOwnerDeletion": True,
}


def make_lws(
    *,
    replicas: int | None = 3,
    size: int = 4,
    leader: dict[str, Any] | None = None,
    worker: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
    network: dict[str, Any] | None = None,
    rolling: dict[str, Any] | None = None,
    **template: Any,
) -> dict[str, Any]:
    body = (LeaderWorkerSet("sample", "ns").meta(uid=UID).labels({"team": "ml"})
            .annotations(annotations or {"owner": "alice"})
            .spec(startupPolicy="LeaderCreated")
            .rolling_update(**(rolling or {"partition": 0, "maxUnavailable": 1, "maxSurge": 0}))
            .size(size).restart_policy("RecreateGroupOnPodRestart")
            .worker_template(worker or WORKER).template(**template))
    if leader is not None:
        body.leader_template(leader)
    if replicas is not None:
        body.replicas(replicas)
    if network is not None:
        body.spec(networkConfig=network)
    return body.build()


def make_leader(*, index: int = 1, key: str = "old4", tpus: int = 0) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "l", "image": "leader:1"}
    if tpus:
        container["resources"] = {"limits": {"google.com/tpu": str(tpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"sample-{index}",
            "namespace": "ns",
            "uid": POD_UID,
            "labels": {
                P + "name": "sample",
                P + "worker-index": "0",
                P + "group-index": str(index),
                P + "group-key": GROUP_KEY,
                P + "template-revision-hash": key,
            },
        },
        "spec": {"nodeName": "node-a", "containers": [container]},
    }


# --------------------------------------------------------------------------- leader StatefulSet


def test_leader_sts_from_worker_template_exact() -> None:
    assert leader_statefulset(make_lws(), "k1", 0, 3) == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "sample",
            "namespace": "ns",
            "labels": {"team": "ml", P + "name": "sample", P + "template-revision-hash": "k1"},
            "annotations": {"owner": "alice", P + "replicas": "3"},
            "ownerReferences": [LWS_OWNER],
        },
        "spec": {
            "replicas": 3,
            "serviceName": "sample",
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {P + "name": "sample", P + "worker-index": "0"}},
            "updateStrategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"partition": 0, "maxUnavailable": 1},
            },
            "template": {
                "metadata": {
                    "labels": {
                        P + "worker-index": "0",
                        P + "name": "sample",
                        P + "template-revision-hash": "k1",
                    },
                    "annotations": {P + "size": "4"},
                },
                "spec": {"containers": [{"name": "w", "image": "worker:1"}]},
            },
        },
    }


def test_leader_sts_prefers_leader_template_and_keeps_user_metadata() -> None:
    sts = leader_statefulset(make_lws(leader=copy.deepcopy(LEADER)), "k1", 2, 5)
    assert sts["spec"]["template"] == {
        "metadata": {
            "labels": {
                "role": "leader",
                P + "worker-index": "0",
                P + "name": "sample",
                P + "template-revision-hash": "k1",
            },
            "annotations": {"note": "kept", P + "size": "4"},
        },
        "spec": {"containers": [{"name": "l", "image": "leader:1"}]},
    }
    assert sts["spec"]["replicas"] == 5
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["partition"] == 2
    # The replicas annotation is spec.replicas, not the surged StatefulSet replicas.
    assert sts["metadata"]["annotations"][P + "replicas"] == "3"


def test_user_template_labels_cannot_override_ours() -> None:
    leader = {"metadata": {"labels": {P + "worker-index": "7", P + "name": "x"},
                           "annotations": {P + "size": "99"}},
              "spec": {"containers": []}}
    template = leader_statefulset(make_lws(leader=leader), "k1", 0, 3)["spec"]["template"]
    assert template["metadata"]["labels"][P + "worker-index"] == "0"
    assert template["metadata"]["labels"][P + "name"] == "sample"
    assert template["metadata"]["annotations"][P + "size"] == "4"


@pytest.mark.parametrize(
    ("lws", "expected"),
    [
        pytest.param(make_lws(size=1), {P + "size": "1"}, id="size-1"),
        pytest.param(
            make_lws(network={"subdomainPolicy": "UniquePerReplica"}),
            {P + "size": "4", P + "subdomainPolicy": "UniquePerReplica"},
            id="unique-per-replica",
        ),
        pytest.param(
            make_lws(network={"subdomainPolicy": "Shared"}), {P + "size": "4"}, id="shared"
        ),
        pytest.param(
            make_lws(size=5, subGroupPolicy={"subGroupPolicyType": "LeaderWorker",
                                             "subGroupSize": 2}),
            {P + "size": "5", P + "subgroup-policy-type": "LeaderWorker",
             P + "subgroup-size": "2"},
            id="subgroup-leader-worker",
        ),
        pytest.param(
            make_lws(size=9, subGroupPolicy={"subGroupPolicyType": "LeaderExcluded",
                                             "subGroupSize": 8}),
            {P + "size": "9", P + "subgroup-policy-type": "LeaderExcluded",
             P + "subgroup-size": "8"},
            id="subgroup-leader-excluded",
        ),
        pytest.param(
            make_lws(size=8, subGroupPolicy={"subGroupSize": 4}),
            {P + "size": "8", P + "subgroup-policy-type": "LeaderWorker",
             P + "subgroup-size": "4"},
            id="subgroup-type-unset-gets-crd-default",
        ),
        pytest.param(
            make_lws(annotations={P + "exclusive-topology": "topology.kubernetes.io/zone",
                                  P + "subgroup-exclusive-topology": "rack"}),
            {P + "size": "4", P + "exclusive-topology": "topology.kubernetes.io/zone"},
            id="exclusive-topology-no-subgroups",
        ),
        pytest.param(
            make_lws(size=8, subGroupPolicy={"subGroupPolicyType": "LeaderWorker",
                                             "subGroupSize": 4},
                     annotations={P + "exclusive-topology": "zone",
                                  P + "subgroup-exclusive-topology": "rack"}),
            {P + "size": "8", P + "exclusive-topology": "zone",
             P + "subgroup-policy-type": "LeaderWorker", P + "subgroup-size": "4",
             P + "subgroup-exclusive-topology": "rack"},
            id="exclusive-and-subgroup-exclusive",
        ),
        pytest.param(
            make_lws(annotations={P + "exclusive-topology": ""}), {P + "size": "4"},
            id="empty-exclusive-topology-not-copied",
        ),
    ],
)
def test_leader_template_annotations(lws: dict[str, Any], expected: dict[str, str]) -> None:
    sts = leader_statefulset(lws, "k1", 0, 3)
    assert sts["spec"]["template"]["metadata"]["annotations"] == expected
    # The service name stays <lws> under every policy.
    assert sts["spec"]["serviceName"] == "sample"


def test_lws_annotations_are_copied_to_the_leader_sts() -> None:
    lws = make_lws(annotations={P + "exclusive-topology": "zone", "x": "y"})
    assert leader_statefulset(lws, "k1", 0, 3)["metadata"]["annotations"] == {
        P + "exclusive-topology": "zone", "x": "y", P + "replicas": "3",
    }


def test_the_controllers_bookkeeping_annotations_are_not_copied() -> None:
    lws = make_lws(annotations={"x": "y", P + "group-restart-counts": '{"k1/0":1}',
                                P + "group-restart-counted-leaders": '{"k1/0":"uid"}'})
    assert leader_statefulset(lws, "k1", 0, 3)["metadata"]["annotations"] == {
        "x": "y", P + "replicas": "3"}


@pytest.mark.parametrize(
    ("replicas", "max_unavailable", "max_surge", "expected"),
    [
        (4, 1, 0, 1),
        (4, 2, 2, 4),
        (4, 0, 1, 1),
        (4, 10, 0, 10),
        (2, 1, 4, 3),  # surge capped at replicas
        (4, "50%", "25%", 3),  # 2 + 1
        (3, "50%", "50%", 3),  # floor(1.5) + ceil(1.5)
        (5, "0%", "1%", 1),  # ceil(0.05) = 1
        (5, "0%", "0%", 1),  # at least 1
        (10, "25%", "100%", 12),  # floor(2.5) + min(10, 10)
        (0, 1, 0, 1),
        (0, "50%", "50%", 1),
        (None, "100%", 0, 1),  # replicas defaults to 1
    ],
)
def test_leader_sts_max_unavailable(
    replicas: int | None, max_unavailable: Any, max_surge: Any, expected: int
) -> None:
    lws = make_lws(replicas=replicas, rolling={"partition": 0, "maxUnavailable": max_unavailable,
                                               "maxSurge": max_surge})
    assert leader_max_unavailable(lws) == expected
    sts = leader_statefulset(lws, "k", 0, 0)
    assert sts["spec"]["updateStrategy"]["rollingUpdate"]["maxUnavailable"] == expected


def test_rolling_update_defaults_when_configuration_is_absent() -> None:
    lws = make_lws()
    del lws["spec"]["rolloutStrategy"]
    sts = leader_statefulset(lws, "k", 0, 3)
    assert sts["spec"]["updateStrategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"partition": 0, "maxUnavailable": 1},
    }


@pytest.mark.parametrize("bad", ["abc", "50", "-1%", -1, 1.5])
def test_invalid_max_unavailable_is_rejected(bad: Any) -> None:
    lws = make_lws(rolling={"maxUnavailable": bad, "maxSurge": 0})
    with pytest.raises(ValueError, match="maxUnavailable"):
        leader_statefulset(lws, "k", 0, 3)


def test_leader_sts_replicas_zero() -> None:
    sts = leader_statefulset(make_lws(replicas=0), "k", 0, 0)
    assert sts["spec"]["replicas"] == 0
    assert sts["spec"]["updateStrategy"]["rollingUpdate"] == {"partition": 0,
                                                              "maxUnavailable": 1}
    assert sts["metadata"]["annotations"][P + "replicas"] == "0"


def test_leader_sts_rejects_negative_numbers_and_missing_uid() -> None:
    with pytest.raises(ValueError, match="negative"):
        leader_statefulset(make_lws(), "k", -1, 3)
    lws = make_lws()
    del lws["metadata"]["uid"]
    with pytest.raises(ValueError, match="uid"):
        leader_statefulset(lws, "k", 0, 3)


# --------------------------------------------------------------------------- storage

VCTS = [
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "model-cache", "labels": {"drop": "me"},
                     "annotations": {"drop": "me"}, "namespace": "elsewhere"},
        "spec": {
            "storageClassName": "standard-rwo",
            "accessModes": ["ReadWriteOnce"],
            "volumeMode": "Filesystem",
            "resources": {"requests": {"storage": "100Gi"}, "limits": {"storage": "200Gi"}},
            "selector": {"matchLabels": {"drop": "me"}},
            "dataSource": {"kind": "VolumeSnapshot", "name": "snap"},
            "volumeName": "pv-1",
        },
        "status": {"phase": "Pending"},
    },
    {"metadata": {"name": "scratch"}, "spec": {"accessModes": ["ReadWriteOnce"],
                                               "storageClassName": "",
                                               "resources": {"requests": {"storage": "1Gi"}}}},
    {"metadata": {"name": "bare"}, "spec": {}},
]
PROJECTED = [
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "model-cache", "namespace": "ns"},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "standard-rwo",
            "volumeMode": "Filesystem",
            "resources": {"limits": {"storage": "200Gi"}, "requests": {"storage": "100Gi"}},
        },
    },
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "scratch", "namespace": "ns"},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "resources": {"requests": {"storage": "1Gi"}}},
    },
    {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": "bare", "namespace": "ns"},
        "spec": {},
    },
]
RETENTION = {"whenDeleted": "Delete", "whenScaled": "Retain"}


def test_volume_claim_templates_projection() -> None:
    lws = make_lws(volumeClaimTemplates=copy.deepcopy(VCTS))
    assert volume_claim_templates(lws) == PROJECTED
    assert volume_claim_templates(make_lws()) == []


def test_storage_on_both_statefulsets() -> None:
    lws = make_lws(volumeClaimTemplates=copy.deepcopy(VCTS),
                   persistentVolumeClaimRetentionPolicy=dict(RETENTION))
    leader = leader_statefulset(lws, "k", 0, 3)["spec"]
    worker = worker_statefulset(lws, lws, make_leader(), None)["spec"]
    for spec in (leader, worker):
        assert spec["volumeClaimTemplates"] == PROJECTED
        assert spec["persistentVolumeClaimRetentionPolicy"] == RETENTION


def test_no_storage_fields_without_claims() -> None:
    lws = make_lws(volumeClaimTemplates=[])
    for spec in (leader_statefulset(lws, "k", 0, 3)["spec"],
                 worker_statefulset(lws, lws, make_leader(), None)["spec"]):
        assert "volumeClaimTemplates" not in spec
        assert "persistentVolumeClaimRetentionPolicy" not in spec


# --------------------------------------------------------------------------- worker StatefulSet

WORKER_TEMPLATE_LABELS = {
    P + "group-index": "1",
    P + "name": "sample",
    P + "group-key": GROUP_KEY,
    P + "template-revision-hash": "old4",
}


def test_worker_sts_exact() -> None:
    lws = make_lws()
    assert worker_statefulset(lws, lws, make_leader(), None) == {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": "sample-1",
            "namespace": "ns",
            "labels": {"team": "ml", **WORKER_TEMPLATE_LABELS},
            "annotations": {"owner": "alice"},
            "ownerReferences": [POD_OWNER],
        },
        "spec": {
            "replicas": 3,
            "serviceName": "sample",
            "podManagementPolicy": "Parallel",
            "ordinals": {"start": 1},
            "selector": {"matchLabels": {
                P + "group-index": "1", P + "name": "sample", P + "group-key": GROUP_KEY,
            }},
            "template": {
                "metadata": {
                    "labels": WORKER_TEMPLATE_LABELS,
                    "annotations": {P + "size": "4", P + "leader-name": "sample-1"},
                },
                "spec": {"containers": [{"name": "w", "image": "worker:1"}]},
            },
        },
    }


def test_worker_sts_uses_worker_template_even_with_a_leader_template() -> None:
    worker = {"metadata": {"labels": {"role": "worker"}},
              "spec": {"containers": [{"name": "w", "image": "worker:2"}]}}
    lws = make_lws(leader=copy.deepcopy(LEADER), worker=worker)
    template = worker_statefulset(lws, lws, make_leader(), None)["spec"]["template"]
    assert template["metadata"]["labels"] == {"role": "worker", **WORKER_TEMPLATE_LABELS}
    assert template["spec"] == {"containers": [{"name": "w", "image": "worker:2"}]}


def test_worker_sts_unique_per_replica_service_name() -> None:
    lws = make_lws(network={"subdomainPolicy": "UniquePerReplica"})
    sts = worker_statefulset(lws, lws, make_leader(), None)
    assert sts["spec"]["serviceName"] == "sample-1"
    # No subdomainPolicy annotation on workers: the webhook reads it from the leader only.
    assert P + "subdomainPolicy" not in sts["spec"]["template"]["metadata"]["annotations"]


@pytest.mark.parametrize(
    ("lws", "expected"),
    [
        pytest.param(
            make_lws(size=5, subGroupPolicy={"subGroupPolicyType": "LeaderWorker",
                                             "subGroupSize": 2}),
            {P + "subgroup-policy-type": "LeaderWorker", P + "subgroup-size": "2"},
            id="leader-worker",
        ),
        pytest.param(
            make_lws(size=9, subGroupPolicy={"subGroupPolicyType": "LeaderExcluded",
                                             "subGroupSize": 8},
                     annotations={P + "subgroup-exclusive-topology": "rack"}),
            {P + "subgroup-policy-type": "LeaderExcluded", P + "subgroup-size": "8",
             P + "subgroup-exclusive-topology": "rack"},
            id="leader-excluded-with-topology",
        ),
        pytest.param(
            make_lws(size=8, subGroupPolicy={"subGroupSize": 4}),
            {P + "subgroup-size": "4"},
            id="type-unset-not-written-for-workers",
        ),
        pytest.param(
            make_lws(annotations={P + "subgroup-exclusive-topology": "rack"}), {},
            id="subgroup-topology-without-policy",
        ),
    ],
)
def test_worker_subgroup_annotations(lws: dict[str, Any], expected: dict[str, str]) -> None:
    annotations = worker_statefulset(lws, lws, make_leader(), None)["spec"]["template"][
        "metadata"]["annotations"]
    size = str(lws["spec"]["leaderWorkerTemplate"]["size"])
    assert annotations == {P + "size": size, P + "leader-name": "sample-1", **expected}


def test_worker_sts_tpu_leader() -> None:
    lws = make_lws()
    with_tpus = worker_statefulset(lws, lws, make_leader(tpus=4), None)
    assert with_tpus["spec"]["template"]["metadata"]["annotations"] == {
        P + "size": "4", P + "leader-name": "sample-1", P + "leader-requests-tpus": "true",
    }
    zero = worker_statefulset(lws, lws, make_leader(tpus=0), None)
    assert P + "leader-requests-tpus" not in zero["spec"]["template"]["metadata"]["annotations"]


EXCLUSIVE = {P + "exclusive-topology": "topology.kubernetes.io/zone"}
NODE_LABELS = {"topology.kubernetes.io/zone": "zone-b", "kubernetes.io/hostname": "node-a"}


def test_worker_sts_exclusive_topology_pins_to_leader_domain() -> None:
    worker = {"spec": {"nodeSelector": {"pool": "gpu"},
                       "containers": [{"name": "w", "image": "worker:1"}]}}
    lws = make_lws(worker=worker, annotations=dict(EXCLUSIVE))
    assert exclusive_topology_key(lws) == "topology.kubernetes.io/zone"
    template = worker_statefulset(lws, lws, make_leader(), NODE_LABELS)["spec"]["template"]
    assert template == {
        "metadata": {
            "labels": WORKER_TEMPLATE_LABELS,
            "annotations": {P + "size": "4", P + "leader-name": "sample-1",
                            P + "exclusive-topology": "topology.kubernetes.io/zone"},
        },
        "spec": {
            "nodeSelector": {"pool": "gpu", "topology.kubernetes.io/zone": "zone-b"},
            "containers": [{"name": "w", "image": "worker:1"}],
        },
    }


def test_worker_sts_exclusive_topology_errors() -> None:
    lws = make_lws(annotations=dict(EXCLUSIVE))
    with pytest.raises(ValueError, match=r"^node does not have topology label: "
                                         r"topology\.kubernetes\.io/zone$"):
        worker_statefulset(lws, lws, make_leader(), {"kubernetes.io/hostname": "node-a"})
    with pytest.raises(ValueError, match="not scheduled"):
        worker_statefulset(lws, lws, make_leader(), None)


def test_worker_sts_empty_exclusive_topology_pins_nothing() -> None:
    lws = make_lws(annotations={P + "exclusive-topology": ""})
    assert exclusive_topology_key(lws) is None
    sts = worker_statefulset(lws, lws, make_leader(), None)
    assert "nodeSelector" not in sts["spec"]["template"]["spec"]


def test_worker_sts_topology_and_metadata_come_from_the_live_lws() -> None:
    revision = make_lws(annotations={"old": "annotation"})
    revision["metadata"]["labels"] = {"old": "label"}
    live = make_lws(annotations=dict(EXCLUSIVE))
    sts = worker_statefulset(revision, live, make_leader(), NODE_LABELS)
    assert sts["metadata"]["annotations"] == EXCLUSIVE
    assert sts["metadata"]["labels"] == {"team": "ml", **WORKER_TEMPLATE_LABELS}
    assert sts["spec"]["template"]["spec"]["nodeSelector"] == {
        "topology.kubernetes.io/zone": "zone-b"}


def test_old_revision_rebuild_keeps_old_size_and_template() -> None:
    """Upstream's test "Not updated worker gets recreated with old size": size moved 4 -> 2."""
    old = make_lws(size=4, network={"subdomainPolicy": "UniquePerReplica"},
                   subGroupPolicy={"subGroupPolicyType": "LeaderWorker", "subGroupSize": 2})
    stored = revision_patch(old)
    live = make_lws(size=2, network={"subdomainPolicy": "Shared"},
                    worker={"spec": {"containers": [{"name": "w", "image": "worker:2"}]}},
                    subGroupPolicy={"subGroupPolicyType": "LeaderWorker", "subGroupSize": 1})
    rebuilt = apply_revision(live, stored)
    sts = worker_statefulset(rebuilt, live, make_leader(index=0, key="old4"), None)
    assert sts["metadata"]["name"] == "sample-0"
    assert sts["spec"]["replicas"] == 3
    assert sts["spec"]["serviceName"] == "sample-0"
    assert sts["spec"]["template"]["metadata"] == {
        "labels": {P + "group-index": "0", P + "name": "sample", P + "group-key": GROUP_KEY,
                   P + "template-revision-hash": "old4"},
        "annotations": {P + "size": "4", P + "leader-name": "sample-0",
                        P + "subgroup-policy-type": "LeaderWorker", P + "subgroup-size": "2"},
    }
    assert sts["spec"]["template"]["spec"] == {
        "containers": [{"name": "w", "image": "worker:1"}]}
    # The current revision builds the new shape.
    current = worker_statefulset(live, live, make_leader(index=0, key="new2"), None)
    assert current["spec"]["replicas"] == 1
    assert current["spec"]["serviceName"] == "sample"
    assert current["spec"]["template"]["metadata"]["annotations"][P + "size"] == "2"


def test_worker_sts_revision_of_size_one_has_no_workers() -> None:
    lws = make_lws(size=1)
    assert worker_statefulset(lws, lws, make_leader(), None)["spec"]["replicas"] == 0


@pytest.mark.parametrize("label", ["group-index", "group-key", "template-revision-hash"])
def test_worker_sts_requires_leader_labels(label: str) -> None:
    leader = make_leader()
    del leader["metadata"]["labels"][P + label]
    lws = make_lws()
    with pytest.raises(ValueError, match=f"leader pod sample-1 has no {P}{label} label"):
        worker_statefulset(lws, lws, leader, None)


def test_worker_sts_requires_leader_uid() -> None:
    leader = make_leader()
    del leader["metadata"]["uid"]
    lws = make_lws()
    with pytest.raises(ValueError, match="uid"):
        worker_statefulset(lws, lws, leader, None)


# --------------------------------------------------------------------------- purity

def _rich_lws() -> dict[str, Any]:
    return make_lws(
        leader=copy.deepcopy(LEADER),
        worker={"metadata": {"labels": {"role": "w"}, "annotations": {"a": "b"}},
                "spec": {"nodeSelector": {"pool": "gpu"},
                         "containers": [{"name": "w", "image": "worker:1"}]}},
        annotations={**EXCLUSIVE, P + "subgroup-exclusive-topology": "rack"},
        network={"subdomainPolicy": "UniquePerReplica"},
        rolling={"partition": 1, "maxUnavailable": "50%", "maxSurge": "50%"},
        subGroupPolicy={"subGroupPolicyType": "LeaderWorker", "subGroupSize": 2},
        volumeClaimTemplates=copy.deepcopy(VCTS),
        persistentVolumeClaimRetentionPolicy=dict(RETENTION),
    )


def test_inputs_are_never_modified_and_outputs_are_json() -> None:
    lws, leader, node = _rich_lws(), make_leader(tpus=4), dict(NODE_LABELS)
    before = copy.deepcopy((lws, leader, node))
    leader_sts = leader_statefulset(lws, "k", 1, 4)
    worker_sts = worker_statefulset(lws, lws, leader, node)
    assert (lws, leader, node) == before
    for built in (leader_sts, worker_sts):
        assert json.loads(json.dumps(built)) == built
    # Outputs share no mutable state with the inputs.
    leader_sts["spec"]["template"]["metadata"]["labels"]["x"] = "y"
    leader_sts["spec"]["template"]["spec"]["containers"][0]["image"] = "mutated"
    worker_sts["spec"]["template"]["spec"]["nodeSelector"]["x"] = "y"
    worker_sts["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["x"] = "1"
    worker_sts["metadata"]["labels"]["x"] = "y"
    assert (lws, leader, node) == before


def test_builders_are_deterministic() -> None:
    lws = _rich_lws()
    assert leader_statefulset(lws, "k", 1, 4) == leader_statefulset(copy.deepcopy(lws), "k", 1, 4)
    assert worker_statefulset(lws, lws, make_leader(), NODE_LABELS) == worker_statefulset(
        copy.deepcopy(lws), copy.deepcopy(lws), make_leader(), dict(NODE_LABELS))
