"""Defaulting of LeaderWorkerSets (upstream's Default plus the defaults the LWS docs add)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from e2e.harness.builder import LeaderWorkerSet
from lws_operator.api.defaults import apply_defaults

TEMPLATE_FIELDS = ("size", "restartPolicy", "subGroupPolicy", "restartBackoff", "maxGroupRestarts")


def lws(**spec: Any) -> dict[str, Any]:
    """A set with only ``spec`` given; the fields of ``TEMPLATE_FIELDS`` go into the template."""
    body = LeaderWorkerSet("sample", "default").image("nginx", name="main")
    for key, value in spec.items():
        if key in TEMPLATE_FIELDS:
            body.template(**{key: value})
        else:
            body.spec(**{key: value})
    return body.build()


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


@pytest.mark.parametrize("key", ["rolloutStrategy", "networkConfig", "scheduling"])
@pytest.mark.parametrize("value", ["x", 5, [1, 2], True])
def test_a_value_of_the_wrong_type_is_left_for_the_schema_to_reject(key: str, value: Any) -> None:
    """Defaulting runs before the CRD schema check: replacing ``scheduling: "x"`` with a
    defaulted block would accept (and switch on gang scheduling for) an invalid request.
    Found by the bad-input fuzzing (e2e/chaos/test_fuzz_specs.py)."""
    out = apply_defaults(lws(**{key: value}))
    assert out["spec"][key] == value


@pytest.mark.parametrize("value", ["x", 5, [1], False])
def test_a_rolling_update_configuration_of_the_wrong_type_is_left_alone(value: Any) -> None:
    out = apply_defaults(lws(rolloutStrategy={"type": "RollingUpdate",
                                              "rollingUpdateConfiguration": value}))
    assert out["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == value


@pytest.mark.parametrize("key", ["spec", "leaderWorkerTemplate"])
def test_a_spec_or_template_of_the_wrong_type_is_left_alone(key: str) -> None:
    body = lws()
    if key == "spec":
        body["spec"] = "x"
    else:
        body["spec"]["leaderWorkerTemplate"] = ["x"]
    out = apply_defaults(body)
    if key == "spec":
        assert out == body
    else:
        assert out["spec"]["leaderWorkerTemplate"] == ["x"]
