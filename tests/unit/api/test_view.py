"""The typed views: each default resolved once, as the API defines it (``api.view``).

Every row reads one field of a LeaderWorkerSet written three ways where it matters: absent, an
explicit zero (or empty), and a value. The logic layer reads through these views only, so a
default written here is the default every decision sees.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from lws_operator.api.constants import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GROUP_INDEX_LABEL,
    RECREATE_GROUP_AFTER_START_ANNOTATION,
    REPLICAS_ANNOTATION,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.api.defaults import apply_defaults
from lws_operator.api.view import (
    LeaderWorkerSetView,
    RestartBackoff,
    RollingUpdate,
    StatefulSetView,
    SubGroupPolicy,
    deleting,
    group_index,
    is_leader,
    lws_view,
    revision_of,
)


def lws(spec: dict[str, Any] | None = None, template: dict[str, Any] | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {**(spec or {})}
    if template is not None:
        body["leaderWorkerTemplate"] = template
    return {"metadata": {"name": "s", "namespace": "ns", "annotations": annotations or {}},
            "spec": body}


def view(**kw: Any) -> LeaderWorkerSetView:
    return lws_view(lws(**kw))


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, 1),  # absent: the API default
    ({"replicas": None}, 1),
    ({"replicas": 0}, 0),  # an explicit 0 is a set scaled to zero, not "unset"
    ({"replicas": 3}, 3),
])
def test_replicas(spec: dict[str, Any], expected: int) -> None:
    assert view(spec=spec).replicas == expected


@pytest.mark.parametrize(("template", "expected"), [
    (None, 1),
    ({}, 1),
    ({"size": None}, 1),
    ({"size": 0}, 1),  # validation rejects 0; read as the default a group has at least
    ({"size": 4}, 4),
])
def test_size(template: dict[str, Any] | None, expected: int) -> None:
    assert view(template=template).size == expected


@pytest.mark.parametrize(("policy", "annotated", "expected", "recreates", "after_start"), [
    (None, False, "RecreateGroupOnPodRestart", True, False),
    ("", False, "RecreateGroupOnPodRestart", True, False),
    ("RecreateGroupOnPodRestart", False, "RecreateGroupOnPodRestart", True, False),
    ("RecreateGroupAfterStart", False, "RecreateGroupAfterStart", True, True),
    ("None", False, "None", False, False),
    ("Default", False, "None", False, False),  # deprecated, stored as None by the webhook
    # The legacy annotation asks for after-start whatever the policy.
    (None, True, "RecreateGroupOnPodRestart", True, True),
    ("None", True, "None", False, True),
])
def test_restart_policy(policy: str | None, annotated: bool, expected: str, recreates: bool,
                        after_start: bool) -> None:
    v = view(template={"restartPolicy": policy} if policy is not None else {},
             annotations={RECREATE_GROUP_AFTER_START_ANNOTATION: ""} if annotated else None)
    assert (v.restart_policy, v.recreates_groups, v.recreate_after_start) == (
        expected, recreates, after_start)


@pytest.mark.parametrize(("config", "expected"), [
    (None, RollingUpdate(1, 0, 0)),
    ({}, RollingUpdate(1, 0, 0)),
    ({"maxUnavailable": 0, "maxSurge": 0, "partition": 0}, RollingUpdate(0, 0, 0)),
    ({"maxUnavailable": None, "maxSurge": None, "partition": None}, RollingUpdate(1, 0, 0)),
    ({"maxUnavailable": "25%", "maxSurge": "50%", "partition": 2},
     RollingUpdate("25%", "50%", 2)),  # percentages kept as written, scaled by the logic
    ({"maxUnavailable": 3}, RollingUpdate(3, 0, 0)),
])
def test_rolling_update(config: dict[str, Any] | None, expected: RollingUpdate) -> None:
    strategy: dict[str, Any] = {"type": "RollingUpdate"}
    if config is not None:
        strategy["rollingUpdateConfiguration"] = config
    assert view(spec={"rolloutStrategy": strategy}).rolling_update == expected


@pytest.mark.parametrize(("spec", "expected"), [
    ({}, "RollingUpdate"),
    ({"rolloutStrategy": {}}, "RollingUpdate"),
    ({"rolloutStrategy": {"type": "RollingUpdate"}}, "RollingUpdate"),
    ({"rolloutStrategy": {"type": "OnDelete"}}, "OnDelete"),  # as written
])
def test_rollout_type(spec: dict[str, Any], expected: str) -> None:
    assert view(spec=spec).rollout_type == expected


@pytest.mark.parametrize(("spec", "field", "expected"), [
    ({}, "startup_policy", "LeaderCreated"),
    ({"startupPolicy": "LeaderReady"}, "startup_policy", "LeaderReady"),
    ({}, "group_identity", "Ordinal"),
    ({"groupIdentity": "Hash"}, "group_identity", "Hash"),
    ({}, "hashed", False),
    ({"groupIdentity": "Ordinal"}, "hashed", False),
    ({"groupIdentity": "Hash"}, "hashed", True),
    ({}, "pod_termination_policy", "Sequential"),
    ({"podTerminationPolicy": "Parallel"}, "pod_termination_policy", "Parallel"),
    ({}, "group_replacement_policy", "PostTermination"),
    ({"groupReplacementPolicy": "Immediate"}, "group_replacement_policy", "Immediate"),
    ({}, "subdomain_policy", "Shared"),
    ({"networkConfig": None}, "subdomain_policy", "Shared"),
    ({"networkConfig": {}}, "subdomain_policy", "Shared"),
    ({"networkConfig": {"subdomainPolicy": None}}, "subdomain_policy", "Shared"),
    ({"networkConfig": {"subdomainPolicy": "UniquePerReplica"}}, "subdomain_policy",
     "UniquePerReplica"),
    ({}, "network_config", {}),
    ({"networkConfig": {"subdomainPolicy": "Shared"}}, "network_config",
     {"subdomainPolicy": "Shared"}),
    ({}, "scheduling", None),
    ({}, "scheduling_level", None),
    ({"scheduling": {}}, "scheduling_level", "replica"),
    ({"scheduling": {"schedulingPolicy": {"gang": {}}}}, "scheduling_level", "lws"),
    ({"scheduling": {"replica": {"leader": {}}}}, "scheduling_level", "role"),
])
def test_spec_fields(spec: dict[str, Any], field: str, expected: Any) -> None:
    assert getattr(view(spec=spec), field) == expected


@pytest.mark.parametrize(("policy", "expected"), [
    (None, None),
    ({"subGroupSize": 2}, SubGroupPolicy(None, 2)),  # stored before the CRD default existed
    ({"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"},
     SubGroupPolicy("LeaderExcluded", 2)),
])
def test_subgroup_policy(policy: dict[str, Any] | None, expected: SubGroupPolicy | None) -> None:
    template = {"subGroupPolicy": policy} if policy is not None else {}
    assert view(template=template).subgroup_policy == expected


def test_subgroup_policy_type_defaults_for_the_leader_only() -> None:
    assert SubGroupPolicy(None, 2).effective_type == "LeaderWorker"
    assert SubGroupPolicy("LeaderExcluded", 2).effective_type == "LeaderExcluded"


@pytest.mark.parametrize(("template", "budget", "backoff"), [
    ({}, None, None),
    ({"maxGroupRestarts": 0}, 0, None),  # an explicit 0: no recreation at all, not "unlimited"
    ({"maxGroupRestarts": 3}, 3, None),
    ({"maxGroupRestarts": "3"}, 3, None),  # edited by hand as a string of digits
    ({"maxGroupRestarts": True}, None, None),  # not a count
    ({"restartBackoff": {}}, None, RestartBackoff(10, 300)),
    ({"restartBackoff": {"baseSeconds": 0, "capSeconds": 0}}, None, RestartBackoff(0, 0)),
    ({"restartBackoff": {"baseSeconds": 5}}, None, RestartBackoff(5, 300)),
    ({"restartBackoff": None}, None, None),
])
def test_restart_limits(template: dict[str, Any], budget: int | None,
                        backoff: RestartBackoff | None) -> None:
    v = view(template=template)
    assert (v.max_group_restarts, v.restart_backoff) == (budget, backoff)


@pytest.mark.parametrize(("template", "expected"), [
    ({}, {}),
    ({"workerTemplate": {"spec": {"x": 1}}}, {"spec": {"x": 1}}),
    ({"workerTemplate": {"spec": {"x": 1}}, "leaderTemplate": {"spec": {"x": 2}}},
     {"spec": {"x": 2}}),
    # An empty leader template is a template (upstream checks for nil, not for empty).
    ({"workerTemplate": {"spec": {"x": 1}}, "leaderTemplate": {}}, {}),
])
def test_leader_pod_source(template: dict[str, Any], expected: dict[str, Any]) -> None:
    assert view(template=template).leader_pod_source == expected


@pytest.mark.parametrize(("annotations", "expected"), [
    (None, None),
    ({EXCLUSIVE_TOPOLOGY_ANNOTATION: ""}, None),  # empty pins nothing
    ({EXCLUSIVE_TOPOLOGY_ANNOTATION: "zone"}, "zone"),
])
def test_exclusive_topology(annotations: dict[str, str] | None, expected: str | None) -> None:
    assert view(annotations=annotations).exclusive_topology == expected


def test_storage_fields() -> None:
    claim = {"metadata": {"name": "data"}}
    retention = {"whenDeleted": "Delete"}
    v = view(template={"volumeClaimTemplates": [claim],
                       "persistentVolumeClaimRetentionPolicy": retention})
    assert (v.volume_claim_templates, v.pvc_retention_policy) == ([claim], retention)
    assert (view().volume_claim_templates, view().pvc_retention_policy) == ([], None)


def test_identity_and_missing_sections() -> None:
    bare = lws_view({})
    assert (bare.name, bare.namespace, bare.uid, bare.generation, bare.resource_version,
            bare.replicas, bare.size, bare.template, bare.status) == (
        "", "", "", 0, None, 1, 1, {}, {})
    full = lws_view({"metadata": {"name": "a", "namespace": "n", "uid": "u", "generation": 3,
                                  "resourceVersion": "7", "deletionTimestamp": "t"}})
    assert (full.key, full.uid, full.generation, full.resource_version, full.deleting) == (
        ("n", "a"), "u", 3, "7", True)


def test_the_view_of_a_view_is_itself_and_wraps_without_copying() -> None:
    raw = lws(spec={"replicas": 2})
    v = lws_view(raw)
    assert lws_view(v) is v
    assert LeaderWorkerSetView.of(v) is v
    assert v.raw is raw
    raw["spec"]["replicas"] = 5  # a view reads the object it wraps, never a copy
    assert v.replicas == 5


CRD = Path(__file__).parents[3] / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"


def _crd_defaults() -> dict[str, Any]:
    """Every structural default of the CRD's spec schema, by dotted path."""
    doc = yaml.safe_load(CRD.read_text())
    schema = doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    out: dict[str, Any] = {}

    def walk(node: dict[str, Any], path: str) -> None:
        if "default" in node:
            out[path] = node["default"]
        for key, child in (node.get("properties") or {}).items():
            if key not in ("leaderTemplate", "workerTemplate", "volumeClaimTemplates"):
                walk(child, f"{path}.{key}")

    walk(schema, "spec")
    return out


