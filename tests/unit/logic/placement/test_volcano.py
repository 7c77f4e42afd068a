"""The volcano provider's PodGroup (upstream's pkg/schedulerprovider): minMember, minResources,
queue, owner."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from lws_operator.logic.placement.volcano import (
    format_quantity,
    parse_quantity,
    pod_group,
    pod_requests,
)

P = "leaderworkerset.sigs.k8s.io/"


@pytest.mark.parametrize(("text", "value"), [
    ("4", Fraction(4)), ("500m", Fraction(1, 2)), ("2Gi", Fraction(2 * 2**30)),
    ("1k", Fraction(1000)), ("1e3", Fraction(1000)), ("0.5", Fraction(1, 2)), (8, Fraction(8)),
])
def test_parse_quantity(text: Any, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "lots", "1Qi", "--1"])
def test_bad_quantity(bad: str) -> None:
    with pytest.raises(ValueError, match="not a quantity"):
        parse_quantity(bad)


def test_format_quantity() -> None:
    assert format_quantity(Fraction(3)) == "3"
    assert format_quantity(Fraction(3, 2)) == "1500m"
    assert format_quantity(Fraction(1, 3000)) == "1m"  # rounded up


def test_effective_pod_requests() -> None:
    """max(regular + sidecars, peak init), plus overhead; limits stand in for requests."""
    template = {"spec": {
        "containers": [{"name": "a", "resources": {"requests": {"cpu": "1"}}},
                       {"name": "b", "resources": {"limits": {"nvidia.com/gpu": "8"}}}],
        "initContainers": [
            {"name": "sidecar", "restartPolicy": "Always", "resources": {"requests": {"cpu": "1"}}},
            {"name": "setup", "resources": {"requests": {"cpu": "4", "memory": "1Gi"}}}],
        "overhead": {"cpu": "100m"}}}
    assert pod_requests(template) == {"cpu": Fraction(51, 10), "memory": Fraction(2**30),
                                      "nvidia.com/gpu": Fraction(8)}


def make_lws(startup: str = "LeaderCreated") -> dict[str, Any]:
    return {"metadata": {"name": "v", "namespace": "ns", "annotations": {
        "scheduling.volcano.sh/queue-name": "q1", "volcano.sh/extra": "x", "other": "y"}},
        "spec": {"startupPolicy": startup, "leaderWorkerTemplate": {
            "size": 4,
            "leaderTemplate": {"spec": {"containers": [
                {"name": "l", "resources": {"requests": {"cpu": "2"}}}]}},
            "workerTemplate": {"spec": {"containers": [
                {"name": "w", "resources": {"limits": {"nvidia.com/gpu": "8", "cpu": "1"}}}]}}}}}


def leader(annotated: bool = True) -> dict[str, Any]:
    return {"metadata": {"name": "v-1", "uid": "u1", "labels": {
        P + "name": "v", P + "group-index": "1", P + "template-revision-hash": "r"},
        "annotations": {"scheduling.k8s.io/group-name": "v-1-r"} if annotated else {}}}


@pytest.mark.parametrize(("startup", "min_member"), [("LeaderCreated", 4), ("LeaderReady", 1)])
def test_pod_group(startup: str, min_member: int) -> None:
    group = pod_group(make_lws(startup), leader())
    assert group == {
        "apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup",
        "metadata": {"name": "v-1-r", "namespace": "ns",
                     "labels": {P + "name": "v", P + "group-index": "1",
                                P + "template-revision-hash": "r"},
                     "annotations": {"volcano.sh/extra": "x"},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "v-1",
                                          "uid": "u1", "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {"minMember": min_member, "queue": "q1",
                 "minResources": {"cpu": "5", "nvidia.com/gpu": "24"}}}


def test_no_pod_group_without_the_annotation() -> None:
    assert pod_group(make_lws(), leader(annotated=False)) is None
