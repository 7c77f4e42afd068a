"""The pod admission mutation end to end (upstream's pod_webhook.go and the
"test defaulting" table of its test/integration/webhooks/pod_test.go)."""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest

from lws_operator.logic.mutation.pod import PodRejected, mutate_pod
from tests.harness.pod_bodies import (
    GROUP_INDEX,
    LEADER_NAME,
    LWS_ENV_NAMES,
    NAME,
    SIZE,
    WORKER_INDEX,
    P,
    container,
    hosts,
    leader,
    pod,
    worker,
)

GROUP_KEY = P + "group-key"
SUBGROUP_INDEX = P + "subgroup-index"
SUBGROUP_KEY = P + "subgroup-key"
REVISION = P + "template-revision-hash"
EXCLUSIVE = P + "exclusive-topology"
SUBGROUP_EXCLUSIVE = P + "subgroup-exclusive-topology"
SUBGROUP_SIZE = P + "subgroup-size"
SUBGROUP_POLICY = P + "subgroup-policy-type"
SUBDOMAIN_POLICY = P + "subdomainPolicy"
LEADER_TPUS = P + "leader-requests-tpus"
VOLCANO = "scheduling.k8s.io/group-name"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"

# `printf '%s' <text> | sha1sum`, computed outside the code under test.
SHA1 = {
    "default/test-1": "86053e0d1617c866e4570d50f722cfc9c3e5d026",
    "default/test-sample-1": "b072c7f2aec151f513da6ebc6786ff77f0c7bdc4",
    "test-sample-1/0": "095fdab01c4ba6935cf75abe722d8af82c6d9079",
    "test-sample-1/1": "d74e3eec6b977c017bb23a973f4b8bcba97e387b",
    "test-1/1": "6fa5c1d471220852817373612b3482a8c03122f8",
}

TPU_ENV_NAMES = (
    "TPU_WORKER_HOSTNAMES",
    "TPU_WORKER_ID",
    "TPU_NAME",
    "TPU_PROCESS_ADDRESSES",
    "TPU_PROCESS_PORT",
)


def with_tpus(p: dict[str, Any], *, leader_requests: bool = False) -> dict[str, Any]:
    p["spec"]["containers"] = [container(tpu=True)]
    if leader_requests:
        p["metadata"]["annotations"][LEADER_TPUS] = "true"
    return p


def env_of(p: dict[str, Any], index: int = 0, kind: str = "containers") -> dict[str, str]:
    return {e["name"]: e.get("value") for e in p["spec"][kind][index].get("env", [])}


def affinity_pair(key: str, topology: str, label: str) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        {
            "labelSelector": {
                "matchExpressions": [{"key": label, "operator": "In", "values": [key]}]
            },
            "topologyKey": topology,
        },
        {
            "labelSelector": {
                "matchExpressions": [
                    {"key": label, "operator": "Exists"},
                    {"key": label, "operator": "NotIn", "values": [key]},
                ]
            },
            "topologyKey": topology,
        },
    )


# --- exact results --------------------------------------------------------------------------


def test_leader_exact_result() -> None:
    original = pod(
        "test-1",
        {NAME: "test", WORKER_INDEX: "0", REVISION: "abc"},
        {SIZE: "2"},
        containers=[container(env=[{"name": "USER", "value": "x"}])],
    )
    assert mutate_pod(original) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "test-1",
            "namespace": "default",
            "labels": {
                NAME: "test",
                WORKER_INDEX: "0",
                REVISION: "abc",
                GROUP_INDEX: "1",
                GROUP_KEY: SHA1["default/test-1"],
            },
            "annotations": {SIZE: "2"},
        },
        "spec": {
            "subdomain": "default",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "env": [
                        {"name": "LWS_LEADER_ADDRESS", "value": "test-1.default.default"},
                        {"name": "LWS_GROUP_SIZE", "value": "2"},
                        {"name": "LWS_WORKER_INDEX", "value": "0"},
                        {"name": "USER", "value": "x"},
                    ],
                }
            ],
        },
    }


