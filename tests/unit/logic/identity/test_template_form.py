"""Revision content compared across JSON renderings: the templates a revision of
the upstream Go controller stores, and the live ones, must compare equal exactly when Go would
decode them into equal objects.

Every ``GO`` string below is the exact ``data`` upstream's ``getPatch`` writes for the live pod
spec beside it: produced by ``json.Marshal`` of the ``k8s.io/api`` v0.36 types (through the
LeaderWorkerSet fields with upstream's JSON tags), decoded into a map and encoded again, as
upstream does; ``\\u003e`` and ``\\u0026`` are Go's HTML escaping of ``>`` and ``&``.
"""

from __future__ import annotations

import copy
import json
from fractions import Fraction
from typing import Any

import pytest

from lws_operator.logic.identity.revision import canonical_json, revision_patch, template_difference
from lws_operator.logic.identity.template_form import ABSENT, normal_form
from lws_operator.logic.objects.quantity import parse_quantity

CONTAINER = {"name": "m", "image": "nginx:1"}
_GO_HEAD = ('{"spec":{"leaderWorkerTemplate":{"$patch":"replace",'
            '"restartPolicy":"RecreateGroupOnPodRestart","size":2,"workerTemplate":')
_GO_TAIL = '},"networkConfig":{"$patch":"replace","subdomainPolicy":"Shared"}}}'


def go(template: str) -> dict[str, Any]:
    """The revision data Go writes, around the given rendering of the worker template."""
    return dict(json.loads(_GO_HEAD + template + _GO_TAIL))


def live(pod_spec: dict[str, Any]) -> dict[str, Any]:
    """A LeaderWorkerSet as upstream stores it (without the LWS docs' additions) with this worker
    spec."""
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": "sample", "namespace": "ns", "uid": "u-1", "generation": 1},
        "spec": {
            "replicas": 1, "startupPolicy": "LeaderCreated",
            "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
                "partition": 0, "maxUnavailable": 1, "maxSurge": 0}},
            "networkConfig": {"subdomainPolicy": "Shared"},
            "leaderWorkerTemplate": {"size": 2, "restartPolicy": "RecreateGroupOnPodRestart",
                                     "workerTemplate": {"spec": pod_spec}},
        },
    }


SAME = [
    pytest.param(
        {"containers": [{**CONTAINER, "env": [{"name": "A", "value": ""}]}]},
        '{"metadata":{},"spec":{"containers":[{"env":[{"name":"A"}],"image":"nginx:1",'
        '"name":"m","resources":{}}]}}', id="env value empty"),
    pytest.param(
        {"containers": [{**CONTAINER, "args": []}]},
        '{"metadata":{},"spec":{"containers":[{"image":"nginx:1","name":"m","resources":{}}]}}',
        id="args empty"),
    pytest.param(
        {"containers": [{**CONTAINER, "workingDir": ""}]},
        '{"metadata":{},"spec":{"containers":[{"image":"nginx:1","name":"m","resources":{}}]}}',
        id="workingDir empty"),
    pytest.param(
        {"containers": [{**CONTAINER, "stdin": False}]},
        '{"metadata":{},"spec":{"containers":[{"image":"nginx:1","name":"m","resources":{}}]}}',
        id="stdin false"),
    pytest.param(
        {"containers": [{**CONTAINER, "resources": {
            "requests": {"cpu": "1000m", "memory": "1024Mi"},
            "limits": {"cpu": 125, "google.com/tpu": 4}}}]},
        '{"metadata":{},"spec":{"containers":[{"image":"nginx:1","name":"m","resources":'
        '{"limits":{"cpu":"125","google.com/tpu":"4"},"requests":{"cpu":"1","memory":"1Gi"}}}]}}',
        id="1000m 1024Mi and bare integers"),
    pytest.param(
        {"containers": [{**CONTAINER, "command": [
            "sh", "-c", "echo ready > /tmp/ready && sleep 3600"]}]},
        '{"metadata":{},"spec":{"containers":[{"command":["sh","-c",'
        '"echo ready \\u003e /tmp/ready \\u0026\\u0026 sleep 3600"],"image":"nginx:1",'
        '"name":"m","resources":{}}]}}', id="shell command with > and &&"),
    pytest.param(
        {"containers": [dict(CONTAINER)]},
        '{"metadata":{},"spec":{"containers":[{"image":"nginx:1","name":"m","resources":{}}]}}',
        id="no resources"),
    pytest.param(
        {"containers": [dict(CONTAINER)]},
        '{"metadata":{"creationTimestamp":null},"spec":{"containers":[{"image":"nginx:1",'
        '"name":"m","resources":{}}]}}', id="creationTimestamp null of older releases"),
    pytest.param(
        {"hostNetwork": False, "nodeSelector": {}, "tolerations": [], "serviceAccountName": "",
         "containers": [{**CONTAINER, "imagePullPolicy": "", "ports": [{"containerPort": 8080}],
                         "volumeMounts": [{"name": "v", "mountPath": "/v", "readOnly": False}]}],
         "volumes": [{"name": "v", "emptyDir": {}}]},
        '{"metadata":{},"spec":{"containers":[{"image":"nginx:1","name":"m","ports":'
        '[{"containerPort":8080}],"resources":{},"volumeMounts":[{"mountPath":"/v","name":"v"}]}],'
        '"volumes":[{"emptyDir":{},"name":"v"}]}}', id="other omitempty zero values"),
    pytest.param(
        {"terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False,
         "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute",
                          "tolerationSeconds": 0}],
         "containers": [dict(CONTAINER)]},
        '{"metadata":{},"spec":{"automountServiceAccountToken":false,"containers":[{"image":'
        '"nginx:1","name":"m","resources":{}}],"terminationGracePeriodSeconds":0,"tolerations":'
        '[{"effect":"NoExecute","key":"k","operator":"Exists","tolerationSeconds":0}]}}',
        id="pointer zero values Go keeps"),
]


