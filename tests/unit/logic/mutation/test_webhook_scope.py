"""Whether our pod webhook's configuration entry serves a pod (``logic.mutation.scope``): rules,
namespaceSelector and objectSelector as the API server matches them, and "no" wherever the
operator cannot be sure."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.admission import registration
from lws_operator.logic.mutation.scope import (
    pod_scope,
    pod_webhook_entry,
    rule_covers_pod_create,
    selects,
)

NAME = "leaderworkerset.sigs.k8s.io/name"
NS = "kubernetes.io/metadata.name"
POD = {NAME: "a", "leaderworkerset.sigs.k8s.io/worker-index": "0"}
RULE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
        "resources": ["pods"]}


def hook(**fields: Any) -> dict[str, Any]:
    return {"name": "mpod.kb.io", "rules": [RULE], "failurePolicy": "Fail",
            "objectSelector": {"matchExpressions": [{"key": NAME, "operator": "Exists"}]},
            **fields}


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        (None, {}, True),
        ({}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "1"}, True),
        ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
        ({"matchLabels": {"a": "1"}}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1", "2"]}]},
         {"a": "2"}, True),
        ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]},
         {"a": "1"}, False),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
        ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {}, False),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {}, True),
        ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": "x"}, False),
        # Every requirement must hold, matchLabels and matchExpressions together.
        ({"matchLabels": {"b": "1"},
          "matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": "x"}, False),
        # An operator the API server would reject or a later one: cannot tell...
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]}]},
         {"a": "2"}, None),
        # ...unless another requirement already fails.
        ({"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["1"]},
                               {"key": "b", "operator": "Exists"}]}, {"a": "2"}, False),
    ],
)
def test_selects(selector: dict[str, Any] | None, labels: dict[str, str],
                 expected: bool | None) -> None:
    assert selects(selector, labels) is expected


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        (RULE, True),
        ({**RULE, "operations": ["*"]}, True),
        ({**RULE, "operations": ["UPDATE"]}, False),
        ({**RULE, "apiGroups": ["*"], "apiVersions": ["*"], "resources": ["*"]}, True),
        ({**RULE, "resources": ["*/*"]}, True),
        ({**RULE, "resources": ["pods/eviction"]}, False),
        ({**RULE, "apiGroups": ["apps"]}, False),
        ({**RULE, "apiVersions": ["v1beta1"]}, False),
        ({**RULE, "scope": "Namespaced"}, True),
        ({**RULE, "scope": "Cluster"}, False),
    ],
)
def test_rule_covers_pod_create(rule: dict[str, Any], expected: bool) -> None:
    assert rule_covers_pod_create(rule) is expected


@pytest.mark.parametrize(
    ("entry", "namespace", "labels", "serves", "why"),
    [
        (hook(), "team-a", POD, True, ""),
        (None, "team-a", POD, False, "is not registered"),
        # The registration's confinement (``only_namespaces``) and the chart's
        # namespaceSelectorExpressions on the name label.
        (hook(namespaceSelector={"matchExpressions": [
            {"key": NS, "operator": "In", "values": ["team-a", "team-b"]}]}),
         "team-a", POD, True, ""),
        (hook(namespaceSelector={"matchExpressions": [
            {"key": NS, "operator": "In", "values": ["team-b"]}]}),
         "team-a", POD, False, "does not serve namespace team-a"),
        (hook(namespaceSelector={"matchExpressions": [
            {"key": NS, "operator": "NotIn", "values": ["team-a"]}]}),
         "team-a", POD, False, "does not serve namespace team-a"),
        (hook(namespaceSelector={"matchLabels": {NS: "team-a"}}), "team-a", POD, True, ""),
        # Another namespace label: the operator does not read namespaces, so it cannot tell.
        (hook(namespaceSelector={"matchLabels": {"lws": "on"}}), "team-a", POD, False,
         "namespace labels the operator does not read"),
        (hook(namespaceSelector={"matchExpressions": [
            {"key": "lws", "operator": "DoesNotExist"}]}), "team-a", POD, False,
         "namespace labels the operator does not read"),
        (hook(objectSelector={"matchLabels": {"tier": "gpu"}}), "team-a", POD, False,
         "objectSelector"),
        (hook(objectSelector={"matchLabels": {"tier": "gpu"}}), "team-a",
         {**POD, "tier": "gpu"}, True, ""),
        (hook(rules=[{**RULE, "operations": ["UPDATE"]}]), "team-a", POD, False,
         "no rule for pod creation"),
        (hook(rules=[]), "team-a", POD, False, "no rule for pod creation"),
        (hook(matchConditions=[{"name": "x", "expression": "true"}]), "team-a", POD, False,
         "matchConditions"),
        # The failure policy does not change the answer (``logic.mutation.scope``).
        (hook(failurePolicy="Ignore"), "team-a", POD, True, ""),
    ],
)
def test_pod_scope(entry: dict[str, Any] | None, namespace: str, labels: dict[str, str],
                   serves: bool, why: str) -> None:
    scope = pod_scope(entry, namespace, labels)
    assert scope.serves is serves
    assert why in scope.why


@pytest.mark.parametrize("only", [(), ("team-a", "lws-system")])
def test_our_own_registration_serves_what_it_confines_to(only: tuple[str, ...]) -> None:
    mutating = registration.render(registration.ServiceTarget(), ca_bundle=b"ca",
                                   only_namespaces=only)[0]
    entry = pod_webhook_entry(mutating, "mpod.kb.io", ca_bundle="Y2E=",
                              service=("lws-system", "lws-webhook-service"))
    assert entry is not None
    assert pod_scope(entry, "team-a", POD).serves
    assert pod_scope(entry, "team-b", POD).serves is not only
    # A pod of no LeaderWorkerSet is left out by the objectSelector.
    assert not pod_scope(entry, "team-a", {"app": "web"}).serves


def test_the_entry_must_reach_us() -> None:
    url = "https://127.0.0.1:9443"
    mutating = registration.render(registration.UrlTarget(url), ca_bundle=b"ca")[0]
    pod_url = url + "/mutate--v1-pod"
    assert pod_webhook_entry(mutating, "mpod.kb.io", ca_bundle="Y2E=", url=pod_url) is not None
    # Another CA, another URL, a Service instead, another name, no configuration: not ours.
    assert pod_webhook_entry(mutating, "mpod.kb.io", ca_bundle="b3RoZXI=", url=pod_url) is None
    assert pod_webhook_entry(mutating, "mpod.kb.io", url=url + "/other") is None
    assert pod_webhook_entry(mutating, "mpod.kb.io", service=("lws-system", "x")) is None
    assert pod_webhook_entry(mutating, "vpod.kb.io", url=pod_url) is None
    assert pod_webhook_entry(None, "mpod.kb.io") is None
