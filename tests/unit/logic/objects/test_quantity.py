"""Resource quantities compared by value (``logic.objects.quantity``) and the desired-vs-live check
that uses them (found running upstream's
samples: bare-integer and non-canonical quantities re-applied the leader
StatefulSet on every pass)."""

from __future__ import annotations

import copy
from fractions import Fraction
from typing import Any

import pytest

from lws_operator.logic.objects.difference import first_difference
from lws_operator.logic.objects.quantity import (
    MILLI,
    NANO,
    parse_quantity,
    quantity_unit,
    same_quantity,
)
from tests.harness.quantities import IN_RESOURCE_LIST, SINGLE


@pytest.mark.parametrize(("written", "stored"), IN_RESOURCE_LIST)
def test_a_resource_list_value_equals_its_stored_form(written: Any, stored: str) -> None:
    assert parse_quantity(written, MILLI) == parse_quantity(stored, MILLI)
    assert same_quantity(written, stored, MILLI)


@pytest.mark.parametrize(("written", "stored"), SINGLE)
def test_a_single_value_equals_its_stored_form(written: Any, stored: str) -> None:
    assert parse_quantity(written) == parse_quantity(stored)
    assert same_quantity(written, stored, NANO)


def test_sub_milli_values_differ_outside_resource_lists() -> None:
    assert not same_quantity("0.5n", "1m")
    assert same_quantity("0.5n", "1m", MILLI)
    assert parse_quantity("-0.5n", MILLI) == Fraction(-1, 1000)


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("4", Fraction(4)),
        (4, Fraction(4)),
        (0.25, Fraction(1, 4)),
        ("500m", Fraction(1, 2)),
        ("250u", Fraction(1, 4000)),
        ("3n", Fraction(3, 10**9)),
        ("2k", Fraction(2000)),
        ("2M", Fraction(2 * 10**6)),
        ("2G", Fraction(2 * 10**9)),
        ("2T", Fraction(2 * 10**12)),
        ("2P", Fraction(2 * 10**15)),
        ("2E", Fraction(2 * 10**18)),
        ("3Ki", Fraction(3 * 2**10)),
        ("3Mi", Fraction(3 * 2**20)),
        ("3Gi", Fraction(3 * 2**30)),
        ("3Ti", Fraction(3 * 2**40)),
        ("3Pi", Fraction(3 * 2**50)),
        ("1Ei", Fraction(2**60)),
        ("2e2", Fraction(200)),
        ("2E-2", Fraction(2, 100)),
        ("-1.5", Fraction(-3, 2)),
        # Below a nano unit: rounded away from zero, as the server stores it.
        ("0.1n", Fraction(1, 10**9)),
        ("-0.1n", Fraction(-1, 10**9)),
        ("1e-12", Fraction(1, 10**9)),
        # Binary SI is capped at 2^63-1; decimal forms are not.
        ("16Ei", Fraction(2**63 - 1)),
        ("10E", Fraction(10**19)),
    ],
)
def test_parse_quantity(text: Any, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize(
    "text",
    ["", ".", "+", "-", "Mi", "e3", "1K", "1ki", "1mi", "1Ki2", "1.5.0", " 1", "1 ", "1_000",
     "NaN", "Infinity", "0x10", "1e", "1e3.5", "1e99999", "1e" + "9" * 5000, True, None,
     [1], {"a": 1}, float("nan"), float("inf")],
)
def test_what_the_server_refuses_is_not_a_quantity(text: Any) -> None:
    assert parse_quantity(text) is None


@pytest.mark.parametrize(
    ("desired", "live", "same"),
    [
        (4, "4", True),
        ("1024Mi", "1Gi", True),
        ("1000m", "1", True),
        (0.5, "500m", True),
        ("1", "2", False),
        ("1Gi", "1G", False),
        ("100m", "1", False),
        (4, "4Ki", False),
        # Not quantities: compared as text.
        ("abc", "abc", True),
        ("abc", "abd", False),
        (True, "1", False),
    ],
)
def test_same_quantity(desired: Any, live: Any, same: bool) -> None:
    assert same_quantity(desired, live) is same


@pytest.mark.parametrize(
    ("keys", "unit"),
    [
        (("spec", "template", "spec", "containers", "resources", "limits", "google.com/tpu"),
         MILLI),
        (("spec", "template", "spec", "initContainers", "resources", "requests", "cpu"), MILLI),
        (("spec", "template", "spec", "resources", "limits", "memory"), MILLI),  # pod level
        (("spec", "template", "spec", "overhead", "cpu"), MILLI),
        (("spec", "volumeClaimTemplates", "spec", "resources", "requests", "storage"), MILLI),
        (("spec", "template", "spec", "volumes", "ephemeral", "volumeClaimTemplate", "spec",
          "resources", "requests", "storage"), MILLI),
        (("spec", "template", "spec", "volumes", "emptyDir", "sizeLimit"), NANO),
        (("spec", "template", "spec", "containers", "env", "valueFrom", "resourceFieldRef",
          "divisor"), NANO),
        (("spec", "template", "spec", "volumes", "downwardAPI", "items", "resourceFieldRef",
          "divisor"), NANO),
        (("spec", "template", "spec", "containers", "env", "value"), None),
        (("spec", "template", "metadata", "annotations", "example.com/cpu"), None),
        (("spec", "replicas"), None),
        (("spec", "template", "spec", "containers", "resources", "claims", "name"), None),
        (("spec", "template", "spec", "containers", "resources", "limits"), None),
        (("limits", "cpu"), None),
    ],
)
def test_quantity_unit(keys: tuple[str, ...], unit: Fraction | None) -> None:
    assert quantity_unit(keys) == unit


def _statefulset(tpu: Any, cpu: Any, memory: Any, storage: Any, size_limit: Any,
                 divisor: Any, overhead: Any, pod_memory: Any) -> dict[str, Any]:
    """A leader StatefulSet with a quantity in every place a template can hold one."""
    resources = {"limits": {"google.com/tpu": tpu, "memory": memory},
                 "requests": {"google.com/tpu": tpu, "cpu": cpu}}
    return {"spec": {
        "replicas": 3,
        "template": {"metadata": {"labels": {"size": "4"}}, "spec": {
            "overhead": {"cpu": overhead},
            "resources": {"limits": {"memory": pod_memory}},
            "initContainers": [{"name": "init", "resources": copy.deepcopy(resources)}],
            "containers": [{"name": "main", "resources": copy.deepcopy(resources), "env": [
                {"name": "CPUS", "valueFrom": {"resourceFieldRef": {
                    "resource": "limits.cpu", "divisor": divisor}}}]}],
            "volumes": [{"name": "scratch", "emptyDir": {"sizeLimit": size_limit}},
                        {"name": "eph", "ephemeral": {"volumeClaimTemplate": {"spec": {
                            "resources": {"requests": {"storage": storage}}}}}}]}},
        "volumeClaimTemplates": [{"spec": {"resources": {"requests": {"storage": storage}}}}],
    }}


WRITTEN = _statefulset(tpu=4, cpu="1000m", memory="1024Mi", storage="0.5Gi", size_limit=1e3,
                       divisor=1, overhead=0.5, pod_memory="2048Mi")
STORED = _statefulset(tpu="4", cpu="1", memory="1Gi", storage="512Mi", size_limit="1k",
                      divisor="1", overhead="500m", pod_memory="2Gi")


def test_a_template_as_written_is_in_place_once_stored_canonically() -> None:
    assert first_difference(WRITTEN, STORED) is None


@pytest.mark.parametrize(
    ("change", "path"),
    [
        ({"tpu": 8}, ".spec.template.spec.initContainers[0].resources.limits.google.com/tpu"),
        ({"cpu": "1001m"}, ".spec.template.spec.initContainers[0].resources.requests.cpu"),
        ({"memory": "1G"}, ".spec.template.spec.initContainers[0].resources.limits.memory"),
        ({"storage": "1Gi"}, ".spec.template.spec.volumes[1].ephemeral.volumeClaimTemplate.spec"
                             ".resources.requests.storage"),
        ({"size_limit": "2k"}, ".spec.template.spec.volumes[0].emptyDir.sizeLimit"),
        ({"divisor": "1m"}, ".spec.template.spec.containers[0].env[0].valueFrom"
                            ".resourceFieldRef.divisor"),
        ({"overhead": 1}, ".spec.template.spec.overhead.cpu"),
        ({"pod_memory": "2G"}, ".spec.template.spec.resources.limits.memory"),
    ],
)
def test_a_changed_quantity_is_still_a_difference(change: dict[str, Any], path: str) -> None:
    values = {"tpu": 4, "cpu": "1000m", "memory": "1024Mi", "storage": "0.5Gi",
              "size_limit": 1e3, "divisor": 1, "overhead": 0.5, "pod_memory": "2048Mi"}
    assert first_difference(_statefulset(**{**values, **change}), STORED) == path


def test_only_quantity_fields_compare_by_value() -> None:
    """A label or env value that reads like a quantity is text: "1000m" is not "1" there."""
    desired = {"metadata": {"labels": {"a": "1000m"}}, "env": [{"name": "X", "value": "1024Mi"}]}
    assert first_difference(desired, {"metadata": {"labels": {"a": "1"}},
                                      "env": [{"name": "X", "value": "1024Mi"}]}) == (
        ".metadata.labels.a")
    assert first_difference(desired, {"metadata": {"labels": {"a": "1000m"}},
                                      "env": [{"name": "X", "value": "1Gi"}]}) == ".env[0].value"