# How the view reads each field the CRD defaults (a field added there must be added here).
_READ_BY_VIEW = {
    "spec.replicas": lambda v: v.replicas,
    "spec.startupPolicy": lambda v: v.startup_policy,
    "spec.leaderWorkerTemplate.size": lambda v: v.size,
    "spec.leaderWorkerTemplate.restartPolicy": lambda v: v.restart_policy,
    "spec.leaderWorkerTemplate.subGroupPolicy.subGroupPolicyType":
        lambda v: v.subgroup_policy.effective_type,
    "spec.rolloutStrategy.type": lambda v: v.rollout_type,
    "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable":
        lambda v: v.rolling_update.max_unavailable,
    "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge":
        lambda v: v.rolling_update.max_surge,
    "spec.rolloutStrategy.rollingUpdateConfiguration.partition":
        lambda v: v.rolling_update.partition,
}


def test_the_views_defaults_are_the_crds() -> None:
    """An object stored without a field (written before its default existed, or with a CRD
    installed without structural defaults) reads as the API server would have defaulted it."""
    defaults = _crd_defaults()
    assert set(defaults) == set(_READ_BY_VIEW)
    bare = view(template={"subGroupPolicy": {"subGroupSize": 2}})
    assert {path: read(bare) for path, read in _READ_BY_VIEW.items()} == defaults


