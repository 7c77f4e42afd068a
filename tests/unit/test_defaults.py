"""Defaulting of LeaderWorkerSets (SPEC 1.10 plus the guide-only defaults)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.api.defaults import apply_defaults


def lws(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "sample", "namespace": "default"},
        "spec": {"leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [
            {"name": "main", "image": "nginx"}]}}}},
    }
    for key, value in spec.items():
        if key in ("size", "restartPolicy", "subGroupPolicy", "restartBackoff",
                   "maxGroupRestarts"):
            body["spec"]["leaderWorkerTemplate"][key] = value
        else:
            body["spec"][key] = value
    return body


def test_minimal_object_gets_every_default() -> None:
    out = apply_defaults(lws())
    spec = out["spec"]
    assert spec["replicas"] == 1
    assert spec["startupPolicy"] == "LeaderCreated"
    assert spec["groupIdentity"] == "Ordinal"
    assert spec["podTerminationPolicy"] == "Sequential"
    assert spec["groupReplacementPolicy"] == "PostTermination"
    assert spec["rolloutStrategy"] == {"type": "RollingUpdate", "rollingUpdateConfiguration": {
        "maxUnavailable": 1, "maxSurge": 0, "partition": 0}}
    assert spec["networkConfig"] == {"subdomainPolicy": "Shared"}
    template = spec["leaderWorkerTemplate"]
    assert template["size"] == 1
    assert template["restartPolicy"] == "RecreateGroupOnPodRestart"
    assert "restartBackoff" not in template
    assert "subGroupPolicy" not in template
    assert "scheduling" not in spec


def test_input_is_not_modified_and_defaulting_is_idempotent() -> None:
    original = lws()
    before = copy.deepcopy(original)
    once = apply_defaults(original)
    assert original == before
    assert apply_defaults(once) == once


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, "RecreateGroupOnPodRestart"),
        ("", "RecreateGroupOnPodRestart"),
        ("Default", "None"),
        ("None", "None"),
        ("RecreateGroupAfterStart", "RecreateGroupAfterStart"),
    ],
)
def test_restart_policy(given: str | None, expected: str) -> None:
    out = apply_defaults(lws(restartPolicy=given))
    assert out["spec"]["leaderWorkerTemplate"]["restartPolicy"] == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({"type": "RollingUpdate"},
         {"type": "RollingUpdate", "rollingUpdateConfiguration": {
             "maxUnavailable": 1, "maxSurge": 0, "partition": 0}}),
        ({"rollingUpdateConfiguration": {"maxSurge": 2}},
         {"type": "RollingUpdate", "rollingUpdateConfiguration": {
             "maxUnavailable": 1, "maxSurge": 2, "partition": 0}}),
        ({"rollingUpdateConfiguration": {"maxUnavailable": 0, "maxSurge": "50%",
                                         "partition": 3}},
         {"type": "RollingUpdate", "rollingUpdateConfiguration": {
             "maxUnavailable": 0, "maxSurge": "50%", "partition": 3}}),
    ],
)
def test_rollout_strategy(given: dict[str, Any], expected: dict[str, Any]) -> None:
    assert apply_defaults(lws(rolloutStrategy=given))["spec"]["rolloutStrategy"] == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (None, {"subdomainPolicy": "Shared"}),
        ({}, {"subdomainPolicy": "Shared"}),
        ({"subdomainPolicy": None}, {"subdomainPolicy": "Shared"}),
        ({"subdomainPolicy": "UniquePerReplica"}, {"subdomainPolicy": "UniquePerReplica"}),
    ],
)
def test_network_config(given: dict[str, Any] | None, expected: dict[str, Any]) -> None:
    assert apply_defaults(lws(networkConfig=given))["spec"]["networkConfig"] == expected


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, {"baseSeconds": 10, "capSeconds": 300}),
        ({"baseSeconds": 2}, {"baseSeconds": 2, "capSeconds": 300}),
        ({"baseSeconds": 0, "capSeconds": 30}, {"baseSeconds": 0, "capSeconds": 30}),
    ],
)
def test_restart_backoff_only_when_present(given: dict[str, Any], expected: dict[str, Any]) -> None:
    out = apply_defaults(lws(restartBackoff=given))
    assert out["spec"]["leaderWorkerTemplate"]["restartBackoff"] == expected


def test_subgroup_policy_type_defaults_to_leader_worker() -> None:
    out = apply_defaults(lws(size=4, subGroupPolicy={"subGroupSize": 2}))
    assert out["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] == {
        "subGroupSize": 2, "subGroupPolicyType": "LeaderWorker"}


@pytest.mark.parametrize(
    ("given", "expected"),
    [
        ({}, {"replica": {"schedulingPolicy": {"gang": {}}}}),
        ({"replica": {}}, {"replica": {"schedulingPolicy": {"gang": {}}}}),
        ({"replica": {"schedulingPolicy": {"basic": {}}}},
         {"replica": {"schedulingPolicy": {"basic": {}}}}),
        ({"schedulingPolicy": {"gang": {}}}, {"schedulingPolicy": {"gang": {}}}),
        ({"disruptionMode": {"all": {}}},
         {"disruptionMode": {"all": {}}, "schedulingPolicy": {"gang": {}}}),
        ({"replica": {"leader": {}}},
         {"replica": {"leader": {"schedulingPolicy": {"gang": {}}}}}),
        ({"replica": {"leader": {}, "worker": {"schedulingPolicy": {"basic": {}}}}},
         {"replica": {"leader": {"schedulingPolicy": {"gang": {}}},
                      "worker": {"schedulingPolicy": {"basic": {}}}}}),
        # Mixed levels are left alone for validation to reject.
        ({"schedulingPolicy": {"gang": {}}, "replica": {}},
         {"schedulingPolicy": {"gang": {}}, "replica": {}}),
    ],
)
def test_scheduling_levels(given: dict[str, Any], expected: dict[str, Any]) -> None:
    assert apply_defaults(lws(scheduling=given))["spec"]["scheduling"] == expected


def test_explicit_values_win() -> None:
    out = apply_defaults(lws(replicas=0, startupPolicy="LeaderReady", groupIdentity="Hash",
                             podTerminationPolicy="Parallel",
                             groupReplacementPolicy="Immediate", size=8))
    spec = out["spec"]
    assert (spec["replicas"], spec["startupPolicy"], spec["groupIdentity"]) == (
        0, "LeaderReady", "Hash")
    assert spec["podTerminationPolicy"] == "Parallel"
    assert spec["groupReplacementPolicy"] == "Immediate"
    assert spec["leaderWorkerTemplate"]["size"] == 8