def test_worker_exact_result() -> None:
    original = pod(
        "test-1-1",
        {NAME: "test", GROUP_INDEX: "1", GROUP_KEY: "k", REVISION: "abc"},
        {SIZE: "2", LEADER_NAME: "test-1"},
        subdomain="test",
    )
    assert mutate_pod(original) == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "test-1-1",
            "namespace": "default",
            "labels": {
                NAME: "test",
                GROUP_INDEX: "1",
                GROUP_KEY: "k",
                REVISION: "abc",
                WORKER_INDEX: "1",
            },
            "annotations": {SIZE: "2", LEADER_NAME: "test-1"},
        },
        "spec": {
            "subdomain": "test",
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "env": [
                        {"name": "LWS_LEADER_ADDRESS", "value": "test-1.test.default"},
                        {"name": "LWS_GROUP_SIZE", "value": "2"},
                        {"name": "LWS_WORKER_INDEX", "value": "1"},
                    ],
                }
            ],
        },
    }


# --- upstream's pod_test.go "test defaulting" --------------------------------------------------


def test_not_leaderworkerset_pods_have_no_effect() -> None:
    original = pod("nginx-1", {"app": "nginx"}, {"x": "y"})
    result = mutate_pod(original)
    assert result == original
    assert result is not original


def test_pod_without_labels_has_no_effect() -> None:
    original = {"metadata": {"name": "bare"}, "spec": {"containers": [container()]}}
    assert mutate_pod(original) == original


def test_worker_index_label_is_populated_for_worker_pods() -> None:
    result = mutate_pod(pod("test-1-1", {NAME: "test", GROUP_INDEX: "1"}, {SIZE: "2"}))
    assert result["metadata"]["labels"] == {NAME: "test", WORKER_INDEX: "1", GROUP_INDEX: "1"}


def test_worker_index_label_is_populated_for_leader_pods() -> None:
    result = mutate_pod(pod("test-1", {NAME: "test", WORKER_INDEX: "0"}, {SIZE: "2"}))
    assert result["metadata"]["labels"] == {
        NAME: "test",
        WORKER_INDEX: "0",
        GROUP_INDEX: "1",
        GROUP_KEY: SHA1["default/test-1"],
    }


def test_leader_requesting_tpus_gets_subgroup_labels() -> None:
    p = with_tpus(leader("test-sample-1", "4", subgroup_size="2"))
    labels = mutate_pod(p)["metadata"]["labels"]
    assert labels[SUBGROUP_INDEX] == "0"
    assert labels[SUBGROUP_KEY] == SHA1["test-sample-1/0"]


@pytest.mark.parametrize(
    ("size", "subgroup_size", "name", "leader_tpus", "index"),
    [
        ("4", "2", "test-sample-1-3", True, "1"),
        ("5", "2", "test-sample-1-4", False, "1"),
        ("5", "2", "test-sample-1-2", False, "0"),
        ("9", "8", "test-sample-1-8", False, "0"),
        ("5", "1", "test-sample-1-1", False, "1"),
        ("11", "5", "test-sample-1-6", False, "1"),
    ],
)
def test_worker_subgroup_labels(
    size: str, subgroup_size: str, name: str, leader_tpus: bool, index: str
) -> None:
    p = with_tpus(worker(name, size, subgroup_size=subgroup_size), leader_requests=leader_tpus)
    labels = mutate_pod(p)["metadata"]["labels"]
    assert labels[SUBGROUP_INDEX] == index
    expected_key = {"0": SHA1["test-sample-1/0"], "1": SHA1["test-sample-1/1"]}[index]
    assert labels[SUBGROUP_KEY] == expected_key


def test_pod_requesting_tpus_outside_lws_gets_no_tpu_env() -> None:
    original = pod("test-sample-1", {"app": "x"}, {SIZE: "5"}, containers=[container(tpu=True)])
    assert mutate_pod(original) == original


@pytest.mark.parametrize(
    "p",
    [
        pytest.param(leader("test-sample-1", "5"), id="leader"),
        pytest.param(worker("test-sample-1-1", "5"), id="worker"),
    ],
)
def test_pod_not_requesting_tpus_gets_only_lws_env(p: dict[str, Any]) -> None:
    assert list(env_of(mutate_pod(p))) == list(LWS_ENV_NAMES)


L = "test-sample-1"


