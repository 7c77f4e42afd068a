"""Exclusive-topology affinity terms (upstream's pod_webhook.go)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from lws_operator.logic.placement.affinity import (
    exclusive_affinity_applied,
    set_exclusive_affinities,
)

GROUP_KEY = "leaderworkerset.sigs.k8s.io/group-key"
SUBGROUP_KEY = "leaderworkerset.sigs.k8s.io/subgroup-key"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def affinity_term(key: str, topology: str, label: str = GROUP_KEY) -> dict[str, Any]:
    return {
        "labelSelector": {"matchExpressions": [{"key": label, "operator": "In", "values": [key]}]},
        "topologyKey": topology,
    }


def anti_affinity_term(key: str, topology: str, label: str = GROUP_KEY) -> dict[str, Any]:
    return {
        "labelSelector": {
            "matchExpressions": [
                {"key": label, "operator": "Exists"},
                {"key": label, "operator": "NotIn", "values": [key]},
            ]
        },
        "topologyKey": topology,
    }


USER_TERM = {
    "labelSelector": {"matchLabels": {"app": "cache"}},
    "topologyKey": "kubernetes.io/hostname",
}


def with_affinity(affinity: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p"}, "spec": {"affinity": affinity}}


@pytest.mark.parametrize(
    ("affinity", "expected"),
    [
        (None, False),
        ({}, False),
        ({"podAffinity": {REQUIRED: [affinity_term("k", "zone")]}}, False),
        ({"podAntiAffinity": {REQUIRED: [anti_affinity_term("k", "zone")]}}, False),
        (
            {
                "podAffinity": {REQUIRED: [affinity_term("k", "zone")]},
                "podAntiAffinity": {REQUIRED: [anti_affinity_term("k", "zone")]},
            },
            True,
        ),
        (
            {
                "podAffinity": {REQUIRED: [affinity_term("k", "rack")]},
                "podAntiAffinity": {REQUIRED: [anti_affinity_term("k", "zone")]},
            },
            False,
        ),
        # Any selector counts: only the topology keys are compared (upstream's check).
        (
            {
                "podAffinity": {REQUIRED: [USER_TERM, {**USER_TERM, "topologyKey": "zone"}]},
                "podAntiAffinity": {REQUIRED: [{**USER_TERM, "topologyKey": "zone"}]},
            },
            True,
        ),
        # Preferred terms do not count.
        (
            {
                "podAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 1, "podAffinityTerm": affinity_term("k", "zone")}
                    ]
                },
                "podAntiAffinity": {REQUIRED: [anti_affinity_term("k", "zone")]},
            },
            False,
        ),
        ({"podAffinity": None, "podAntiAffinity": {REQUIRED: None}}, False),
    ],
)
def test_exclusive_affinity_applied(affinity: Any, expected: bool) -> None:
    assert exclusive_affinity_applied(with_affinity(affinity), "zone") is expected


def test_terms_are_added_to_a_pod_without_affinity() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p"}}
    set_exclusive_affinities(pod, "abc", "topology.kubernetes.io/zone", GROUP_KEY)
    assert pod == {
        "metadata": {"name": "p"},
        "spec": {
            "affinity": {
                "podAffinity": {REQUIRED: [affinity_term("abc", "topology.kubernetes.io/zone")]},
                "podAntiAffinity": {
                    REQUIRED: [anti_affinity_term("abc", "topology.kubernetes.io/zone")]
                },
            }
        },
    }


def test_terms_are_appended_after_user_terms() -> None:
    pod = with_affinity(
        {
            "podAffinity": {REQUIRED: [USER_TERM]},
            "podAntiAffinity": {REQUIRED: [USER_TERM]},
            "nodeAffinity": {"x": 1},
        }
    )
    set_exclusive_affinities(pod, "abc", "zone", GROUP_KEY)
    assert pod["spec"]["affinity"] == {
        "podAffinity": {REQUIRED: [USER_TERM, affinity_term("abc", "zone")]},
        "podAntiAffinity": {REQUIRED: [USER_TERM, anti_affinity_term("abc", "zone")]},
        "nodeAffinity": {"x": 1},
    }


def test_null_sections_are_created() -> None:
    pod = with_affinity({"podAffinity": None, "podAntiAffinity": {REQUIRED: None}})
    set_exclusive_affinities(pod, "abc", "zone", SUBGROUP_KEY)
    assert pod["spec"]["affinity"] == {
        "podAffinity": {REQUIRED: [affinity_term("abc", "zone", SUBGROUP_KEY)]},
        "podAntiAffinity": {REQUIRED: [anti_affinity_term("abc", "zone", SUBGROUP_KEY)]},
    }


def test_terms_are_not_reapplied() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p"}}
    set_exclusive_affinities(pod, "abc", "zone", GROUP_KEY)
    once = copy.deepcopy(pod)
    set_exclusive_affinities(pod, "abc", "zone", GROUP_KEY)
    assert pod == once


def test_same_topology_key_for_group_and_subgroup_skips_the_second_call() -> None:
    """Upstream quirk, kept: the subgroup's terms are never added."""
    pod: dict[str, Any] = {"metadata": {"name": "p"}}
    set_exclusive_affinities(pod, "group", "zone", GROUP_KEY)
    set_exclusive_affinities(pod, "subgroup", "zone", SUBGROUP_KEY)
    assert pod["spec"]["affinity"] == {
        "podAffinity": {REQUIRED: [affinity_term("group", "zone")]},
        "podAntiAffinity": {REQUIRED: [anti_affinity_term("group", "zone")]},
    }


def test_different_topology_keys_give_two_pairs() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p"}}
    set_exclusive_affinities(pod, "group", "zone", GROUP_KEY)
    set_exclusive_affinities(pod, "subgroup", "rack", SUBGROUP_KEY)
    assert pod["spec"]["affinity"] == {
        "podAffinity": {
            REQUIRED: [
                affinity_term("group", "zone"),
                affinity_term("subgroup", "rack", SUBGROUP_KEY),
            ]
        },
        "podAntiAffinity": {
            REQUIRED: [
                anti_affinity_term("group", "zone"),
                anti_affinity_term("subgroup", "rack", SUBGROUP_KEY),
            ]
        },
    }


def test_empty_topology_key_still_adds_terms() -> None:
    pod: dict[str, Any] = {"metadata": {"name": "p"}}
    set_exclusive_affinities(pod, "abc", "", GROUP_KEY)
    assert pod["spec"]["affinity"]["podAffinity"][REQUIRED] == [affinity_term("abc", "")]
