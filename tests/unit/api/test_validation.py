"""Validation of LeaderWorkerSets: upstream's messages and paths (its webhook), and the rules
the LWS docs add."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from e2e.harness.builder import LeaderWorkerSet
from lws_operator.api.defaults import apply_defaults
from lws_operator.api.validation import (
    DNS1035_MESSAGE,
    PERCENT_MESSAGE,
    FieldError,
    aggregate_message,
    scaled_value,
    validate,
    warnings,
)
from tests.harness.lws_bodies import ruc, set_fields, upstream_defaults

RUC = "spec.rolloutStrategy.rollingUpdateConfiguration"
SGS = "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"


def lws(name: str = "sample", annotations: dict[str, str] | None = None,
        **spec: Any) -> dict[str, Any]:
    """A defaulted LWS; keyword ``t_<field>`` goes into leaderWorkerTemplate."""
    body = (LeaderWorkerSet(name, "default").annotations(annotations or {})
            .image("nginx", name="main").build())
    return apply_defaults(set_fields(body, spec))


def messages(errors: list[FieldError]) -> list[tuple[str, str]]:
    return [(e.path, e.message) for e in errors]


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        # upstream's general validation rules, in its order.
        (lws(name="Sample"), [("metadata.name", DNS1035_MESSAGE)]),
        (lws(name="1abc"), [("metadata.name", DNS1035_MESSAGE)]),
        (lws(replicas=-1), [("spec.replicas", "replicas must be equal or greater than 0")]),
        (lws(replicas=1000001),
         [("spec.replicas", "replicas must be equal or less than 1000000")]),
        (lws(t_size=0), [("spec.leaderWorkerTemplate.size",
                          "size must be equal or greater than 1")]),
        (lws(replicas=1000000, t_size=3000),
         [("spec.replicas",
           "the product of replicas and worker replicas must not exceed 2147483647")]),
        (lws(rolloutStrategy=ruc(maxUnavailable=-1)),
         [(f"{RUC}.maxUnavailable", "must be greater than or equal to 0")]),
        (lws(rolloutStrategy=ruc(maxUnavailable="1")),
         [(f"{RUC}.maxUnavailable", PERCENT_MESSAGE)]),
        (lws(rolloutStrategy=ruc(maxUnavailable="101%")),
         [(f"{RUC}.maxUnavailable", "must not be greater than 100%")]),
        (lws(rolloutStrategy=ruc(maxSurge=-2)),
         [(f"{RUC}.maxSurge", "must be greater than or equal to 0")]),
        (lws(rolloutStrategy=ruc(maxSurge="abc")), [(f"{RUC}.maxSurge", PERCENT_MESSAGE)]),
        (lws(rolloutStrategy=ruc(maxSurge="200%")),
         [(f"{RUC}.maxSurge", "must not be greater than 100%")]),
        (lws(rolloutStrategy=ruc(partition=-1)),
         [(f"{RUC}.partition", "must be greater than or equal to 0")]),
        # Upstream goes on to scale the budgets after a bad partition.
        (lws(rolloutStrategy=ruc(partition=-1, maxUnavailable=0, maxSurge=0)),
         [(f"{RUC}.partition", "must be greater than or equal to 0"),
          (f"{RUC}.maxUnavailable", "must not be 0 when `maxSurge` is 0")]),
        # One error for a malformed budget, where upstream adds "invalid value" (and, counting
        # it as 0, "must not be 0 when `maxSurge` is 0").
        (lws(rolloutStrategy=ruc(maxUnavailable="abc", maxSurge=0)),
         [(f"{RUC}.maxUnavailable", PERCENT_MESSAGE)]),
        (lws(replicas=2, rolloutStrategy=ruc(maxUnavailable="25%", maxSurge=0)),
         [(f"{RUC}.maxUnavailable", "must not be 0 when `maxSurge` is 0")]),
        (lws(replicas=3, rolloutStrategy=ruc(maxUnavailable=0, maxSurge=0)),
         [(f"{RUC}.maxUnavailable", "must not be 0 when `maxSurge` is 0")]),
        (lws(t_size=4, t_subGroupPolicy={"subGroupSize": 0}),
         [(SGS, "subGroupSize must be equal or greater than 1")]),
        (lws(t_size=4, t_subGroupPolicy={"subGroupSize": None}),
         [(SGS, "subGroupSize must be equal or greater than 1")]),
        (lws(t_size=4, t_subGroupPolicy={}),
         [(SGS, "subGroupSize must be equal or greater than 1")]),
        (lws(t_size=10, t_subGroupPolicy={"subGroupSize": 4}),
         [(SGS, "size or size - 1 must be divisible by subGroupSize")]),
        (lws(t_size=2, t_subGroupPolicy={"subGroupSize": 4}),
         [(SGS, "size or size - 1 must be divisible by subGroupSize"),
          (SGS, "subGroupSize cannot be larger than size")]),
        (lws(t_size=8, t_subGroupPolicy={"subGroupSize": 8,
                                         "subGroupPolicyType": "LeaderExcluded"}),
         [(SGS, "size-1 must be divisible by subGroupSize when using LeaderExcluded")]),
        (lws(annotations={"leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": "rack"}),
         [("metadata.annotations.leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology",
           "cannot have subgroup-exclusive-topology without subGroupSize set")]),
        # LWS docs "Group Identity".
        (lws(groupIdentity="Hash", t_volumeClaimTemplates=[{"metadata": {"name": "d"}}]),
         [("spec.leaderWorkerTemplate.volumeClaimTemplates",
           "volumeClaimTemplates are not supported with groupIdentity Hash")]),
        (lws(groupIdentity="Hash", rolloutStrategy=ruc(partition=2)),
         [(f"{RUC}.partition", "partition is not supported with groupIdentity Hash")]),
        (lws(groupReplacementPolicy="Immediate"),
         [("spec.groupReplacementPolicy",
           "Immediate is only supported with groupIdentity Hash")]),
        (lws(name="a" * 44, groupIdentity="Hash", t_size=2),
         [("metadata.name", "must be no more than 43 characters with groupIdentity Hash")]),
        (lws(name="a" * 55, groupIdentity="Hash"),
         [("metadata.name",
           "must be no more than 54 characters with groupIdentity Hash and size 1")]),
        # LWS docs: restart budget and backoff.
        (lws(t_restartPolicy="None", t_maxGroupRestarts=3),
         [("spec.leaderWorkerTemplate.maxGroupRestarts",
           "maxGroupRestarts is not supported with restartPolicy None")]),
        (lws(t_maxGroupRestarts=-1),
         [("spec.leaderWorkerTemplate.maxGroupRestarts", "must be greater than or equal to 0")]),
        (lws(t_restartBackoff={"baseSeconds": 30, "capSeconds": 10}),
         [("spec.leaderWorkerTemplate.restartBackoff.capSeconds",
           "must be greater than or equal to baseSeconds (30)")]),
        (lws(t_restartBackoff={"baseSeconds": 10, "capSeconds": 10}), []),
        (lws(t_restartBackoff={"baseSeconds": -1}),
         [("spec.leaderWorkerTemplate.restartBackoff.baseSeconds",
           "must be greater than or equal to 0")]),
        # LWS docs "Gang Scheduling".
        (lws(scheduling={}, startupPolicy="LeaderReady"),
         [("spec.startupPolicy", "LeaderReady is not supported with gang scheduling "
           "(spec.scheduling): the gang could never form")]),
        (lws(scheduling={}, annotations={
            "leaderworkerset.sigs.k8s.io/exclusive-topology": "rack"}),
         [("metadata.annotations.leaderworkerset.sigs.k8s.io/exclusive-topology",
           "exclusive-topology cannot be combined with gang scheduling (spec.scheduling)")]),
        (lws(scheduling={"schedulingPolicy": {"gang": {}}, "replica": {}}),
         [("spec.scheduling", "exactly one scheduling level may be set: whole-LWS "
           "(schedulingPolicy, schedulingConstraints, disruptionMode, resourceClaims), replica "
           "(replica) or role (replica.leader, replica.worker)")]),
        (lws(startupPolicy="Eventually"),
         [("spec.startupPolicy", 'supported values: "LeaderCreated", "LeaderReady"')]),
        # Copied into the StatefulSets, whose API accepts only Retain and Delete.
        (lws(t_persistentVolumeClaimRetentionPolicy={"whenDeleted": "Bogus"}),
         [("spec.leaderWorkerTemplate.persistentVolumeClaimRetentionPolicy.whenDeleted",
           'supported values: "Retain", "Delete"')]),
        (lws(t_persistentVolumeClaimRetentionPolicy={"whenDeleted": "Delete",
                                                     "whenScaled": "retain"}),
         [("spec.leaderWorkerTemplate.persistentVolumeClaimRetentionPolicy.whenScaled",
           'supported values: "Retain", "Delete"')]),
        (lws(t_persistentVolumeClaimRetentionPolicy={"whenDeleted": "Retain",
                                                     "whenScaled": "Delete"}), []),
    ],
)
def test_create_rules(obj: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert messages(validate(obj, None)) == expected


def test_gang_template_rules() -> None:
    obj = lws(scheduling={})
    lwt = obj["spec"]["leaderWorkerTemplate"]
    lwt["workerTemplate"]["spec"]["schedulingGroup"] = {"podGroupName": "x"}
    lwt["leaderTemplate"] = {"spec": {"priorityClassName": "high", "containers": [
        {"name": "leader", "image": "nginx"}]}}
    assert messages(validate(obj, None)) == [
        ("spec.leaderWorkerTemplate.workerTemplate.spec.schedulingGroup",
         "must not be set: LWS derives the PodGroup of each pod when gang scheduling "
         "(spec.scheduling) is enabled"),
        ("spec.leaderWorkerTemplate.leaderTemplate.spec.priorityClassName",
         "leader and worker templates must use the same priorityClassName with gang scheduling"),
    ]


@pytest.mark.parametrize(
    "obj",
    [
        lws(),
        lws(replicas=0, rolloutStrategy=ruc(maxUnavailable=0, maxSurge=0)),
        lws(replicas=4, rolloutStrategy=ruc(maxUnavailable="25%", maxSurge=0)),
        lws(replicas=2, rolloutStrategy=ruc(maxUnavailable=0, maxSurge="1%")),
        lws(rolloutStrategy=ruc(partition=10)),
        lws(t_size=9, t_subGroupPolicy={"subGroupSize": 8}),
        lws(t_size=16, t_subGroupPolicy={"subGroupSize": 8}),
        lws(t_size=9, t_subGroupPolicy={"subGroupSize": 8, "subGroupPolicyType": "LeaderExcluded"}),
        lws(t_size=5, t_subGroupPolicy={"subGroupSize": 1, "subGroupPolicyType": "LeaderExcluded"}),
        lws(name="a" * 43, groupIdentity="Hash", t_size=4, groupReplacementPolicy="Immediate"),
        lws(name="a" * 54, groupIdentity="Hash", t_size=1),
        lws(name="a" * 63),
        lws(t_maxGroupRestarts=0, t_restartBackoff={}),
        lws(scheduling={}),
        lws(scheduling={"replica": {"leader": {}, "worker": {}}}),
        lws(scheduling={"schedulingPolicy": {"gang": {}}}),
        lws(annotations={"leaderworkerset.sigs.k8s.io/exclusive-topology": "rack",
                         "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology": "host"},
            t_size=4, t_subGroupPolicy={"subGroupSize": 2}),
    ],
)
def test_valid_objects(obj: dict[str, Any]) -> None:
    assert validate(obj, None) == []


def _updated(old: dict[str, Any], **changes: Any) -> dict[str, Any]:
    new = lws(**changes)
    new["metadata"] = old["metadata"]
    return new


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (lws(t_size=4, t_subGroupPolicy={"subGroupSize": 2}),
         lws(t_size=4, t_subGroupPolicy={"subGroupSize": 4}),
         [(SGS, "field is immutable")]),
        (lws(t_size=4), lws(t_size=4, t_subGroupPolicy={"subGroupSize": 2}),
         [(SGS, "cannot enable subGroupSize after the lws is already created")]),
        (lws(t_size=4, t_subGroupPolicy={"subGroupSize": 2}), lws(t_size=4),
         [(SGS, "cannot remove subGroupSize after enabled")]),
        # A resize that breaks the subgroup rules names subGroupSize (LWS docs, "Resizing With
        # Subgroups").
        (lws(t_size=8, t_subGroupPolicy={"subGroupSize": 8}),
         lws(t_size=10, t_subGroupPolicy={"subGroupSize": 8}),
         [(SGS, "size or size - 1 must be divisible by subGroupSize")]),
        (lws(t_size=9, t_subGroupPolicy={"subGroupSize": 8,
                                         "subGroupPolicyType": "LeaderExcluded"}),
         lws(t_size=8, t_subGroupPolicy={"subGroupSize": 8,
                                         "subGroupPolicyType": "LeaderExcluded"}),
         [(SGS, "size-1 must be divisible by subGroupSize when using LeaderExcluded")]),
        (lws(), lws(groupIdentity="Hash"), [("spec.groupIdentity", "field is immutable")]),
        (lws(), lws(podTerminationPolicy="Parallel"),
         [("spec.podTerminationPolicy", "field is immutable")]),
        (lws(), lws(scheduling={}),
         [("spec.scheduling", "gang scheduling cannot be added after creation")]),
        (lws(scheduling={}), lws(),
         [("spec.scheduling", "gang scheduling cannot be removed after creation")]),
        (lws(scheduling={}), lws(scheduling={"replica": {"leader": {}}}),
         [("spec.scheduling",
           "the scheduling level cannot change after creation (was replica, now role)")]),
        (lws(scheduling={}), lws(scheduling={"replica": {"schedulingPolicy": {"basic": {}}}}),
         [("spec.scheduling.replica.schedulingPolicy", "field is immutable")]),
    ],
)
def test_update_rules(old: dict[str, Any], new: dict[str, Any],
                      expected: list[tuple[str, str]]) -> None:
    assert messages(validate(new, old)) == expected


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (lws(t_size=8, t_subGroupPolicy={"subGroupSize": 8}),
         lws(t_size=17, t_subGroupPolicy={"subGroupSize": 8,
                                          "subGroupPolicyType": "LeaderExcluded"})),
        (lws(replicas=1), lws(replicas=5, t_size=3, startupPolicy="LeaderReady")),
        (lws(scheduling={"schedulingPolicy": {"gang": {"minCount": 4}}}),
         lws(scheduling={"schedulingPolicy": {"gang": {"minCount": 8}}})),
    ],
)
def test_allowed_updates(old: dict[str, Any], new: dict[str, Any]) -> None:
    assert validate(new, old) == []


def test_effective_priority_class_is_immutable_under_gang_scheduling() -> None:
    old = lws(scheduling={})
    new = lws(scheduling={})
    new["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["priorityClassName"] = "high"
    assert messages(validate(new, old)) == [
        ("spec.leaderWorkerTemplate.leaderTemplate.spec.priorityClassName", "field is immutable")]


def test_null_subdomain_policy_on_update() -> None:
    old = lws()
    new = lws()
    new["spec"]["networkConfig"] = {"subdomainPolicy": None}
    assert messages(validate(new, old)) == [
        ("spec.networkConfig.subdomainPolicy", "cannot set subdomainPolicy as null")]


@pytest.mark.parametrize(
    ("errors", "expected"),
    [
        # apimachinery's field.ErrorList.ToAggregate().Error(): one error is its own text ...
        ([FieldError("spec.replicas", "replicas must be equal or greater than 0", -1)],
         "spec.replicas: Invalid value: -1: replicas must be equal or greater than 0"),
        # ... several are bracketed and joined with ", " ...
        ([FieldError(f"{RUC}.maxSurge", PERCENT_MESSAGE, "abc"),
          FieldError("spec.scheduling", "nope", type="Forbidden")],
         f'[{RUC}.maxSurge: Invalid value: "abc": {PERCENT_MESSAGE}, '
         "spec.scheduling: Forbidden: nope]"),
        # ... identical texts count once (so two copies of one error are not bracketed).
        ([FieldError(SGS, "a", 3), FieldError(SGS, "a", 3)], f"{SGS}: Invalid value: 3: a"),
        ([FieldError(SGS, "a", 3), FieldError(SGS, "b", 3), FieldError(SGS, "a", 3)],
         f"[{SGS}: Invalid value: 3: a, {SGS}: Invalid value: 3: b]"),
        # Values as field.Error renders them: null and booleans bare, objects as JSON.
        ([FieldError(SGS, "m", None)], f"{SGS}: Invalid value: null: m"),
        ([FieldError("spec.x", "m", True)], "spec.x: Invalid value: true: m"),
        ([FieldError("spec.x", "m", {"b": 1, "a": "x"})],
         'spec.x: Invalid value: {"a":"x","b":1}: m'),
        ([FieldError("spec.x", "", type="Required")], "spec.x: Required value"),
        ([FieldError("spec.x", 'supported values: "A", "B"', "C", "NotSupported")],
         'spec.x: Unsupported value: "C": supported values: "A", "B"'),
    ],
)
def test_aggregate_message(errors: list[FieldError], expected: str) -> None:
    assert aggregate_message(errors) == expected


@pytest.mark.parametrize(
    ("value", "total", "round_up", "expected"),
    [
        (3, 10, False, 3),
        ("25%", 2, False, 0),
        ("25%", 2, True, 1),
        ("50%", 5, False, 2),
        ("50%", 5, True, 3),
        ("100%", 7, True, 7),
        ("abc", 5, True, None),
        (None, 5, True, None),
    ],
)
def test_scaled_value(value: Any, total: int, round_up: bool, expected: int | None) -> None:
    assert scaled_value(value, total, round_up) == expected


@pytest.mark.parametrize(("name", "spec", "longest"), [
    ("a" * 52, {"t_size": 1, "replicas": 5}, None),  # leader StatefulSet only: 52 runs
    ("a" * 53, {"t_size": 1, "replicas": 5}, "a" * 53),
    ("a" * 50, {"t_size": 2, "replicas": 10}, None),  # worker "<name>-9": 52
    ("a" * 50, {"t_size": 2, "replicas": 11}, "a" * 50 + "-10"),  # "<name>-10": 53
    ("a" * 50, {"t_size": 2, "replicas": 1}, None),  # "<name>-0": 52
    ("a" * 51, {"t_size": 2, "replicas": 1}, "a" * 51 + "-0"),
    ("a" * 52, {"t_size": 2, "replicas": 0}, None),  # no group, no worker StatefulSet
    ("a" * 63, {"t_size": 2, "replicas": 2, "groupIdentity": "Hash"}, None),  # rejected there
])
def test_ordinal_names_too_long_to_run_are_warned_about(
        name: str, spec: dict[str, Any], longest: str | None) -> None:
    obj = lws(name, **spec)
    assert validate(obj, None) == [] or spec.get("groupIdentity") == "Hash"
    notes = warnings(obj)
    if longest is None:
        assert notes == []
    else:
        assert len(notes) == 1
        assert notes[0].startswith(f"metadata.name: StatefulSet {longest!r} would be "
                                   f"{len(longest)} characters, over the 52")
        assert notes[0].endswith(f"at most {52 - len(longest) + len(name)} characters")
        assert len(notes[0]) < 256  # the API server truncates longer warnings


# ------------------------------------------------- on update, an absent field means its default


def stored_by_upstream(**spec: Any) -> dict[str, Any]:
    """A LeaderWorkerSet as upstream's CRD and webhook leave it in etcd (its Default): upstream's
    defaults, none of the LWS docs' additions; keyword ``t_<field>`` goes into the template."""
    body: dict[str, Any] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "sample", "namespace": "default"},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {
            "size": 4,
            "workerTemplate": {"spec": {"containers": [{"name": "main", "image": "v1"}]}}}},
    }
    return set_fields(body, {**upstream_defaults(), **spec})