@pytest.mark.parametrize(
    ("p", "expected_hosts", "expected_id"),
    [
        pytest.param(
            with_tpus(leader(L, "5")),
            hosts(L, f"{L}-1", f"{L}-2", f"{L}-3", f"{L}-4"),
            "0",
            id="leader size 5",
        ),
        pytest.param(
            with_tpus(leader(L, "5", subgroup_size="5")),
            hosts(L, f"{L}-1", f"{L}-2", f"{L}-3", f"{L}-4"),
            "0",
            id="leader size 5 subgroup size 5",
        ),
        pytest.param(
            with_tpus(worker(f"{L}-3", "5"), leader_requests=True),
            hosts(L, f"{L}-1", f"{L}-2", f"{L}-3", f"{L}-4"),
            "3",
            id="worker, leader too",
        ),
        pytest.param(
            with_tpus(worker(f"{L}-3", "10", subgroup_size="5"), leader_requests=True),
            hosts(L, f"{L}-1", f"{L}-2", f"{L}-3", f"{L}-4"),
            "3",
            id="worker with subgroups, leader too: size 10 sgs 5 w 3",
        ),
        pytest.param(
            with_tpus(worker(f"{L}-3", "5")),
            hosts(f"{L}-1", f"{L}-2", f"{L}-3", f"{L}-4"),
            "2",
            id="worker, leader doesn't",
        ),
        pytest.param(
            with_tpus(worker(f"{L}-7", "11", subgroup_size="5")),
            hosts(f"{L}-6", f"{L}-7", f"{L}-8", f"{L}-9", f"{L}-10"),
            "1",
            id="worker with subgroups, leader doesn't: size 11 sgs 5 w 7",
        ),
        pytest.param(
            with_tpus(worker(f"{L}-1", "2"), leader_requests=True),
            hosts(L, f"{L}-1"),
            "1",
            id="worker size 2",
        ),
        pytest.param(with_tpus(leader(L, "1")), hosts(L), "0", id="leader size 1"),
    ],
)
def test_tpu_env(p: dict[str, Any], expected_hosts: str, expected_id: str) -> None:
    env = env_of(mutate_pod(p))
    assert env["TPU_WORKER_HOSTNAMES"] == expected_hosts
    assert env["TPU_WORKER_ID"] == expected_id
    assert env["TPU_NAME"] == L
    assert env["TPU_PROCESS_ADDRESSES"] == ",".join(f"{h}:8476" for h in expected_hosts.split(","))
    assert env["TPU_PROCESS_PORT"] == "8476"


def test_unique_per_replica_leader_gets_its_own_subdomain() -> None:
    p = with_tpus(leader(L, "3", subdomainPolicy="UniquePerReplica"))
    p["spec"]["subdomain"] = "test-sample"
    p["metadata"]["namespace"] = "ns1"
    result = mutate_pod(p)
    assert result["spec"]["subdomain"] == L
    env = env_of(result)
    assert env["TPU_WORKER_HOSTNAMES"] == hosts(L, f"{L}-1", f"{L}-2", sub=L)
    assert env["LWS_LEADER_ADDRESS"] == "test-sample-1.test-sample-1.ns1"


def test_shared_policy_keeps_the_statefulset_subdomain() -> None:
    p = leader(L, "3", subdomainPolicy="Shared")
    p["spec"]["subdomain"] = "test-sample"
    assert mutate_pod(p)["spec"]["subdomain"] == "test-sample"


def test_multiple_containers_only_some_requesting_tpus() -> None:
    p = leader(L, "1")
    p["spec"]["containers"] = [container("plain"), container("tpu", tpu=True)]
    result = mutate_pod(p)
    assert list(env_of(result, 0)) == list(LWS_ENV_NAMES)
    tpu_env = env_of(result, 1)
    assert list(tpu_env) == [*LWS_ENV_NAMES, *TPU_ENV_NAMES]
    assert tpu_env["TPU_WORKER_HOSTNAMES"] == hosts(L)


def test_leader_with_exclusive_placement_gets_group_affinity() -> None:
    result = mutate_pod(leader("test-1", "2", exclusive_topology="topologyKey"))
    key = SHA1["default/test-1"]
    aff, anti = affinity_pair(key, "topologyKey", GROUP_KEY)
    assert result["spec"]["affinity"] == {
        "podAffinity": {REQUIRED: [aff]},
        "podAntiAffinity": {REQUIRED: [anti]},
    }


