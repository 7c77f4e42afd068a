"""AdmissionReview handling of the LeaderWorkerSet and pod webhooks, with the real pure modules
behind them (the DisaggregatedSet one: tests/unit/api/test_ds_validation.py)."""

from __future__ import annotations

import base64
import copy
import json
from typing import Any

import jsonpatch
import pytest

from e2e.harness.builder import LeaderWorkerSet
from lws_operator.admission import review
from lws_operator.api import json_codec
from lws_operator.api.constants import (
    MUTATE_LWS_PATH,
    MUTATE_POD_PATH,
    VALIDATE_LWS_PATH,
    VALIDATE_POD_PATH,
)

P = "leaderworkerset.sigs.k8s.io/"
HANDLERS = review.handlers()


def admission(obj: dict[str, Any] | None, operation: str = "CREATE",
              old: dict[str, Any] | None = None) -> bytes:
    request: dict[str, Any] = {"uid": "u-1", "operation": operation, "object": obj}
    if old is not None:
        request["oldObject"] = old
    return json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": request}).encode()


def answer(path: str, body: bytes) -> dict[str, Any]:
    out = review.review(body, HANDLERS[path])
    assert out["apiVersion"] == "admission.k8s.io/v1"
    assert out["kind"] == "AdmissionReview"
    response: dict[str, Any] = out["response"]
    assert response["uid"] == ("u-1" if body.startswith(b"{") else "")
    return response


def patched(obj: dict[str, Any], response: dict[str, Any]) -> Any:
    assert response["allowed"] is True
    if "patch" not in response:
        return obj
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    return jsonpatch.apply_patch(copy.deepcopy(obj), ops)


def leader_pod(annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "test-1", "namespace": "default",
                     "labels": {P + "name": "test", P + "worker-index": "0"},
                     "annotations": {P + "size": "2"} if annotations is None else annotations},
        "spec": {"subdomain": "test", "containers": [{"name": "c", "image": "busybox"}]},
    }


def lws(**spec: Any) -> dict[str, Any]:
    return (LeaderWorkerSet("sample", "default").replicas(2).size(2)
            .worker_pod(containers=[{"name": "c"}]).spec(**spec).build())


def test_lws_pod_is_labelled_and_gets_env() -> None:
    pod = leader_pod()
    out = patched(pod, answer(MUTATE_POD_PATH, admission(pod)))
    labels = out["metadata"]["labels"]
    assert labels[P + "group-index"] == "1"
    assert len(labels[P + "group-key"]) == 40
    env = {e["name"]: e.get("value") for e in out["spec"]["containers"][0]["env"]}
    assert env["LWS_LEADER_ADDRESS"] == "test-1.test.default"
    assert env["LWS_GROUP_SIZE"] == "2"


def test_pod_without_the_lws_label_gets_no_patch() -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "plain", "labels": {"a": "b"}},
           "spec": {"containers": [{"name": "c"}]}}
    response = answer(MUTATE_POD_PATH, admission(pod))
    assert response == {"allowed": True, "uid": "u-1"}


def test_rejected_pod_is_denied_like_controller_runtime() -> None:
    response = answer(MUTATE_POD_PATH, admission(leader_pod(annotations={})))
    assert response["allowed"] is False
    assert response["status"] == {
        "status": "Failure", "code": 403, "reason": "Forbidden",
        "message": "size annotation is unexpectedly missing for pod test-1"}


def test_pod_validation_allows_everything() -> None:
    assert answer(VALIDATE_POD_PATH, admission(leader_pod(annotations={})))["allowed"] is True


def test_lws_defaulting_patch() -> None:
    obj = lws()
    out = patched(obj, answer(MUTATE_LWS_PATH, admission(obj)))
    assert out["spec"]["networkConfig"] == {"subdomainPolicy": "Shared"}
    assert out["spec"]["rolloutStrategy"]["type"] == "RollingUpdate"
    assert out["spec"]["leaderWorkerTemplate"]["restartPolicy"] == "RecreateGroupOnPodRestart"


def test_lws_validation_error_is_denied_like_controller_runtime() -> None:
    """Upstream returns ``field.ErrorList.ToAggregate()`` and controller-runtime answers
    ``admission.Denied(err.Error())``: 403 Forbidden, the aggregate text, no details."""
    response = answer(VALIDATE_LWS_PATH, admission(lws(replicas=-1)))
    assert response["allowed"] is False
    assert response["status"] == {
        "status": "Failure", "code": 403, "reason": "Forbidden",
        "message": "spec.replicas: Invalid value: -1: replicas must be equal or greater than 0"}


