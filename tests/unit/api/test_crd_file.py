"""The committed LeaderWorkerSet CRD is a valid structural schema with our API's shape.

The API server is the final judge (``tests/integration/test_crd.py`` installs the file), but these
checks run in milliseconds without a cluster and name the offending path. They also pin what the
file must keep saying: exactly the upstream CRD defaults, exactly our enums, restricted embedded
metadata, list semantics of the Kubernetes types, and one schema property per field of the pydantic
models in ``lws_operator/api/models.py`` (so a model change without a regenerated CRD fails here).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from e2e.cluster.launcher import CRD_FILE
from lws_operator.api import models

REPO = Path(__file__).resolve().parents[3]

Schema = dict[str, Any]

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

SPEC = "spec"
LWT = "spec.leaderWorkerTemplate"
WORKER_POD = f"{LWT}.workerTemplate.spec"

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

EXPECTED_ENUMS: dict[str, Any] = {
    "spec.startupPolicy": models.StartupPolicy,
    "spec.rolloutStrategy.type": models.RolloutStrategyType,
    "spec.networkConfig.subdomainPolicy": models.SubdomainPolicy,
    "spec.groupIdentity": models.GroupIdentity,
    "spec.groupReplacementPolicy": models.GroupReplacementPolicy,
    "spec.podTerminationPolicy": models.PodTerminationPolicy,
    f"{LWT}.restartPolicy": models.RestartPolicy,
    f"{LWT}.subGroupPolicy.subGroupPolicyType": models.SubGroupPolicyType,
}

GANG_LEVELS = ("spec.scheduling", "spec.scheduling.replica", "spec.scheduling.replica.leader",
               "spec.scheduling.replica.worker")

# Schema path -> the model whose fields it must hold, property for field.
MODEL_AT: dict[str, type[BaseModel]] = {
    "spec": models.LeaderWorkerSetSpec,
    LWT: models.LeaderWorkerTemplate,
    f"{LWT}.restartBackoff": models.RestartBackoff,
    f"{LWT}.subGroupPolicy": models.SubGroupPolicy,
    f"{LWT}.persistentVolumeClaimRetentionPolicy": models.PersistentVolumeClaimRetentionPolicy,
    "spec.rolloutStrategy": models.RolloutStrategy,
    "spec.rolloutStrategy.rollingUpdateConfiguration": models.RollingUpdateConfiguration,
    "spec.networkConfig": models.NetworkConfig,
    "spec.scheduling": models.Scheduling,
    "spec.scheduling.replica": models.ReplicaScheduling,
    "spec.scheduling.replica.leader": models.GangSettings,
    "spec.scheduling.replica.worker": models.GangSettings,
    "spec.scheduling.schedulingPolicy": models.SchedulingPolicy,
    "spec.scheduling.schedulingPolicy.gang": models.GangPolicy,
    "status": models.LeaderWorkerSetStatus,
    "status.conditions[]": models.Condition,
}


@cache
def crd() -> Schema:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    docs = list(yaml.load_all(CRD_FILE.read_text(), Loader=loader))
    assert len(docs) == 1, "one document: the CRD"
    doc: Schema = docs[0]
    return doc


def root() -> Schema:
    schema: Schema = crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def at(path: str) -> Schema:
    """The schema at a dotted path; ``[]`` steps into array items."""
    node = root()
    for step in path.split("."):
        name, items = step.removesuffix("[]"), step.endswith("[]")
        node = node["properties"][name]
        if items:
            node = node["items"]
    return node


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


def nodes() -> list[tuple[str, Schema]]:
    return list(walk(root()))


# ---------------------------------------------------------------------------------- resource


def test_file_is_generated_and_large_enough_to_hold_the_full_schemas() -> None:
    text = CRD_FILE.read_text()
    assert text.startswith("# Generated by hack/gen_crd.py")
    assert "kube-apiserver v1.37.2" in text.splitlines()[0]
    # Two full pod templates plus a claim template: upstream's equivalent file is ~1.3 MB.
    assert len(text.encode()) > 1_000_000


def test_resource_names_scope_and_single_version() -> None:
    doc = crd()
    assert doc["apiVersion"] == "apiextensions.k8s.io/v1"
    assert doc["kind"] == "CustomResourceDefinition"
    assert doc["metadata"]["name"] == "leaderworkersets.leaderworkerset.x-k8s.io"
    spec = doc["spec"]
    assert spec["group"] == "leaderworkerset.x-k8s.io"
    assert spec["names"] == {
        "kind": "LeaderWorkerSet", "listKind": "LeaderWorkerSetList",
        "plural": "leaderworkersets", "singular": "leaderworkerset", "shortNames": ["lws"],
    }
    assert spec["scope"] == "Namespaced"
    assert spec["conversion"] == {"strategy": "None"}
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1", True, True)


def test_status_and_scale_subresources() -> None:
    (version,) = crd()["spec"]["versions"]
    assert version["subresources"] == {
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicas",
                  "statusReplicasPath": ".status.replicas",
                  "labelSelectorPath": ".status.hpaPodSelector"},
    }


def test_printer_columns() -> None:
    (version,) = crd()["spec"]["versions"]
    columns = [(c["name"], c["type"], c["jsonPath"], c.get("description"))
               for c in version["additionalPrinterColumns"]]
    assert columns == [
        ("Ready", "integer", ".status.readyReplicas", "Number of ready replicas"),
        ("Desired", "integer", ".spec.replicas", "Number of desired replicas"),
        ("Up-to-date", "integer", ".status.updatedReplicas", "Number of up-to-date replicas"),
        ("Age", "date", ".metadata.creationTimestamp", None),
    ]


# -------------------------------------------------------------------------------- structural


def test_no_references_and_only_schema_keys() -> None:
    for path, node in nodes():
        unknown = set(node) - ALLOWED_KEYS
        assert not unknown, f"{path}: keys a CRD schema does not accept: {sorted(unknown)}"
    assert "$ref" not in CRD_FILE.read_text()


def test_every_node_has_a_type_or_is_int_or_string() -> None:
    for path, node in nodes():
        if "<anyOf" in path.rsplit(".", 1)[-1]:
            continue  # branch of an int-or-string, checked below
        if node.get("x-kubernetes-int-or-string"):
            assert "type" not in node, path
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        assert node.get("type") in {"object", "array", *SCALAR_TYPES}, f"{path}: no type"


def test_unions_only_as_int_or_string_and_without_value_validation_in_branches() -> None:
    for path, node in nodes():
        assert not {"oneOf", "allOf", "not"} & set(node), path
        if "anyOf" in node:
            assert node.get("x-kubernetes-int-or-string") is True, path
            for branch in node["anyOf"]:
                assert set(branch) == {"type"}, f"{path}: {branch}"


def test_nullable_is_not_used() -> None:
    # Nothing in the API needs an explicit null kept, and null values of non-nullable fields
    # are dropped by the API server (which the webhook's re-defaulting relies on).
    offenders = [path for path, node in nodes() if "nullable" in node]
    assert not offenders


def test_objects_arrays_and_maps_are_well_formed() -> None:
    for path, node in nodes():
        if node.get("type") == "array":
            assert isinstance(node.get("items"), dict), f"{path}: array without items"
        if node.get("type") == "object":
            assert not ("properties" in node and "additionalProperties" in node), path
            for name in node.get("required", []):
                assert name in node.get("properties", {}), f"{path}: required {name} unknown"
            assert node.get("required", []) == sorted(node.get("required", [])), path
        if "additionalProperties" in node:
            assert isinstance(node["additionalProperties"], dict), path
        if "x-kubernetes-preserve-unknown-fields" in node:
            pytest.fail(f"{path}: the schema is complete, nothing is preserved unknown")


def test_list_types_follow_the_structural_rules() -> None:
    list_maps = 0
    for path, node in nodes():
        list_type = node.get("x-kubernetes-list-type")
        if list_type is None:
            assert "x-kubernetes-list-map-keys" not in node, path
            continue
        assert node["type"] == "array", path
        items = node["items"]
        if list_type == "set":
            assert items.get("type") in SCALAR_TYPES, f"{path}: set of non-scalars"
        elif list_type == "map":
            list_maps += 1
            assert items["type"] == "object", path
            for key in node["x-kubernetes-list-map-keys"]:
                prop = items["properties"][key]
                assert prop.get("type") in SCALAR_TYPES, f"{path}: key {key} not scalar"
                assert key in items.get("required", []) or "default" in prop, (
                    f"{path}: list-map key {key} neither required nor defaulted")
        else:
            assert list_type == "atomic", f"{path}: {list_type}"
    assert list_maps > 20  # the Kubernetes types' list semantics were kept


def test_map_types_are_valid() -> None:
    for path, node in nodes():
        if "x-kubernetes-map-type" in node:
            assert node["x-kubernetes-map-type"] in {"atomic", "granular"}, path
            assert node["type"] == "object", path


# ----------------------------------------------------------------- defaults, enums, required


def test_defaults_are_exactly_the_upstream_crd_defaults() -> None:
    found: dict[str, Any] = {}
    for path, node in nodes():
        if "default" not in node:
            continue
        key = path.rsplit(".", 1)[-1]
        parent = path.rsplit(".", 1)[0].removesuffix("[]")
        if key in LIST_MAP_KEY_DEFAULTS and parent.endswith(("ports", "imagePullSecrets")):
            assert node["default"] == LIST_MAP_KEY_DEFAULTS[key], path
            continue
        found[path] = node["default"]
    assert found == EXPECTED_DEFAULTS


def test_guide_only_fields_have_no_crd_default() -> None:
    for path in ("spec.groupIdentity", "spec.groupReplacementPolicy",
                 "spec.podTerminationPolicy", "spec.networkConfig.subdomainPolicy",
                 f"{LWT}.restartBackoff.baseSeconds", f"{LWT}.restartBackoff.capSeconds",
                 f"{LWT}.maxGroupRestarts"):
        assert "default" not in at(path), path
    assert "default" not in at("spec.scheduling")
    # ... but say what the webhook fills in.
    assert "10" in at(f"{LWT}.restartBackoff.baseSeconds")["description"]
    assert "300" in at(f"{LWT}.restartBackoff.capSeconds")["description"]


def test_enums_are_exactly_ours_and_match_the_models() -> None:
    found = {path: node["enum"] for path, node in nodes() if "enum" in node}
    expected = {path: list(typing.get_args(alias)) for path, alias in EXPECTED_ENUMS.items()}
    assert found == expected


def test_required_fields_and_bounds() -> None:
    assert "leaderWorkerTemplate" in at("spec")["required"]
    assert at(LWT)["required"] == ["workerTemplate"]
    assert at("spec.networkConfig")["required"] == ["subdomainPolicy"]
    assert at("spec.rolloutStrategy")["required"] == ["type"]
    replicas = at("spec.replicas")
    assert (replicas["type"], replicas["format"]) == ("integer", "int32")
    assert (replicas["minimum"], replicas["maximum"]) == (0, 1000000)
    assert "minimum" not in at(f"{LWT}.size")  # the webhook's message names the rule
    for name in ("maxUnavailable", "maxSurge"):
        node = at(f"spec.rolloutStrategy.rollingUpdateConfiguration.{name}")
        assert node["x-kubernetes-int-or-string"] is True


def test_every_field_has_a_description() -> None:
    for path, node in nodes():
        if not path or "<" in path or path.endswith(("[]", "{}")) or path == "metadata":
            continue
        assert node.get("description"), f"{path}: no description"


# ------------------------------------------------------------------------- embedded types


def test_pod_templates_are_full_pod_specs() -> None:
    for role in ("leaderTemplate", "workerTemplate"):
        pod = at(f"{LWT}.{role}")
        assert set(pod["properties"]) == {"metadata", "spec"}
        spec = pod["properties"]["spec"]
        assert spec["required"] == ["containers"]
        for field in ("containers", "initContainers", "volumes", "affinity", "tolerations",
                      "topologySpreadConstraints", "resourceClaims", "schedulingGates",
                      "schedulingGroup", "securityContext"):
            assert field in spec["properties"], f"{role}: no spec.{field}"
        assert "podGroupName" in spec["properties"]["schedulingGroup"]["properties"]


def test_containers_keep_their_list_semantics_and_requirements() -> None:
    containers = at(f"{WORKER_POD}.containers")
    assert containers["x-kubernetes-list-type"] == "map"
    assert containers["x-kubernetes-list-map-keys"] == ["name"]
    container = containers["items"]
    assert "name" in container["required"]
    ports = container["properties"]["ports"]
    assert ports["x-kubernetes-list-map-keys"] == ["containerPort", "protocol"]
    assert ports["items"]["properties"]["protocol"]["default"] == "TCP"
    env = container["properties"]["env"]
    assert (env["x-kubernetes-list-type"], env["x-kubernetes-list-map-keys"]) == ("map", ["name"])
    limits = container["properties"]["resources"]["properties"]["limits"]
    assert limits["additionalProperties"]["x-kubernetes-int-or-string"] is True
    port = container["properties"]["livenessProbe"]["properties"]["httpGet"]["properties"]["port"]
    assert port["x-kubernetes-int-or-string"] is True
    node_selector = at(f"{WORKER_POD}.nodeSelector")
    assert node_selector["additionalProperties"] == {"type": "string"}
    assert node_selector["x-kubernetes-map-type"] == "atomic"


def test_kubernetes_enums_and_zero_defaults_are_dropped() -> None:
    restart = at(f"{WORKER_POD}.restartPolicy")
    assert not {"enum", "default"} & set(restart)
    name = at(f"{WORKER_POD}.containers[].name")
    assert "default" not in name  # a container without a name must be rejected


def test_embedded_metadata_is_restricted_everywhere() -> None:
    metas = [(path, node) for path, node in nodes()
             if path.endswith(".metadata") or path.endswith("[].metadata")]
    assert len(metas) >= 4  # two pod templates, claim templates, ephemeral volumes
    for path, node in metas:
        assert set(node["properties"]) == {"annotations", "finalizers", "labels", "name",
                                           "namespace"}, path
    assert root()["properties"]["metadata"] == {"type": "object"}


def test_volume_claim_templates_are_full_claims() -> None:
    claims = at(f"{LWT}.volumeClaimTemplates")
    assert claims["x-kubernetes-list-type"] == "atomic"
    claim = claims["items"]
    assert set(claim["properties"]) == {"apiVersion", "kind", "metadata", "spec", "status"}
    spec = claim["properties"]["spec"]["properties"]
    assert {"accessModes", "resources", "storageClassName", "volumeMode"} <= set(spec)
    storage = spec["resources"]["properties"]["requests"]["additionalProperties"]
    assert storage["x-kubernetes-int-or-string"] is True


@pytest.mark.parametrize("value", ["1", "100m", "1Gi", "1.5", ".5", "+2k", "1e3", "2E-2",
                                   "500u", "10n", "0"])
def test_quantity_pattern_accepts_kubernetes_quantities(value: str) -> None:
    pattern = at(f"{WORKER_POD}.containers[].resources.limits")["additionalProperties"]["pattern"]
    assert re.fullmatch(pattern, value)


@pytest.mark.parametrize("value", ["lots", "1GB", "1 Gi", "", "1.2.3", "Gi"])
def test_quantity_pattern_rejects_garbage(value: str) -> None:
    pattern = at(f"{WORKER_POD}.containers[].resources.limits")["additionalProperties"]["pattern"]
    assert not re.fullmatch(pattern, value)


def test_scheduling_levels_have_the_podgroup_building_blocks() -> None:
    for level in GANG_LEVELS:
        node = at(level)
        assert {"schedulingPolicy", "schedulingConstraints", "disruptionMode",
                "resourceClaims"} <= set(node["properties"]), level
        policy = node["properties"]["schedulingPolicy"]
        assert set(policy["properties"]) == {"basic", "gang"}
        gang = policy["properties"]["gang"]
        assert "required" not in gang, f"{level}: minCount is derived by LWS, not required"
        assert gang["properties"]["minCount"]["format"] == "int32"
        claims = node["properties"]["resourceClaims"]
        assert claims["x-kubernetes-list-map-keys"] == ["name"]
        assert claims["items"]["required"] == ["name"]
        topology = node["properties"]["schedulingConstraints"]["properties"]["topology"]
        assert topology["items"]["required"] == ["key"]
        assert set(node["properties"]["disruptionMode"]["properties"]) == {"all", "single"}
    assert set(at("spec.scheduling.replica")["properties"]) >= {"leader", "worker"}
    assert "replica" not in at("spec.scheduling.replica.leader")["properties"]


def test_status_conditions_are_a_map_keyed_by_type() -> None:
    conditions = at("status.conditions")
    assert conditions["x-kubernetes-list-type"] == "map"
    assert conditions["x-kubernetes-list-map-keys"] == ["type"]
    item = conditions["items"]
    assert item["required"] == ["lastTransitionTime", "message", "reason", "status", "type"]
    assert item["properties"]["lastTransitionTime"]["format"] == "date-time"
    assert at("status.observedGeneration")["format"] == "int64"
    assert at("status.hpaPodSelector")["type"] == "string"


# ------------------------------------------------------------------------- models vs schema


@pytest.mark.parametrize("path", sorted(MODEL_AT))
def test_schema_properties_match_the_model_fields(path: str) -> None:
    model = MODEL_AT[path]
    fields = {info.alias or name for name, info in model.model_fields.items()}
    assert set(at(path)["properties"]) == fields, (
        f"{path} vs {model.__name__}: regenerate the CRD (hack/gen_crd.py) after a model change")


def test_model_walk_covers_every_nested_model() -> None:
    """Any model reachable from the spec or status models must have a row in MODEL_AT."""
    covered = set(MODEL_AT.values())

    def nested(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
        for info in model.model_fields.values():
            for arg in (info.annotation, *typing.get_args(info.annotation)):
                for inner in (arg, *typing.get_args(arg)):
                    if isinstance(inner, type) and issubclass(inner, BaseModel):
                        yield inner
                        yield from nested(inner)

    reachable = set(nested(models.LeaderWorkerSetSpec)) | set(nested(models.LeaderWorkerSetStatus))
    assert reachable <= covered, sorted(m.__name__ for m in reachable - covered)