def test_leader_with_group_and_subgroup_exclusive_placement_gets_both() -> None:
    p = leader(
        L,
        "4",
        exclusive_topology="topologyKey",
        subgroup_size="2",
        subgroup_exclusive_topology="subTopologyKey",
    )
    result = mutate_pod(p)
    group_aff, group_anti = affinity_pair(SHA1["default/test-sample-1"], "topologyKey", GROUP_KEY)
    sub_aff, sub_anti = affinity_pair(SHA1["test-sample-1/0"], "subTopologyKey", SUBGROUP_KEY)
    assert result["spec"]["affinity"] == {
        "podAffinity": {REQUIRED: [group_aff, sub_aff]},
        "podAntiAffinity": {REQUIRED: [group_anti, sub_anti]},
    }


def test_same_topology_key_for_group_and_subgroup_adds_only_group_terms() -> None:
    """Upstream quirk, kept (its exclusive affinity, pod_webhook.go)."""
    p = leader(
        L, "4", exclusive_topology="zone", subgroup_size="2", subgroup_exclusive_topology="zone"
    )
    result = mutate_pod(p)
    aff, anti = affinity_pair(SHA1["default/test-sample-1"], "zone", GROUP_KEY)
    assert result["spec"]["affinity"] == {
        "podAffinity": {REQUIRED: [aff]},
        "podAntiAffinity": {REQUIRED: [anti]},
    }
    assert result["metadata"]["labels"][SUBGROUP_KEY] == SHA1["test-sample-1/0"]


def test_worker_with_group_and_subgroup_exclusive_placement_gets_only_subgroup_terms() -> None:
    p = worker(
        f"{L}-3",
        "4",
        exclusive_topology="topologyKey",
        subgroup_size="2",
        subgroup_exclusive_topology="subTopologyKey",
    )
    result = mutate_pod(p)
    aff, anti = affinity_pair(SHA1["test-sample-1/1"], "subTopologyKey", SUBGROUP_KEY)
    assert result["spec"]["affinity"] == {
        "podAffinity": {REQUIRED: [aff]},
        "podAntiAffinity": {REQUIRED: [anti]},
    }


def test_leader_without_exclusive_placement_gets_no_affinity() -> None:
    assert "affinity" not in mutate_pod(leader("test-1", "2"))["spec"]


def test_leader_with_exclusive_placement_does_not_reapply_terms() -> None:
    key = SHA1["default/test-1"]
    aff, anti = affinity_pair(key, "topologyKey", GROUP_KEY)
    existing = {"podAffinity": {REQUIRED: [aff]}, "podAntiAffinity": {REQUIRED: [anti]}}
    p = leader("test-1", "2", exclusive_topology="topologyKey")
    p["spec"]["affinity"] = copy.deepcopy(existing)
    assert mutate_pod(p)["spec"]["affinity"] == existing


def test_leader_with_exclusive_placement_keeps_other_affinity_terms_first() -> None:
    user_term = {"labelSelector": {"matchLabels": {"app": "x"}}, "topologyKey": "hostname"}
    p = leader("test-1", "2", exclusive_topology="topologyKey")
    p["spec"]["affinity"] = {
        "podAffinity": {REQUIRED: [user_term]},
        "podAntiAffinity": {REQUIRED: [user_term]},
    }
    aff, anti = affinity_pair(SHA1["default/test-1"], "topologyKey", GROUP_KEY)
    assert mutate_pod(p)["spec"]["affinity"] == {
        "podAffinity": {REQUIRED: [user_term, aff]},
        "podAntiAffinity": {REQUIRED: [user_term, anti]},
    }


