"""Exclusive topology placement: the pod affinity terms behind `exclusive-topology` (upstream's
exclusive affinity (pod_webhook.go)).

One required pod-affinity term pulls a group (or subgroup) into a single topology domain, and one
required anti-affinity term keeps every other group out of it. Both select on a key label whose
value is the group's own key, so the terms need nothing but the pod itself. The terms carry no
namespaces and no namespaceSelector: exclusivity holds between pods of the same namespace only,
as upstream's does.
"""

from __future__ import annotations

from typing import Any


def _required_terms(affinity: dict[str, Any], kind: str) -> list[Any]:
    section = affinity.get(kind) or {}
    return list(section.get("requiredDuringSchedulingIgnoredDuringExecution") or [])


def exclusive_affinity_applied(pod: dict[str, Any], topology_key: str) -> bool:
    """Whether the pod already has a required podAffinity term *and* a required podAntiAffinity
    term on `topology_key`, whatever their selectors.

    This is upstream's idempotence test and its quirk is kept on purpose: when the group and the
    subgroup use the same topology key, the group's terms satisfy it and the subgroup's terms are
    never added.
    """
    affinity = (pod.get("spec") or {}).get("affinity")
    if not affinity or not affinity.get("podAffinity") or not affinity.get("podAntiAffinity"):
        return False

    def on_key(term: Any) -> bool:
        return isinstance(term, dict) and term.get("topologyKey", "") == topology_key

    return any(map(on_key, _required_terms(affinity, "podAffinity"))) and any(
        map(on_key, _required_terms(affinity, "podAntiAffinity"))
    )


def exclusive_terms(key: str, topology_key: str, label_key: str) -> tuple[dict[str, Any], ...]:
    """The (affinity, anti-affinity) pair for the group whose `label_key` label equals `key`."""
    affinity_term = {
        "labelSelector": {
            "matchExpressions": [{"key": label_key, "operator": "In", "values": [key]}],
        },
        "topologyKey": topology_key,
    }
    anti_affinity_term = {
        "labelSelector": {
            "matchExpressions": [
                {"key": label_key, "operator": "Exists"},
                {"key": label_key, "operator": "NotIn", "values": [key]},
            ],
        },
        "topologyKey": topology_key,
    }
    return affinity_term, anti_affinity_term


def set_exclusive_affinities(
    pod: dict[str, Any], key: str, topology_key: str, label_key: str
) -> None:
    """Append the exclusive terms to the pod (in place), after any terms the user wrote.

    Does nothing when `exclusive_affinity_applied` says the terms are already there.
    """
    if exclusive_affinity_applied(pod, topology_key):
        return
    affinity = _child(_child(pod, "spec"), "affinity")
    affinity_term, anti_affinity_term = exclusive_terms(key, topology_key, label_key)
    for kind, term in (("podAffinity", affinity_term), ("podAntiAffinity", anti_affinity_term)):
        section = _child(affinity, kind)
        terms: list[Any] | None = section.get("requiredDuringSchedulingIgnoredDuringExecution")
        if terms is None:
            terms = section["requiredDuringSchedulingIgnoredDuringExecution"] = []
        terms.append(term)


def _child(parent: dict[str, Any], key: str) -> dict[str, Any]:
    child: dict[str, Any] | None = parent.get(key)
    if child is None:
        child = parent[key] = {}
    return child