@pytest.mark.parametrize(("pod_spec", "go_template"), SAME)
def test_go_rendering_of_the_live_templates_is_the_same_content(
        pod_spec: dict[str, Any], go_template: str) -> None:
    stored = go(go_template)
    # Not the same bytes (Go adds "metadata":{} and "resources":{} at least), same content.
    assert canonical_json(stored) != canonical_json(revision_patch(live(pod_spec)))
    assert template_difference(live(pod_spec), stored) is None


# (the live worker spec, the stored one (written as Go writes it), where they differ).
DIFFERENT = [
    pytest.param({"containers": [{**CONTAINER, "image": "nginx:2"}]},
                 {"containers": [CONTAINER]}, ".containers[0].image", id="image"),
    pytest.param({"containers": [{**CONTAINER, "args": ["x"]}]},
                 {"containers": [CONTAINER]}, ".containers[0].args", id="args"),
    pytest.param({"containers": [{**CONTAINER, "env": [{"name": "A", "value": "1"}]}]},
                 {"containers": [{**CONTAINER, "env": [{"name": "A"}]}]},
                 ".containers[0].env[0].value", id="env value"),
    pytest.param({"containers": [{**CONTAINER, "resources": {"limits": {"cpu": "1001m"}}}]},
                 {"containers": [{**CONTAINER, "resources": {"limits": {"cpu": "1"}}}]},
                 ".containers[0].resources.limits.cpu", id="quantity value"),
    # Pointer fields: a zero value is not absent.
    pytest.param({"terminationGracePeriodSeconds": 0, "containers": [CONTAINER]},
                 {"containers": [CONTAINER]}, ".terminationGracePeriodSeconds",
                 id="terminationGracePeriodSeconds 0"),
    pytest.param({"automountServiceAccountToken": False, "containers": [CONTAINER]},
                 {"containers": [CONTAINER]}, ".automountServiceAccountToken",
                 id="automountServiceAccountToken false"),
    pytest.param({"containers": [CONTAINER], "tolerations": [
        {"key": "k", "operator": "Exists", "tolerationSeconds": 0}]},
                 {"containers": [CONTAINER], "tolerations": [{"key": "k", "operator": "Exists"}]},
                 ".tolerations[0].tolerationSeconds", id="tolerationSeconds 0"),
    pytest.param({"containers": [CONTAINER], "volumes": [
        {"name": "v", "csi": {"driver": "d", "readOnly": False}}]},
                 {"containers": [CONTAINER], "volumes": [{"name": "v", "csi": {"driver": "d"}}]},
                 ".volumes[0].csi.readOnly", id="readOnly of a CSI volume is a pointer"),
    pytest.param({"containers": [CONTAINER], "volumes": [
        {"name": "v", "emptyDir": {"sizeLimit": "0"}}]},
                 {"containers": [CONTAINER], "volumes": [{"name": "v", "emptyDir": {}}]},
                 ".volumes[0].emptyDir.sizeLimit", id="sizeLimit 0"),
    # An empty struct in a pointer field means something.
    pytest.param({"containers": [CONTAINER], "volumes": [{"name": "v", "emptyDir": {}}]},
                 {"containers": [CONTAINER], "volumes": [{"name": "v"}]},
                 ".volumes[0].emptyDir", id="emptyDir {}"),
    pytest.param({"containers": [CONTAINER], "affinity": {"podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"topologyKey": "zone", "labelSelector": {}}]}}},
                 {"containers": [CONTAINER], "affinity": {"podAffinity": {
                     "requiredDuringSchedulingIgnoredDuringExecution": [
                         {"topologyKey": "zone"}]}}},
                 ".affinity.podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0]"
                 ".labelSelector", id="labelSelector {} selects every pod"),
    # Map entries are data.
    pytest.param({"containers": [CONTAINER], "nodeSelector": {"pool": ""}},
                 {"containers": [CONTAINER]}, ".nodeSelector", id="empty node selector value"),
]

_SPEC_PATH = ".spec.leaderWorkerTemplate.workerTemplate.spec"


@pytest.mark.parametrize(("live_spec", "stored_spec", "path"), DIFFERENT)
def test_a_real_difference_is_still_one(live_spec: dict[str, Any], stored_spec: dict[str, Any],
                                        path: str) -> None:
    stored = revision_patch(live(stored_spec))
    assert template_difference(live(live_spec), stored) == _SPEC_PATH + path
    # and the other way round
    assert template_difference(live(stored_spec), revision_patch(live(live_spec))) is not None


@pytest.mark.parametrize(
    ("holder", "field", "value", "absent"),
    [
        ("resourceFieldRef", "divisor", "0", True),  # Go writes "0" for an absent divisor
        ("volumeMounts", "readOnly", False, True),
        ("csi", "readOnly", False, False),  # *bool in a CSI volume
        ("ports", "hostPort", 0, True),
        ("volumeMounts", "subPath", "", True),
        ("options", "value", "", False),  # dnsConfig.options[].value is a *string
        ("env", "value", "", True),
        ("containers", "restartPolicy", "", False),  # a container's is a pointer, a pod's not
        ("spec", "restartPolicy", "", True),
    ],
)
def test_zero_value_is_absent_only_in_a_non_pointer_field(holder: str, field: str, value: Any,
                                                           absent: bool) -> None:
    # A list element's fields are held by the list's field, as in the templates.
    assert normal_form([{field: value}], holder) == [{} if absent else {field: value}]


def test_network_config_absent_from_an_old_revision_takes_the_live_one() -> None:
    stored = revision_patch(live({"containers": [CONTAINER]}))
    del stored["spec"]["networkConfig"]
    unique = copy.deepcopy(live({"containers": [CONTAINER]}))
    unique["spec"]["networkConfig"] = {"subdomainPolicy": "UniquePerReplica"}
    assert template_difference(unique, stored) is None


def test_controller_only_fields_of_a_stored_revision_are_ignored() -> None:
    stored = revision_patch(live({"containers": [CONTAINER]}))
    stored["spec"]["leaderWorkerTemplate"]["maxGroupRestarts"] = 3
    assert template_difference(live({"containers": [CONTAINER]}), stored) is None


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1000m", Fraction(1)), ("1", Fraction(1)), (1, Fraction(1)), ("1024Mi", Fraction(2**30)),
        ("1Gi", Fraction(2**30)), ("0.5", Fraction(1, 2)), (0.5, Fraction(1, 2)),
        (0.1, Fraction(1, 10)), ("500m", Fraction(1, 2)), ("1e3", Fraction(1000)),
        ("1E", Fraction(10**18)), ("1k", Fraction(1000)), ("1.5n", Fraction(2, 10**9)),
        ("125", Fraction(125)), (125, Fraction(125)),
        ("lots", None), (True, None), ("", None), (None, None),
    ],
)
def test_quantity_value(text: Any, value: Fraction | None) -> None:
    assert parse_quantity(text) == value


def test_absent_is_its_own_value() -> None:
    assert normal_form(None) is ABSENT
    assert normal_form([]) is ABSENT
    assert normal_form({}, "metadata") is ABSENT
    assert normal_form({}, "emptyDir") == {}
    assert normal_form({"a": ""}, "labels") == {"a": ""}