def test_leader_address_is_the_first_env_var_of_every_container() -> None:
    p = worker("test-sample-1-1", "2")
    p["metadata"]["namespace"] = "ns1"
    p["spec"]["subdomain"] = "test-sample"
    p["spec"]["containers"] = [
        container("a", env=[{"name": "USER", "value": "1"}]),
        container("b", env=[{"name": "LWS_GROUP_SIZE", "value": "99"}, {"name": "X"}]),
    ]
    p["spec"]["initContainers"] = [container("init")]
    result = mutate_pod(p)
    lws = [
        {"name": "LWS_LEADER_ADDRESS", "value": "test-sample-1.test-sample.ns1"},
        {"name": "LWS_GROUP_SIZE", "value": "2"},
        {"name": "LWS_WORKER_INDEX", "value": "1"},
    ]
    assert result["spec"]["containers"][0]["env"] == [*lws, {"name": "USER", "value": "1"}]
    assert result["spec"]["containers"][1]["env"] == [*lws, {"name": "X"}]
    assert result["spec"]["initContainers"][0]["env"] == lws


def test_tpu_variables_follow_user_variables() -> None:
    p = with_tpus(leader(L, "1"))
    p["spec"]["containers"][0]["env"] = [
        {"name": "USER", "value": "1"},
        {"name": "LWS_WORKER_INDEX", "value": "7"},
    ]
    names = [e["name"] for e in mutate_pod(p)["spec"]["containers"][0]["env"]]
    assert names == [*LWS_ENV_NAMES, "USER", *TPU_ENV_NAMES]


def test_volcano_adds_the_pod_group_annotation() -> None:
    p = pod("test-pod-0", {NAME: "test", GROUP_INDEX: "0", REVISION: "1"}, {SIZE: "1"})
    result = mutate_pod(p, scheduler_provider="volcano")
    assert result["metadata"]["annotations"] == {SIZE: "1", VOLCANO: "test-0-1"}
    # Without a worker-index label the pod is a worker; its ordinal 0 becomes the label.
    assert result["metadata"]["labels"][WORKER_INDEX] == "0"


def test_volcano_annotates_leaders_too() -> None:
    p = leader("test-3", "2")
    p["metadata"]["labels"][REVISION] = "rev"
    assert mutate_pod(p, scheduler_provider="volcano")["metadata"]["annotations"][VOLCANO] == (
        "test-3-rev"
    )


def test_no_pod_group_annotation_without_a_scheduler_provider() -> None:
    p = pod("test-pod-0", {NAME: "test", GROUP_INDEX: "0", REVISION: "1"}, {SIZE: "1"})
    assert VOLCANO not in mutate_pod(p)["metadata"]["annotations"]


def test_unknown_scheduler_provider_is_a_configuration_error() -> None:
    with pytest.raises(ValueError, match="unsupported scheduler provider 'kueue'") as caught:
        mutate_pod(leader("test-1"), scheduler_provider="kueue")
    assert not isinstance(caught.value, PodRejected)


# --- leader and worker details --------------------------------------------------------------


def test_leader_keeps_existing_group_index_and_key_and_places_by_the_existing_key() -> None:
    p = leader("test-1", "2", exclusive_topology="zone")
    p["metadata"]["labels"].update({GROUP_INDEX: "7", GROUP_KEY: "given"})
    result = mutate_pod(p)
    assert result["metadata"]["labels"][GROUP_INDEX] == "7"
    assert result["metadata"]["labels"][GROUP_KEY] == "given"
    aff, _ = affinity_pair("given", "zone", GROUP_KEY)
    assert result["spec"]["affinity"]["podAffinity"][REQUIRED] == [aff]
    assert env_of(result)["LWS_LEADER_ADDRESS"] == "test-7.default.default"


def test_leader_excluded_leader_gets_no_subgroup_labels() -> None:
    p = leader(L, "5", subgroup_size="2", subgroup_policy_type="LeaderExcluded")
    labels = mutate_pod(p)["metadata"]["labels"]
    assert SUBGROUP_INDEX not in labels
    assert SUBGROUP_KEY not in labels


def test_leader_with_empty_subgroup_index_label_gets_subgroup_zero() -> None:
    p = leader(L, "4", subgroup_size="2")
    p["metadata"]["labels"][SUBGROUP_INDEX] = ""
    assert mutate_pod(p)["metadata"]["labels"][SUBGROUP_INDEX] == "0"


def test_worker_index_is_always_overwritten_from_the_name() -> None:
    p = worker("test-1-3", "4")
    p["metadata"]["labels"][WORKER_INDEX] = "9"
    assert mutate_pod(p)["metadata"]["labels"][WORKER_INDEX] == "3"


