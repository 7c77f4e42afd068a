"""Headless Service builders and the subdomain-policy decision (upstream's controller_utils.go)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from e2e.harness.builder import LeaderWorkerSet
from lws_operator.logic.objects.owners import controller_reference
from lws_operator.logic.workloads.services import (
    replica_service,
    shared_service,
    subdomain_policy,
    wants_replica_service,
    wants_shared_service,
)

P = "leaderworkerset.sigs.k8s.io/"
UID = "uid-lws"
POD_UID = "uid-pod"


def make_lws(network: dict[str, Any] | None = None) -> dict[str, Any]:
    body = (LeaderWorkerSet("sample", "ns").meta(uid=UID).labels({"team": "ml"})
            .annotations({"a": "b"}).replicas(2).size(2))
    if network is not None:
        body.spec(networkConfig=network)
    return body.build()


def make_leader(index: int = 3) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"sample-{index}",
            "namespace": "ns",
            "uid": POD_UID,
            "labels": {P + "name": "sample", P + "worker-index": "0",
                       P + "group-index": str(index), P + "group-key": "k" * 40},
        },
    }


@pytest.mark.parametrize(
    ("network", "policy", "shared", "per_replica"),
    [
        (None, "Shared", True, False),
        ({}, "Shared", True, False),
        ({"subdomainPolicy": None}, "Shared", True, False),
        ({"subdomainPolicy": "Shared"}, "Shared", True, False),
        ({"subdomainPolicy": "UniquePerReplica"}, "UniquePerReplica", False, True),
    ],
)
def test_policy_decides_which_services(
    network: dict[str, Any] | None, policy: str, shared: bool, per_replica: bool
) -> None:
    lws = make_lws(network)
    assert subdomain_policy(lws) == policy
    assert wants_shared_service(lws) is shared
    assert wants_replica_service(lws) is per_replica


def test_shared_service_exact() -> None:
    assert shared_service(make_lws()) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "sample",
            "namespace": "ns",
            "labels": {P + "name": "sample"},
            "ownerReferences": [{
                "apiVersion": "leaderworkerset.x-k8s.io/v1",
                "kind": "LeaderWorkerSet",
                "name": "sample",
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {P + "name": "sample"},
            "publishNotReadyAddresses": True,
        },
    }


def test_replica_service_exact() -> None:
    lws = make_lws({"subdomainPolicy": "UniquePerReplica"})
    assert replica_service(lws, make_leader(3)) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "sample-3",
            "namespace": "ns",
            "labels": {P + "name": "sample"},
            "ownerReferences": [{
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "sample-3",
                "uid": POD_UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {P + "name": "sample", P + "group-index": "3"},
            "publishNotReadyAddresses": True,
        },
    }


def test_replica_service_for_a_surge_ordinal() -> None:
    service = replica_service(make_lws(), make_leader(6))
    assert service["metadata"]["name"] == "sample-6"
    assert service["spec"]["selector"] == {P + "name": "sample", P + "group-index": "6"}


def test_replica_service_requires_group_index() -> None:
    leader = make_leader()
    del leader["metadata"]["labels"][P + "group-index"]
    with pytest.raises(ValueError, match=f"leader pod sample-3 has no {P}group-index label"):
        replica_service(make_lws(), leader)


@pytest.mark.parametrize("missing", ["name", "uid"])
def test_owner_reference_needs_name_and_uid(missing: str) -> None:
    lws = make_lws()
    del lws["metadata"][missing]
    with pytest.raises(ValueError, match="has no name or uid"):
        controller_reference(lws, "leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet")
    leader = make_leader()
    del leader["metadata"][missing]
    with pytest.raises(ValueError, match="has no name or uid"):
        replica_service(make_lws(), leader)


def test_inputs_untouched_outputs_json_and_independent() -> None:
    lws, leader = make_lws({"subdomainPolicy": "UniquePerReplica"}), make_leader()
    before = copy.deepcopy((lws, leader))
    built = [shared_service(lws), replica_service(lws, leader)]
    assert (lws, leader) == before
    for service in built:
        assert json.loads(json.dumps(service)) == service
        service["metadata"]["labels"]["x"] = "y"
        service["spec"]["selector"]["x"] = "y"
        service["metadata"]["ownerReferences"][0]["name"] = "x"
    assert (lws, leader) == before