def test_several_lws_validation_errors_are_one_bracketed_message() -> None:
    obj = lws(replicas=-1)
    obj["spec"]["leaderWorkerTemplate"]["size"] = 0
    response = answer(VALIDATE_LWS_PATH, admission(obj))
    assert response["status"] == {
        "status": "Failure", "code": 403, "reason": "Forbidden",
        "message": "[spec.replicas: Invalid value: -1: replicas must be equal or greater than 0, "
                   "spec.leaderWorkerTemplate.size: Invalid value: 0: size must be equal or "
                   "greater than 1]"}


def test_an_accepted_lws_that_cannot_run_comes_with_a_warning() -> None:
    obj = lws()
    obj["metadata"]["name"] = "n" * 60
    response = answer(VALIDATE_LWS_PATH, admission(obj))
    assert response["allowed"] is True
    assert [w.split(":")[0] for w in response["warnings"]] == ["metadata.name"]
    assert "warnings" not in answer(VALIDATE_LWS_PATH, admission(lws()))


def test_lws_update_rules_see_the_old_object() -> None:
    old = lws(leaderWorkerTemplate={"size": 4, "subGroupPolicy": {"subGroupSize": 2}})
    new = lws(leaderWorkerTemplate={"size": 4})
    response = answer(VALIDATE_LWS_PATH, admission(new, "UPDATE", old))
    assert response["allowed"] is False
    assert "cannot remove subGroupSize after enabled" in response["status"]["message"]
    # The same object is valid on create.
    assert answer(VALIDATE_LWS_PATH, admission(new))["allowed"] is True


def test_an_update_of_an_lws_written_without_the_guide_fields_is_allowed() -> None:
    """Taking over from upstream, through both LWS webhooks as the API server chains them: the
    stored object lacks ``groupIdentity`` and ``podTerminationPolicy``, the defaulting webhook
    adds them to the update, and validation takes absent for the default."""
    old = lws(rolloutStrategy={"type": "RollingUpdate", "rollingUpdateConfiguration": {
        "maxUnavailable": 1, "maxSurge": 0, "partition": 0}})
    new = copy.deepcopy(old)
    new["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["image"] = "v2"
    new = patched(new, answer(MUTATE_LWS_PATH, admission(new, "UPDATE", old)))
    assert new["spec"]["groupIdentity"] == "Ordinal"
    assert answer(VALIDATE_LWS_PATH, admission(new, "UPDATE", old)) == {
        "allowed": True, "uid": "u-1"}


@pytest.mark.parametrize("path", [MUTATE_LWS_PATH, VALIDATE_LWS_PATH, MUTATE_POD_PATH,
                                  VALIDATE_POD_PATH])
def test_delete_is_allowed(path: str) -> None:
    assert answer(path, admission(None, "DELETE", old=lws()))["allowed"] is True


@pytest.mark.parametrize(("body", "message"), [
    (b"not json", "Expecting value"),
    (b"[]", "not an AdmissionReview"),
    (admission(None), "has no object"),
])
def test_unreadable_requests_fail_closed_with_400(body: bytes, message: str) -> None:
    response = answer(MUTATE_POD_PATH, body)
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    assert message in response["status"]["message"]


def test_a_crash_fails_closed_with_500() -> None:
    def broken(request: Any) -> dict[str, Any]:
        raise KeyError("boom")

    out = review.review(admission(leader_pod()), broken)
    assert out["response"]["allowed"] is False
    assert out["response"]["status"]["code"] == 500
    assert "boom" in out["response"]["status"]["message"]


def test_json_that_orjson_refuses_is_read_and_written_as_before() -> None:
    # A NaN literal (the stdlib reads it) and a lone surrogate (orjson writes no such string)
    assert review.load(b'{"a": NaN}')["a"] != review.load(b'{"a": NaN}')["a"]
    assert review.load(b'{"a": "\\ud800"}') == {"a": "\ud800"}
    assert json.loads(json_codec.dumps({"a": "\ud800", "b": 2**70})) == {"a": "\ud800",
                                                                         "b": 2**70}
    assert json_codec.dumps({"a": [1, "é"]}) == '{"a":[1,"é"]}'.encode()


def test_a_pod_with_a_lone_surrogate_in_a_replaced_list_is_patched() -> None:
    pod = leader_pod()
    # LWS_LEADER_ADDRESS goes first: the whole env list is replaced, this value included
    pod["spec"]["containers"][0]["env"] = [{"name": "X", "value": "\ud800"}]
    body = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                       "request": {"uid": "u-1", "operation": "CREATE", "object": pod}}).encode()
    out = patched(pod, answer(MUTATE_POD_PATH, body))
    assert out["spec"]["containers"][0]["env"][-1] == {"name": "X", "value": "\ud800"}
    assert out["metadata"]["labels"][P + "group-index"] == "1"
