"""What a CRD's schema may say, shared by the checks of the LeaderWorkerSet CRD and of the
DisaggregatedSet CRDs (whose roles embed the LeaderWorkerSet spec): the keys of a structural
schema, upstream's defaults, and a walk over every schema node."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Schema = dict[str, Any]

LWT = "spec.leaderWorkerTemplate"

# Every key a CRD's JSONSchemaProps accepts (apiextensions.k8s.io/v1), minus the ones a structural
# schema or this project never uses ($ref, definitions, dependencies, ...).
ALLOWED_KEYS = frozenset({
    "description", "type", "format", "title", "default", "enum", "example", "externalDocs",
    "maximum", "exclusiveMaximum", "minimum", "exclusiveMinimum", "multipleOf",
    "maxLength", "minLength", "pattern", "maxItems", "minItems", "uniqueItems",
    "maxProperties", "minProperties", "required", "items", "properties", "additionalProperties",
    "anyOf", "allOf", "oneOf", "not", "nullable",
    "x-kubernetes-preserve-unknown-fields", "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string", "x-kubernetes-list-map-keys", "x-kubernetes-list-type",
    "x-kubernetes-map-type", "x-kubernetes-validations",
})
SCALAR_TYPES = frozenset({"string", "integer", "number", "boolean"})

# The default markers of upstream's leaderworkerset_types.go, and the list-map keys the structural
# rules force a default on.
EXPECTED_DEFAULTS: dict[str, Any] = {
    "spec.replicas": 1,
    "spec.startupPolicy": "LeaderCreated",
    "spec.rolloutStrategy.type": "RollingUpdate",
    "spec.rolloutStrategy.rollingUpdateConfiguration.partition": 0,
    "spec.rolloutStrategy.rollingUpdateConfiguration.maxUnavailable": 1,
    "spec.rolloutStrategy.rollingUpdateConfiguration.maxSurge": 0,
    f"{LWT}.size": 1,
    f"{LWT}.restartPolicy": "RecreateGroupOnPodRestart",
    f"{LWT}.subGroupPolicy.subGroupPolicyType": "LeaderWorker",
}
LIST_MAP_KEY_DEFAULTS = {"protocol": "TCP", "name": ""}


def walk(node: Schema, path: str = "") -> Iterator[tuple[str, Schema]]:
    """Every schema node with its dotted path (``[]`` for items, ``{}`` for map values)."""
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from walk(child, f"{path}.{name}" if path else name)
    if isinstance(node.get("items"), dict):
        yield from walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from walk(node["additionalProperties"], f"{path}{{}}")
    for key in ("anyOf", "allOf", "oneOf"):
        for i, branch in enumerate(node.get(key, [])):
            yield from walk(branch, f"{path}<{key}{i}>")