def test_an_undefaulted_object_reads_as_its_defaulted_form() -> None:
    """The view's defaults are the webhook's: both forms of an object read the same."""
    raw = lws(template={"restartPolicy": "Default", "subGroupPolicy": {"subGroupSize": 2},
                        "restartBackoff": {}})
    bare, defaulted = lws_view(raw), lws_view(apply_defaults(raw))
    fields = ("replicas", "size", "restart_policy", "startup_policy", "group_identity",
              "pod_termination_policy", "group_replacement_policy", "subdomain_policy",
              "rollout_type", "rolling_update", "restart_backoff")
    assert [getattr(bare, f) for f in fields] == [getattr(defaulted, f) for f in fields]
    assert bare.subgroup_policy is not None
    assert defaulted.subgroup_policy is not None
    assert bare.subgroup_policy.effective_type == defaulted.subgroup_policy.effective_type


@pytest.mark.parametrize(("sts", "replicas", "partition", "annotation", "status_replicas"), [
    ({}, 1, 0, None, 0),
    ({"spec": {"replicas": 0, "updateStrategy": {"rollingUpdate": {"partition": 0}}},
      "status": {"replicas": 0}}, 0, 0, None, 0),
    ({"metadata": {"annotations": {REPLICAS_ANNOTATION: "3"}},
      "spec": {"replicas": 4, "updateStrategy": {"rollingUpdate": {"partition": 2}}},
      "status": {"replicas": 4}}, 4, 2, "3", 4),
    ({"metadata": {"annotations": {REPLICAS_ANNOTATION: 3}}}, 1, 0, None, 0),  # not a string
])
def test_statefulset_view(sts: dict[str, Any], replicas: int, partition: int,
                          annotation: str | None, status_replicas: int) -> None:
    v = StatefulSetView.of(sts)
    assert StatefulSetView.of(v) is v
    assert (v.replicas, v.partition, v.replicas_annotation, v.status_replicas) == (
        replicas, partition, annotation, status_replicas)