def with_image(obj: dict[str, Any], image: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = image
    return out


@pytest.mark.parametrize("old", [
    stored_by_upstream(),
    stored_by_upstream(t_subGroupPolicy={"subGroupSize": 2, "subGroupPolicyType": "LeaderWorker"}),
    stored_by_upstream(t_restartPolicy="None", rolloutStrategy=ruc(
        maxUnavailable="50%", maxSurge=1, partition=1)),
    stored_by_upstream(t_leaderTemplate={"spec": {"containers": [{"name": "l", "image": "v1"}]}},
                       networkConfig={"subdomainPolicy": "UniquePerReplica"}),
])
def test_an_object_stored_by_upstream_takes_an_image_update(old: dict[str, Any]) -> None:
    """Taking over from upstream: the defaulting webhook adds groupIdentity, podTerminationPolicy
    and groupReplacementPolicy to the update; the stored object has none of them."""
    new = apply_defaults(with_image(old, "v2"))
    assert validate(new, old) == []
    # The same without the defaulting webhook in front (a client that sends the fields).
    assert validate(with_image(old, "v2"), old) == []


POD = {"spec": {"containers": [{"name": "main", "image": "v1"}]}}


@pytest.mark.parametrize(
    ("absent", "present", "path"),
    [
        # Each immutable field: stored without it (absent) and updated to its default, which
        # must pass in both directions, while a value other than the default stays refused.
        ({}, {"groupIdentity": "Ordinal"}, "spec.groupIdentity"),
        ({}, {"podTerminationPolicy": "Sequential"}, "spec.podTerminationPolicy"),
        ({"t_subGroupPolicy": {"subGroupSize": 2}},
         {"t_subGroupPolicy": {"subGroupSize": 2, "subGroupPolicyType": "LeaderWorker"}},
         SGS),
        # Gang scheduling: `scheduling: {}` is the replica level with a gang policy.
        ({"scheduling": {}}, {"scheduling": {"replica": {"schedulingPolicy": {"gang": {}}}}},
         "spec.scheduling.replica.schedulingPolicy"),
        ({"scheduling": {"replica": {}}},
         {"scheduling": {"replica": {"schedulingPolicy": {"gang": {}}}}},
         "spec.scheduling.replica.schedulingPolicy"),
        ({"scheduling": {"replica": {"worker": {}}}},
         {"scheduling": {"replica": {"worker": {"schedulingPolicy": {"gang": {}}}}}},
         "spec.scheduling.replica.worker.schedulingPolicy"),
        ({"scheduling": {"schedulingPolicy": {"gang": {}}}},
         {"scheduling": {"schedulingPolicy": {"gang": {}}, "resourceClaims": []}},
         "spec.scheduling.resourceClaims"),
        ({"scheduling": {"schedulingPolicy": {"gang": {}}}},
         {"scheduling": {"schedulingPolicy": {"gang": {}}, "disruptionMode": ""}},
         "spec.scheduling.disruptionMode"),
        ({"scheduling": {}, "t_leaderTemplate": POD},
         {"scheduling": {}, "t_leaderTemplate": {"spec": {**POD["spec"],
                                                          "priorityClassName": ""}}},
         "spec.leaderWorkerTemplate.leaderTemplate.spec.priorityClassName"),
    ],
)
def test_immutable_fields_take_absent_for_the_default(
        absent: dict[str, Any], present: dict[str, Any], path: str) -> None:
    without, with_default = stored_by_upstream(**absent), stored_by_upstream(**present)
    for old, new in ((without, with_default), (with_default, without)):
        assert validate(with_image(new, "v2"), old) == [], path
        assert validate(apply_defaults(with_image(new, "v2")), old) == []
        assert validate(apply_defaults(with_image(new, "v2")), apply_defaults(old)) == []


@pytest.mark.parametrize(
    ("spec", "path", "value"),
    [
        ({"groupIdentity": "Hash"}, "spec.groupIdentity", "Hash"),
        ({"podTerminationPolicy": "Parallel"}, "spec.podTerminationPolicy", "Parallel"),
        ({"scheduling": {"replica": {"schedulingPolicy": {"basic": {}}}}},
         "spec.scheduling", None),
    ],
)
def test_a_stored_object_still_cannot_change_what_absent_meant(
        spec: dict[str, Any], path: str, value: Any) -> None:
    """Absent means the default, not "anything": moving off it is refused as before."""
    old = stored_by_upstream(scheduling={}) if "scheduling" in spec else stored_by_upstream()
    new = apply_defaults(stored_by_upstream(**spec))
    errors = validate(new, old)
    assert [e.path for e in errors] == [path if value else path + ".replica.schedulingPolicy"]
    assert errors[0].message == "field is immutable"
    if value:
        assert errors[0].value == value


def test_update_rule_values_are_upstreams() -> None:
    """Upstream reports the stored subGroupSize when it is removed, and the stored
    subdomainPolicy when the new one is null."""
    old = stored_by_upstream(t_subGroupPolicy={"subGroupSize": 2})
    new = stored_by_upstream()
    new["spec"]["networkConfig"] = {"subdomainPolicy": None}
    assert [str(e) for e in validate(new, old)] == [
        f"{SGS}: Invalid value: 2: cannot remove subGroupSize after enabled",
        'spec.networkConfig.subdomainPolicy: Invalid value: "Shared": cannot set '
        "subdomainPolicy as null",
    ]


@pytest.mark.parametrize(("value", "valid"), [
    ("0", True), ("10", True), ("2147483647", True), ("-1", False), ("ten", False), ("", False),
    ("2147483648", False), ("1.5", False)])
def test_the_revision_history_limit_is_a_whole_number(value: str, valid: bool) -> None:
    errors = validate(lws(annotations={"lws-operator.dev/revision-history-limit": value}), None)
    expected = [] if valid else [("metadata.annotations.lws-operator.dev/revision-history-limit",
                                  "must be a whole number from 0")]
    assert messages(errors) == expected
