"""The DisaggregatedSet webhook's checks (upstream's disaggregatedset_webhook_test.go:
ValidateCreate, ValidateUpdate, ValidateDelete and the External scaling rules), with the exact
texts, field paths and evaluation order users see, and the AdmissionReview answers."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from lws_operator.admission import review
from lws_operator.api import disaggregated_validation as dv
from lws_operator.api.disaggregated import VALIDATE_PATH

RUC = "spec.rolloutStrategy.rollingUpdateConfiguration"
PERCENT = ("a valid percent string must be a numeric string followed by an ending '%' (e.g. "
           "'1%',  or '93%', regex used for validation is '[0-9]+%')")
EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"
SUBGROUP_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"


def role(name: str, replicas: int | None = 1, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": name,
        "spec": {"leaderWorkerTemplate": {"size": 1, "workerTemplate": {
            "spec": {"containers": [{"name": "c", "image": "nginx"}]}}}},
    }
    if replicas is not None:
        body["spec"]["replicas"] = replicas
    body["spec"].update(spec)
    return body


def new_ds(name: str = "test-ds", roles: list[dict[str, Any]] | None = None,
           **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "disaggregatedset.x-k8s.io/v1", "kind": "DisaggregatedSet",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"roles": roles if roles is not None else [role("prefill"), role("decode")],
                     **spec}}


def ruc(**config: Any) -> dict[str, Any]:
    return {"rollingUpdateConfiguration": config}


def both(**spec: Any) -> list[dict[str, Any]]:
    """prefill and decode, both with ``spec``."""
    return [role("prefill", **copy.deepcopy(spec)), role("decode", **copy.deepcopy(spec))]


def messages(obj: dict[str, Any]) -> list[str]:
    return [str(e) for e in dv.validate(obj).errors]


def annotated(where: str, key: str) -> dict[str, Any]:
    """A DS with ``key`` as an annotation of prefill's ``where`` (metadata, leaderTemplate or
    workerTemplate)."""
    obj = new_ds()
    prefill = obj["spec"]["roles"][0]
    if where == "metadata":
        prefill["metadata"] = {"annotations": {key: "rack"}}
    else:
        lwt = prefill["spec"]["leaderWorkerTemplate"]
        lwt.setdefault(where, {"spec": {"containers": [{"name": "l", "image": "nginx"}]}})
        lwt[where]["metadata"] = {"annotations": {key: "rack"}}
    return obj


def placed(obj: dict[str, Any], kind: str = "ExclusiveTopology",
           topology: str = "kubernetes.io/hostname") -> dict[str, Any]:
    obj["spec"]["placementPolicy"] = {"type": kind, "topology": topology}
    return obj


# ------------------------------------------------------------------ TestValidateCreate


@pytest.mark.parametrize("obj", [
    pytest.param(new_ds(), id="246-no-rolloutStrategy"),
    pytest.param(new_ds(roles=both(rolloutStrategy={"type": "RollingUpdate", **ruc(
        maxSurge=1, maxUnavailable=0)})), id="247-RollingUpdate-surge-1"),
    pytest.param(new_ds(roles=both(rolloutStrategy=ruc(partition=0, maxSurge=1,
                                                       maxUnavailable=0))),
                 id="248-partition-0"),
    pytest.param(placed(new_ds(), "ExclusiveSlice"), id="252-ExclusiveSlice-with-topology"),
    pytest.param(new_ds(roles=both(rolloutStrategy=ruc(maxSurge=0, maxUnavailable=1))),
                 id="261-surge-0-unavailable-1"),
    pytest.param(new_ds(roles=[role("prefill", 0, rolloutStrategy=ruc(maxSurge=0,
                                                                      maxUnavailable=0)),
                               role("decode", 0)]), id="262-0/0-with-replicas-0"),
    pytest.param(new_ds("d" * 40, [role("r" * 7), role("decode")]), id="263-name-40+7"),
    pytest.param(new_ds(roles=[role("prefill", None, rolloutStrategy=ruc(
        maxSurge=0, maxUnavailable=0)), role("decode", None)]), id="0/0-with-replicas-unset"),
    pytest.param(placed(new_ds(), "None", ""), id="type-None-needs-no-topology"),
    pytest.param(placed(annotated("metadata", EXCLUSIVE), "None", ""),
                 id="type-None-allows-exclusive-topology"),
    pytest.param(annotated("metadata", EXCLUSIVE), id="275-annotation-alone"),
    pytest.param(new_ds(roles=both(rolloutStrategy=ruc(maxSurge="0%", maxUnavailable="1%"),
                                   replicas=100)), id="1%-of-100-is-1"),
])
def test_valid(obj: dict[str, Any]) -> None:
    assert dv.validate(obj) == dv.Result()


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(
        new_ds(roles=[role("prefill", rolloutStrategy={"type": "RollingUpdate", **ruc(
            partition=1, maxSurge=0, maxUnavailable=1)}), role("decode")]),
        ["spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.partition: Forbidden: "
         "partition is not supported by DisaggregatedSet; rolling updates are managed across "
         "roles by the DisaggregatedSet controller"],
        id="249-partition-1"),
    pytest.param(
        new_ds(roles=[role("prefill"), role("decode", rolloutStrategy={"type": "SomeOtherType"})]),
        ['spec.roles[1].spec.rolloutStrategy.type: Unsupported value: "SomeOtherType": '
         'supported values: "RollingUpdate", ""'],
        id="250-type"),
    pytest.param(
        new_ds(roles=[role("prefill", rolloutStrategy={"type": "InvalidType", **ruc(
            partition=5, maxSurge=1, maxUnavailable=0)}), role("decode")]),
        ['spec.roles[0].spec.rolloutStrategy.type: Unsupported value: "InvalidType": '
         'supported values: "RollingUpdate", ""',
         "spec.roles[0].spec.rolloutStrategy.rollingUpdateConfiguration.partition: Forbidden: "
         "partition is not supported by DisaggregatedSet; rolling updates are managed across "
         "roles by the DisaggregatedSet controller"],
        id="251-multiple-errors"),
    pytest.param(
        placed(new_ds(), "ExclusiveTopology", ""),
        ["spec.placementPolicy.topology: Required value: topology is required when type is not "
         "None"],
        id="253-ExclusiveTopology-without-topology"),
    pytest.param(
        placed(annotated("metadata", EXCLUSIVE), "ExclusiveSlice"),
        [f'spec.roles[0]: Forbidden: the "{EXCLUSIVE}" annotation must not be combined with a '
         "non-None spec.placementPolicy.type (ExclusiveSlice)"],
        id="254-exclusive-topology-on-role-metadata"),
    pytest.param(
        placed(annotated("workerTemplate", EXCLUSIVE)),
        [f'spec.roles[0]: Forbidden: the "{EXCLUSIVE}" annotation must not be combined with a '
         "non-None spec.placementPolicy.type (ExclusiveTopology)"],
        id="255-exclusive-topology-on-worker-template"),
    pytest.param(
        placed(annotated("metadata", SUBGROUP_EXCLUSIVE)),
        [f'spec.roles[0]: Forbidden: the "{SUBGROUP_EXCLUSIVE}" annotation must not be combined '
         "with a non-None spec.placementPolicy.type (ExclusiveTopology)"],
        id="256-subgroup-exclusive-topology-on-metadata"),
    pytest.param(
        placed(annotated("leaderTemplate", SUBGROUP_EXCLUSIVE)),
        [f'spec.roles[0]: Forbidden: the "{SUBGROUP_EXCLUSIVE}" annotation must not be combined '
         "with a non-None spec.placementPolicy.type (ExclusiveTopology)"],
        id="257-subgroup-exclusive-topology-on-leader-template"),
    pytest.param(
        placed(annotated("workerTemplate", SUBGROUP_EXCLUSIVE)),
        [f'spec.roles[0]: Forbidden: the "{SUBGROUP_EXCLUSIVE}" annotation must not be combined '
         "with a non-None spec.placementPolicy.type (ExclusiveTopology)"],
        id="258-subgroup-exclusive-topology-on-worker-template"),
    pytest.param(
        new_ds(roles=[role("prefill", 2, rolloutStrategy=ruc(maxSurge=0, maxUnavailable=0)),
                      role("decode")]),
        [f"spec.roles[0].{RUC}.maxUnavailable: Invalid value: 0: must not be 0 when `maxSurge` "
         "is 0"],
        id="259-0/0-int"),
    pytest.param(
        new_ds(roles=[role("prefill", 2, rolloutStrategy=ruc(maxSurge="0%",
                                                             maxUnavailable="0%")),
                      role("decode")]),
        [f'spec.roles[0].{RUC}.maxUnavailable: Invalid value: "0%": must not be 0 when '
         "`maxSurge` is 0"],
        id="260-0%/0%"),
    pytest.param(
        new_ds("d" * 40, [role("r" * 8), role("decode")]),
        [f'spec.roles[0].name: Invalid value: "{"r" * 8}": the generated service name (64 '
         "chars) would exceed the DNS-1035 limit of 63 characters; reduce the DisaggregatedSet "
         "name and/or role name (combined limit: 47 characters)"],
        id="264-name-40+8"),
    pytest.param(
        new_ds("d" * 50, [role("abc"), role("decode")]),
        ['spec.roles[0].name: Invalid value: "abc": the generated service name (69 chars) would '
         "exceed the DNS-1035 limit of 63 characters; reduce the DisaggregatedSet name and/or "
         "role name (combined limit: 47 characters)",
         'spec.roles[1].name: Invalid value: "decode": the generated service name (72 chars) '
         "would exceed the DNS-1035 limit of 63 characters; reduce the DisaggregatedSet name "
         "and/or role name (combined limit: 47 characters)"],
        id="265-name-50+3"),
    pytest.param(
        new_ds("d" * 40, [role("r" * 7), role("abc")], slices=100),
        [f'spec.roles[0].name: Invalid value: "{"r" * 7}": the generated service name (64 '
         "chars) would exceed the DNS-1035 limit of 63 characters; reduce the DisaggregatedSet "
         "name and/or role name (combined limit: 46 characters)"],
        id="266-name-40+7-slices-100"),
])
def test_rejected(obj: dict[str, Any], expected: list[str]) -> None:
    assert messages(obj) == expected


@pytest.mark.parametrize(("config", "expected"), [
    ({"maxSurge": 0, "maxUnavailable": -1},
     [f"spec.roles[0].{RUC}.maxUnavailable: Invalid value: -1: must be greater than or equal to "
      "0"]),
    ({"maxSurge": -2, "maxUnavailable": 1},
     [f"spec.roles[0].{RUC}.maxSurge: Invalid value: -2: must be greater than or equal to 0"]),
    ({"maxSurge": "abc", "maxUnavailable": "x%"},
     [f'spec.roles[0].{RUC}.maxUnavailable: Invalid value: "x%": {PERCENT}',
      f'spec.roles[0].{RUC}.maxSurge: Invalid value: "abc": {PERCENT}']),
    ({"maxSurge": "101%", "maxUnavailable": 0},
     [f'spec.roles[0].{RUC}.maxSurge: Invalid value: "101%": must not be greater than 100%']),
    # A value error skips the 0/0 check: "0" is no percent, so only its format is reported.
    ({"maxSurge": "0", "maxUnavailable": 0},
     [f'spec.roles[0].{RUC}.maxSurge: Invalid value: "0": {PERCENT}']),
    # Scaled with the role's replicas (2): 49% of 2 rounds down to 0, 1% rounds up to 1.
    ({"maxSurge": 0, "maxUnavailable": "49%"},
     [f'spec.roles[0].{RUC}.maxUnavailable: Invalid value: "49%": must not be 0 when '
      "`maxSurge` is 0"]),
    ({"maxSurge": "1%", "maxUnavailable": "49%"}, []),
    # Without schema defaults (a bare call) absent budgets are Go's zero value, 0.
    ({}, [f"spec.roles[0].{RUC}.maxUnavailable: Invalid value: 0: must not be 0 when "
          "`maxSurge` is 0"]),
])
def test_budget_values(config: dict[str, Any], expected: list[str]) -> None:
    obj = new_ds(roles=[role("prefill", 2, rolloutStrategy=ruc(**config)), role("decode")])
    assert messages(obj) == expected


def test_evaluation_order_and_aggregate() -> None:
    """Per role (type, partition, budgets, scaler name), then slices, then per role the
    Service names, then the placement policy; one aggregate in brackets."""
    ext = role("e" * 10, 3, rolloutStrategy={"type": "Bad", **ruc(
        partition=2, maxSurge=0, maxUnavailable=0)})
    ext["scaling"] = {"mode": "External"}
    ds_name = "n" * 245
    obj = placed(new_ds(ds_name, [annotated("metadata", EXCLUSIVE)["spec"]["roles"][0], ext],
                        slices=2), topology="")
    result = dv.validate(obj)
    got = [str(e).split(":")[0] + ":" + str(e).split(":")[1] for e in result.errors]
    assert got == [
        "spec.roles[1].spec.rolloutStrategy.type: Unsupported value",
        f"spec.roles[1].{RUC}.partition: Forbidden",
        f"spec.roles[1].{RUC}.maxUnavailable: Invalid value",
        "spec.roles[1].name: Invalid value",  # the scaler name
        "spec.slices: Forbidden",
        "spec.roles[0].name: Invalid value",  # the service names
        "spec.roles[1].name: Invalid value",
        "spec.placementPolicy.topology: Required value",
        "spec.roles[0]: Forbidden",
    ]
    assert result.message.startswith("[spec.roles[1].spec.rolloutStrategy.type: Unsupported")
    assert result.message.endswith("non-None spec.placementPolicy.type (ExclusiveTopology)]")
    assert result.message.count(", spec.") == 8
    assert len(result.warnings) == 1


def test_one_placement_error_per_role_and_the_first_key_wins() -> None:
    obj = placed(annotated("workerTemplate", SUBGROUP_EXCLUSIVE))
    obj["spec"]["roles"][0]["metadata"] = {"annotations": {EXCLUSIVE: ""}}
    assert messages(obj) == [
        f'spec.roles[0]: Forbidden: the "{EXCLUSIVE}" annotation must not be combined with a '
        "non-None spec.placementPolicy.type (ExclusiveTopology)"]


def test_labels_with_the_exclusive_keys_do_not_count() -> None:
    """The e2e sets exclusive-topology as a label on the role metadata: accepted."""
    obj = placed(new_ds())
    obj["spec"]["roles"][0]["metadata"] = {"labels": {EXCLUSIVE: "rack"}}
    assert messages(obj) == []


# ------------------------------------------------------------------ External scaling rules


def external(obj: dict[str, Any], index: int = 0) -> dict[str, Any]:
    obj["spec"]["roles"][index]["scaling"] = {"mode": "External"}
    return obj


def test_271_external_with_replicas_is_a_warning_only() -> None:
    result = dv.validate(external(new_ds("my-llm", [role("prefill", 3), role("decode")])))
    assert result.errors == []
    assert result.warnings == [
        'role "prefill" sets scaling.mode: External and spec.replicas: 3 \u2014 spec.replicas is '
        'ignored; drive replicas via DisaggregatedSetRoleScaler "my-llm-prefill" instead']
    assert "spec.replicas is ignored" in result.warnings[0]


@pytest.mark.parametrize("replicas", [None, 0, 1])
def test_external_with_at_most_one_replica_warns_nothing(replicas: int | None) -> None:
    result = dv.validate(external(new_ds(roles=[role("prefill", replicas),
                                                role("decode", replicas)])))
    assert result == dv.Result()


def test_272_external_with_slices_above_one() -> None:
    assert messages(external(new_ds(slices=2))) == [
        "spec.slices: Forbidden: spec.slices > 1 is not supported while any role has "
        "scaling.mode: External (alpha restriction)"]
    assert messages(external(new_ds(slices=1))) == []
    assert messages(new_ds(slices=2)) == []  # Static roles: any number of slices


def test_273_scaler_name_over_253_characters() -> None:
    obj = external(new_ds("a" * 250))
    errors = messages(obj)
    assert errors[0] == (
        f'spec.roles[0].name: Invalid value: "prefill": would produce scaler name '
        f'"{"a" * 250}-prefill" exceeding 253 characters')
    assert "253 characters" in errors[0]
    # Only External roles have scalers; the Service-name rule still applies to both.
    assert [e.split(":")[0] for e in errors] == ["spec.roles[0].name"] * 2 + [
        "spec.roles[1].name"]


def test_static_role_has_no_scaler_name_rule() -> None:
    assert not any("scaler name" in m for m in messages(new_ds("a" * 250)))


def test_external_role_budgets_are_still_checked_when_replicas_are_set() -> None:
    obj = external(new_ds(roles=[role("prefill", 2, rolloutStrategy=ruc(maxSurge=0,
                                                                        maxUnavailable=0)),
                                 role("decode")]))
    assert messages(obj) == [
        f"spec.roles[0].{RUC}.maxUnavailable: Invalid value: 0: must not be 0 when `maxSurge` "
        "is 0"]


@pytest.mark.parametrize(("value", "ok"), [("0", True), ("25", True), ("-1", False),
                                           ("ten", False), ("", False)])
def test_the_revision_history_limit(value: str, ok: bool) -> None:
    """Ours, as on a LeaderWorkerSet: a whole number from 0 (``logic.disaggregated.history``)."""
    obj = new_ds()
    obj["metadata"]["annotations"] = {"lws-operator.dev/revision-history-limit": value}
    assert messages(obj) == ([] if ok else [
        "metadata.annotations.lws-operator.dev/revision-history-limit: Invalid value: "
        f'"{value}": must be a whole number from 0'])


@pytest.mark.parametrize(("value", "ok"), [("true", True), ("false", True), ("True", False),
                                           ("yes", False), ("", False)])
def test_the_pause(value: str, ok: bool) -> None:
    """Ours, as on a LeaderWorkerSet (``logic.rollout.pause``): a typo is refused rather than
    silently not holding the coordinated rollout."""
    obj = new_ds()
    obj["metadata"]["annotations"] = {"lws-operator.dev/paused": value}
    assert messages(obj) == ([] if ok else [
        f'metadata.annotations.lws-operator.dev/paused: Invalid value: "{value}": must be '
        '"true" or "false"'])


def test_partial_objects_do_not_crash() -> None:
    for obj in ({}, {"spec": None}, {"spec": {"roles": [None, {"name": "x", "spec": None}]}},
                {"spec": {"roles": [{"name": "x", "spec": {"rolloutStrategy": None}}],
                          "placementPolicy": {"type": "ExclusiveSlice"}}}):
        dv.validate(obj)


# ------------------------------------------------------------------ the AdmissionReview answers


def answer(obj: dict[str, Any] | None, operation: str = "CREATE",
           old: dict[str, Any] | None = None) -> dict[str, Any]:
    request: dict[str, Any] = {"uid": "u-7", "operation": operation, "object": obj}
    if old is not None:
        request["oldObject"] = old
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": request}).encode()
    out = review.review(body, review.handlers()[VALIDATE_PATH])
    response: dict[str, Any] = out["response"]
    assert response["uid"] == "u-7"
    return response


def test_the_route_is_upstreams() -> None:
    assert VALIDATE_PATH == "/validate-disaggregatedset-x-k8s-io-v1-disaggregatedset"
    assert review.handlers()[VALIDATE_PATH] is review.validate_disaggregatedset


def test_create_valid_is_allowed_without_warnings() -> None:
    assert answer(new_ds()) == {"allowed": True, "uid": "u-7"}


def test_create_invalid_is_denied_like_controller_runtime() -> None:
    obj = new_ds(roles=[role("prefill", rolloutStrategy=ruc(partition=1, maxSurge=0,
                                                            maxUnavailable=1)), role("decode")])
    assert answer(obj) == {"allowed": False, "uid": "u-7", "status": {
        "status": "Failure", "code": 403, "reason": "Forbidden",
        "message": f"spec.roles[0].{RUC}.partition: Forbidden: partition is not supported by "
                   "DisaggregatedSet; rolling updates are managed across roles by the "
                   "DisaggregatedSet controller"}}


def test_several_errors_are_one_bracketed_aggregate() -> None:
    obj = new_ds(roles=[role("prefill", rolloutStrategy={"type": "X"}),
                        role("decode", rolloutStrategy={"type": "Y"})])
    message = answer(obj)["status"]["message"]
    assert message == (
        '[spec.roles[0].spec.rolloutStrategy.type: Unsupported value: "X": supported values: '
        '"RollingUpdate", "", spec.roles[1].spec.rolloutStrategy.type: Unsupported value: "Y": '
        'supported values: "RollingUpdate", ""]')


def test_warnings_ride_on_the_allowed_answer() -> None:
    response = answer(external(new_ds("my-llm", [role("prefill", 3), role("decode")])))
    assert response["allowed"] is True
    assert response["warnings"] == [
        'role "prefill" sets scaling.mode: External and spec.replicas: 3 \u2014 spec.replicas is '
        'ignored; drive replicas via DisaggregatedSetRoleScaler "my-llm-prefill" instead']


def test_warnings_ride_on_a_denial_too() -> None:
    response = answer(external(new_ds("my-llm", [role("prefill", 3), role("decode")],
                                      slices=2)))
    assert response["allowed"] is False
    assert response["status"]["message"].startswith("spec.slices: Forbidden")
    assert len(response["warnings"]) == 1


@pytest.mark.parametrize(("obj", "allowed", "text"), [
    pytest.param(new_ds(), True, None, id="267-valid"),
    pytest.param(new_ds(roles=both(rolloutStrategy=ruc(partition=3, maxSurge=1,
                                                       maxUnavailable=0))),
                 False, "partition", id="268-partition"),
    pytest.param(new_ds(roles=both(rolloutStrategy=ruc(maxSurge=0, maxUnavailable=0))),
                 False, "must not be 0 when `maxSurge` is 0", id="269-0/0"),
])
def test_update_validates_the_new_object_only(obj: dict[str, Any], allowed: bool,
                                              text: str | None) -> None:
    # The old object is invalid on purpose: nothing compares old and new.
    old = new_ds(roles=both(rolloutStrategy={"type": "Bad"}))
    response = answer(obj, "UPDATE", old)
    assert response["allowed"] is allowed
    if text:
        assert text in response["status"]["message"]


def test_270_delete_is_always_allowed() -> None:
    invalid = new_ds(roles=both(rolloutStrategy={"type": "Bad"}))
    assert answer(None, "DELETE", invalid) == {"allowed": True, "uid": "u-7"}
    assert answer(invalid, "CONNECT") == {"allowed": True, "uid": "u-7"}


def test_a_request_without_object_is_a_bad_request() -> None:
    response = answer(None)
    assert (response["allowed"], response["status"]["code"]) == (False, 400)