def _pod(labels: dict[str, Any] | None, **meta: Any) -> dict[str, Any]:
    return {"metadata": {**({"labels": labels} if labels is not None else {}), **meta}}


@pytest.mark.parametrize(("pod", "leader", "index", "revision", "terminating"), [
    (_pod({WORKER_INDEX_LABEL: "0", GROUP_INDEX_LABEL: "2", TEMPLATE_REVISION_HASH_LABEL: "k"}),
     True, "2", "k", False),
    (_pod({WORKER_INDEX_LABEL: "1", GROUP_INDEX_LABEL: "2"}), False, "2", "", False),
    # A pod without the label is a worker (the pod webhook labels every worker).
    (_pod({GROUP_INDEX_LABEL: "0"}), False, "0", "", False),
    (_pod({WORKER_INDEX_LABEL: 0}), False, None, "", False),  # labels are strings: not "0"
    (_pod(None, deletionTimestamp="2026-01-01T00:00:00Z"), False, None, "", True),
    ({}, False, None, "", False),
    ({"metadata": None}, False, None, "", False),
    (None, False, None, "", False),
])
def test_pod_predicates(pod: dict[str, Any] | None, leader: bool, index: str | None,
                        revision: str, terminating: bool) -> None:
    assert (is_leader(pod), group_index(pod), revision_of(pod), deleting(pod)) == (
        leader, index, revision, terminating)