def test_worker_keeps_an_existing_subgroup_index() -> None:
    p = worker("test-1-3", "4", subgroup_size="2")
    p["metadata"]["labels"].update({SUBGROUP_INDEX: "5", SUBGROUP_KEY: "kept"})
    labels = mutate_pod(p)["metadata"]["labels"]
    assert (labels[SUBGROUP_INDEX], labels[SUBGROUP_KEY]) == ("5", "kept")


def test_worker_subgroup_index_truncates_like_go() -> None:
    # A named-like-a-leader pod without worker-index is a worker with ordinal 0: (0-1)/2 is 0.
    p = pod("test-1-0", {NAME: "test", GROUP_INDEX: "1"}, {SIZE: "5", SUBGROUP_SIZE: "2"})
    assert mutate_pod(p)["metadata"]["labels"][SUBGROUP_INDEX] == "0"


def test_worker_without_leader_name_annotation_hashes_an_empty_leader_name() -> None:
    p = pod("test-1-1", {NAME: "test", GROUP_INDEX: "1"}, {SIZE: "4", SUBGROUP_SIZE: "2"})
    # sha1("/0"), computed with sha1sum.
    expected = "a2c99f9038bd0342ef55c7d74df13fa5aee3fd7b"
    assert mutate_pod(p)["metadata"]["labels"][SUBGROUP_KEY] == expected


def test_size_is_parsed_like_go_but_reported_verbatim() -> None:
    p = worker("test-1-1", "+02")
    assert env_of(mutate_pod(p))["LWS_GROUP_SIZE"] == "+02"


def test_leader_ordinal_with_leading_zeros_is_normalised() -> None:
    assert mutate_pod(leader("test-007"))["metadata"]["labels"][GROUP_INDEX] == "7"


# --- rejections -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("p", "message"),
    [
        pytest.param(
            pod("test-1", {NAME: "test", WORKER_INDEX: "0"}, {}),
            "size annotation is unexpectedly missing for pod test-1",
            id="no size",
        ),
        pytest.param(
            pod("test-1", {NAME: "test", WORKER_INDEX: "0"}),
            "size annotation is unexpectedly missing for pod test-1",
            id="no annotations at all",
        ),
        pytest.param(
            pod("test-1", {NAME: "test", WORKER_INDEX: "0"}, {SIZE: "two"}),
            'parsing annotation leaderworkerset.sigs.k8s.io/size="two" for pod test-1: '
            "invalid syntax",
            id="size not an integer",
        ),
        pytest.param(
            pod("test-1", {NAME: "test", WORKER_INDEX: "0"}, {SIZE: "99999999999999999999"}),
            'parsing annotation leaderworkerset.sigs.k8s.io/size="99999999999999999999" for pod '
            "test-1: value out of range",
            id="size out of range",
        ),
        pytest.param(
            leader("leader"), "parsing pod ordinal for pod leader", id="leader without ordinal"
        ),
        pytest.param(
            leader("test-2147483648"),
            "parsing pod ordinal for pod test-2147483648",
            id="leader ordinal beyond int32",
        ),
        pytest.param(
            pod("worker", {NAME: "test", GROUP_INDEX: "1"}, {SIZE: "2"}),
            "parsing pod ordinal for pod worker",
            id="worker without ordinal",
        ),
        pytest.param(
            worker("test-1-1", "4", subgroup_size="two"),
            'parsing annotation leaderworkerset.sigs.k8s.io/subgroup-size="two" for pod '
            "test-1-1: invalid syntax",
            id="worker subgroup size not an integer",
        ),
        pytest.param(
            worker("test-1-1", "4", subgroup_size="0"),
            "annotation leaderworkerset.sigs.k8s.io/subgroup-size must not be 0 for pod test-1-1",
            id="worker subgroup size zero (upstream panics)",
        ),
        pytest.param(
            pod("test-1-1", {NAME: "test"}, {SIZE: "2"}),
            "Failure constructing environment variables, no group index label found for pod "
            "default/test-1-1",
            id="worker without group index",
        ),
        pytest.param(
            pod("test-1-1", {NAME: "test"}, {SIZE: "2"}, namespace=""),
            "Failure constructing environment variables, no group index label found for pod "
            "test-1-1",
            id="worker without group index, no namespace",
        ),
        pytest.param(
            with_tpus(pod("-1", {NAME: "test", GROUP_INDEX: "0"}, {SIZE: "2"})),
            "parsing parent name from pod -1",
            id="TPU worker without parent name",
        ),
        pytest.param(
            with_tpus(leader(L, "5", subgroup_size="2", subgroup_policy_type="LeaderExcluded")),
            "parsing label leaderworkerset.sigs.k8s.io/subgroup-index for pod test-sample-1: "
            "label not found",
            id="LeaderExcluded leader requesting TPUs (upstream quirk)",
        ),
        pytest.param(
            pod(
                "test-1",
                {NAME: "test", WORKER_INDEX: "0"},
                {SIZE: "2"},
                containers=[{"name": "c", "resources": {"limits": {"google.com/tpu": "many"}}}],
            ),
            "invalid google.com/tpu quantity in resources.limits of container c: 'many' is not "
            "a quantity",
            id="invalid TPU quantity",
        ),
    ],
)
def test_rejections(p: dict[str, Any], message: str) -> None:
    before = copy.deepcopy(p)
    with pytest.raises(PodRejected, match=re.escape(message)) as caught:
        mutate_pod(p)
    assert caught.value.message == message
    assert str(caught.value) == message
    assert p == before


def test_pod_rejected_is_a_value_error() -> None:
    assert issubclass(PodRejected, ValueError)


# --- purity and idempotence -----------------------------------------------------------------

IDEMPOTENCE_CASES = [
    pytest.param(leader("test-1", "2"), id="leader"),
    pytest.param(worker("test-1-1", "2"), id="worker"),
    pytest.param(
        leader(
            L,
            "4",
            exclusive_topology="zone",
            subgroup_size="2",
            subgroup_exclusive_topology="rack",
        ),
        id="leader with both placements",
    ),
    pytest.param(
        leader(
            L, "4", exclusive_topology="zone", subgroup_size="2", subgroup_exclusive_topology="zone"
        ),
        id="leader with one topology key for both",
    ),
    pytest.param(
        worker(f"{L}-3", "4", subgroup_size="2", subgroup_exclusive_topology="rack"),
        id="worker with subgroup placement",
    ),
    pytest.param(with_tpus(leader(L, "5")), id="TPU leader"),
    pytest.param(with_tpus(worker(f"{L}-3", "5"), leader_requests=True), id="TPU worker"),
    pytest.param(
        with_tpus(worker(f"{L}-7", "11", subgroup_size="5")), id="TPU worker with subgroups"
    ),
    pytest.param(
        with_tpus(leader(L, "3", subdomainPolicy="UniquePerReplica")), id="UniquePerReplica"
    ),
    pytest.param(
        pod("test-2-1", {NAME: "test", GROUP_INDEX: "2", REVISION: "r"}, {SIZE: "2"}),
        id="volcano worker",
    ),
]


@pytest.mark.parametrize("p", IDEMPOTENCE_CASES)
def test_mutating_twice_changes_nothing(p: dict[str, Any]) -> None:
    once = mutate_pod(p, scheduler_provider="volcano")
    assert mutate_pod(once, scheduler_provider="volcano") == once


def test_a_pod_without_worker_index_named_like_ordinal_zero_is_not_idempotent() -> None:
    """Upstream behaviour, kept: the first pass treats it as a worker and labels it worker-index
    0, which makes the second pass treat it as a leader. StatefulSet-made pods always carry the
    label from their template, so this needs a hand-made pod."""
    once = mutate_pod(pod("test-pod-0", {NAME: "test", GROUP_INDEX: "0"}, {SIZE: "1"}))
    assert GROUP_KEY not in once["metadata"]["labels"]
    assert GROUP_KEY in mutate_pod(once)["metadata"]["labels"]


@pytest.mark.parametrize("p", IDEMPOTENCE_CASES)
def test_input_is_never_modified(p: dict[str, Any]) -> None:
    before = copy.deepcopy(p)
    result = mutate_pod(p, scheduler_provider="volcano")
    assert p == before
    assert result != before
