"""Generate the CRDs in ``crds/``: LeaderWorkerSet, DisaggregatedSet and
DisaggregatedSetRoleScaler.

Why a generator: users ``kubectl apply`` manifests written for the upstream Go controller, so the
CRD must validate embedded pod templates exactly as the API server validates pods (shape, required
fields, list and map merge semantics) and ``kubectl explain`` must reach into them. That schema is
far too large to write by hand, and it has to follow the Kubernetes version we pin.

Where each part comes from:

* Kubernetes types (``PodTemplateSpec`` for ``leaderTemplate``/``workerTemplate``,
  ``PersistentVolumeClaim`` for ``volumeClaimTemplates``, ``metav1.Condition`` for
  ``status.conditions``, and the ``scheduling.k8s.io/v1beta1`` PodGroup building blocks under
  ``spec.scheduling``) come from the OpenAPI v3 documents served by the pinned kube-apiserver
  (``/openapi/v3/api/v1``, ``/openapi/v3/apis/scheduling.k8s.io/v1beta1``). They are inlined and
  rewritten into a structural schema: ``$ref``/``allOf`` inlined, IntOrString and Quantity turned
  into ``x-kubernetes-int-or-string``, strategic-merge-patch and union extensions dropped,
  ``x-kubernetes-list-type``/``-list-map-keys``/``-map-type`` kept, ``required`` kept. Their
  descriptions are the ones the API server publishes.
* Our own fields are written here by hand rather than derived from ``lws_operator/api/models.py``:
  those models are deliberately lenient readers (plain ``str`` instead of enums, ``dict`` pod
  templates) while the CRD needs enums, formats, bounds, defaults and descriptions on nearly every
  field. Enum values are taken from the models' ``Literal`` aliases so there is one list of them;
  ``tests/unit/api/test_crd_file.py`` fails when a model field has no schema property or vice versa.

Decisions:

* CRD defaults are exactly the upstream ones (the default markers of upstream's
leaderworkerset_types.go): ``replicas=1``, ``size=1``,
  ``startupPolicy=LeaderCreated``, ``restartPolicy=RecreateGroupOnPodRestart``,
  ``subGroupPolicyType=LeaderWorker``, ``rolloutStrategy.type=RollingUpdate``, ``partition=0``,
  ``maxUnavailable=1``, ``maxSurge=0``. Fields that only the LWS docs add (``groupIdentity``,
  ``groupReplacementPolicy``, ``podTerminationPolicy``, ``restartBackoff.baseSeconds``/
  ``capSeconds``, ``scheduling``) get no CRD default: the defaulting webhook owns them, so all
  defaulting the LWS docs add lives in one place (``lws_operator/api``) and objects written before
  a CRD upgrade are not rewritten by defaulting-on-read (their revision hash, and so their pods,
  must not change). Their descriptions state the default the webhook applies.
* Defaults in the Kubernetes types are dropped, like the upstream CRD, with one exception that the
  structural-schema rules force: a list-map key that is not required keeps its default (container
  ``ports[].protocol: TCP``, ``imagePullSecrets[].name: ""``). Dropping them keeps stored objects
  as the user wrote them (pods get the same defaults when they are created), and keeps the LWS
  revision hash of objects created under the upstream CRD unchanged after switching over.
* ``enum`` lists of the Kubernetes types are dropped: the CRD is pinned at generation time while
  clusters move on, and a newer server may accept values this schema has never heard of (the pod
  API validates them anyway). Our own enums are kept.
* Embedded ``ObjectMeta`` (pod template, claim template and ephemeral-volume claim metadata) keeps
  only ``labels``, ``annotations``, ``finalizers``, ``name`` and ``namespace``, as upstream.
* Quantities get the pattern of the Kubernetes quantity grammar, so ``storage: lots`` is rejected
  when the LeaderWorkerSet is written rather than when its StatefulSet is.
* Field descriptions of our own fields are our own words.
* The DisaggregatedSet embeds, per role, the very LeaderWorkerSet spec schema built for the
  LeaderWorkerSet CRD (see the section "the DisaggregatedSet API" below), so the two can never
  drift apart.

Usage::

    .venv/bin/python hack/gen_crd.py            # regenerate the committed files
    .venv/bin/python hack/gen_crd.py --check    # exit 1 if a committed file is stale
    .venv/bin/python hack/gen_crd.py --kubeconfig ~/.kube/config   # use a running v1.37.2 server

Without ``--kubeconfig`` an ``api``-tier local cluster is started in ``.cluster/crdgen`` (and
stopped again unless it was already running).
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import shutil
import subprocess
import sys
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as `python hack/gen_crd.py`: make the repo importable
    sys.path.insert(0, str(REPO))

from lws_operator.api import disaggregated as ds  # noqa: E402 - needs the path above
from lws_operator.api import models  # noqa: E402 - needs the path above

CRD_DIR = REPO / "crds"
CRD_PATH = CRD_DIR / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
DS_CRD_PATH = CRD_DIR / f"{ds.GROUP}_{ds.PLURAL}.yaml"
SCALER_CRD_PATH = CRD_DIR / f"{ds.GROUP}_{ds.SCALER_PLURAL}.yaml"
CLUSTER_DIR = REPO / ".cluster" / "crdgen"
K8S_VERSION = "v1.37.2"
CORE_DOC = "/openapi/v3/api/v1"
SCHEDULING_DOC = "/openapi/v3/apis/scheduling.k8s.io/v1beta1"

GROUP = "leaderworkerset.x-k8s.io"
PLURAL = "leaderworkersets"

CORE = "io.k8s.api.core.v1."
META = "io.k8s.apimachinery.pkg.apis.meta.v1."
SCHEDULING = "io.k8s.api.scheduling.v1beta1."
OBJECT_META = META + "ObjectMeta"
QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"

EMBEDDED_META_FIELDS = ("annotations", "finalizers", "labels", "name", "namespace")

# The quantity grammar of the Kubernetes API (sign, decimal number, then a binary-SI, decimal-SI
# or exponent suffix); a superset check: the pod API does the exact parse later.
QUANTITY_PATTERN = (
    r"^[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)"
    r"([KMGTPE]i|[numkMGTPE]|[eE][+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+))?$"
)

# Keys of an OpenAPI schema node that are copied as they are (after recursion where they nest).
COPIED_KEYS = frozenset({
    "description", "type", "format", "required", "items", "properties", "additionalProperties",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
    "maximum", "minimum", "exclusiveMaximum", "exclusiveMinimum", "maxLength", "minLength",
    "pattern", "maxItems", "minItems", "uniqueItems", "maxProperties", "minProperties",
    "multipleOf",
})
# Keys dropped on purpose (see the module docstring); anything else is an error, so a new kind of
# annotation in a future OpenAPI document is looked at instead of silently copied.
DROPPED_KEYS = frozenset({
    "default", "enum", "x-kubernetes-patch-strategy", "x-kubernetes-patch-merge-key",
    "x-kubernetes-unions", "x-kubernetes-group-version-kind",
})


# ----------------------------------------------------------------------------- Kubernetes types


class Structural:
    """Turns definitions of a Kubernetes OpenAPI v3 document into inlined structural schemas."""

    def __init__(self, *documents: dict[str, Any]) -> None:
        self.schemas: dict[str, dict[str, Any]] = {}
        for doc in documents:
            self.schemas.update(doc["components"]["schemas"])

    def definition(self, name: str) -> dict[str, Any]:
        """The structural schema of definition ``name``, with its own description."""
        return self._definition(name, ())

    def _definition(self, name: str, stack: tuple[str, ...]) -> dict[str, Any]:
        if name in stack:
            raise ValueError(f"recursive definition: {' -> '.join((*stack, name))}")
        if name == QUANTITY:
            return {"anyOf": [{"type": "integer"}, {"type": "string"}],
                    "pattern": QUANTITY_PATTERN, "x-kubernetes-int-or-string": True}
        if name == INT_OR_STRING:
            return {"anyOf": [{"type": "integer"}, {"type": "string"}],
                    "x-kubernetes-int-or-string": True}
        source = self.schemas[name]
        if name == OBJECT_META:
            props = source["properties"]
            source = {"type": "object", "description": source["description"],
                      "properties": {k: props[k] for k in EMBEDDED_META_FIELDS}}
        return self._node(source, (*stack, name))

    def _node(self, node: dict[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
        if "$ref" in node:
            return self._definition(_ref_name(node["$ref"]), stack)
        out: dict[str, Any] = {}
        if "allOf" in node:
            (ref,) = node["allOf"]  # the generator's wrapper for "a field of type X"
            out = self._definition(_ref_name(ref["$ref"]), stack)
        for key, value in node.items():
            if key in ("$ref", "allOf") or key in DROPPED_KEYS:
                continue
            if key not in COPIED_KEYS:
                raise ValueError(f"unexpected OpenAPI key {key!r} under {'/'.join(stack)}")
            if key == "properties":
                out[key] = {p: self._node(s, stack) for p, s in value.items()}
            elif key in ("items", "additionalProperties") and isinstance(value, dict):
                out[key] = self._node(value, stack)
            elif key == "required":
                out[key] = sorted(value)
            else:
                out[key] = copy.deepcopy(value)
        if out.get("type") == "array" and out.get("x-kubernetes-list-type") == "map":
            self._default_map_keys(node, out, stack)
        if "x-kubernetes-int-or-string" in out:
            out.pop("type", None)
            out.pop("format", None)
        return out

    def _default_map_keys(
        self, source: dict[str, Any], out: dict[str, Any], stack: tuple[str, ...]
    ) -> None:
        """A list-map key must be required or defaulted (structural rule): restore the source
        default of every optional key."""
        items = out["items"]
        item_source = source["items"]
        while "$ref" in item_source or "allOf" in item_source:
            ref = item_source["$ref"] if "$ref" in item_source else item_source["allOf"][0]["$ref"]
            item_source = self.schemas[_ref_name(ref)]
        for key in out["x-kubernetes-list-map-keys"]:
            if key in items.get("required", ()):
                continue
            default = item_source["properties"][key].get("default")
            if default is None:
                raise ValueError(f"list-map key {key!r} under {'/'.join(stack)} is optional "
                                 "and has no default")
            items["properties"][key]["default"] = default


def _ref_name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


# ------------------------------------------------------------------------------- our own fields


def _enum(alias: Any) -> list[str]:
    """The values of one of the models' ``Literal`` aliases, in declaration order."""
    return list(typing.get_args(alias))


def _obj(description: str, properties: dict[str, Any], required: list[str] | None = None,
         ) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "description": description,
                           "properties": properties}
    if required:
        out["required"] = sorted(required)
    return out


def _int32(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "integer", "format": "int32", "description": description, **extra}


def _string(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": "string", "description": description, **extra}


def _int_or_string(description: str, default: int) -> dict[str, Any]:
    return {"anyOf": [{"type": "integer"}, {"type": "string"}],
            "x-kubernetes-int-or-string": True, "description": description, "default": default}


def _described(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {**schema, "description": description}


def _gang_settings(k8s: Structural, level: str) -> dict[str, Any]:
    """The PodGroup building blocks a user may set at one scheduling level."""
    policy = k8s.definition(SCHEDULING + "PodGroupSchedulingPolicy")
    gang = policy["properties"]["gang"]
    gang.pop("required", None)  # LWS derives minCount
    gang["properties"]["minCount"]["description"] = (
        "Minimum number of pods admitted together. Optional: LWS derives it from the group size "
        "(and from replicas at the whole-LeaderWorkerSet level) and keeps it current as they "
        "change."
    )
    claim = k8s.definition(SCHEDULING + "PodGroupResourceClaim")
    return {
        "schedulingPolicy": _described(policy, (
            f"Scheduling policy of the PodGroup{level}: basic (pod by pod) or gang "
            "(all or nothing). Immutable, except gang.minCount.")),
        "schedulingConstraints": _described(
            k8s.definition(SCHEDULING + "PodGroupSchedulingConstraints"),
            f"Placement constraints, such as a topology domain, of the PodGroup{level}. "
            "Immutable."),
        "disruptionMode": _described(k8s.definition(SCHEDULING + "DisruptionMode"), (
            f"Whether the pods of the PodGroup{level} may be disrupted one at a time (single) "
            "or only all together (all). Immutable.")),
        "resourceClaims": {
            "type": "array",
            "description": f"ResourceClaims shared by the pods of the PodGroup{level}. Immutable.",
            "items": claim,
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["name"],
        },
    }


def _scheduling(k8s: Structural) -> dict[str, Any]:
    role = {
        "leader": _obj(
            "Role level: each group's leader gets a PodGroup of its own, separate from its "
            "workers'. Setting leader or worker selects the role level.",
            _gang_settings(k8s, " of each group's leader")),
        "worker": _obj(
            "Role level: each group's workers get a PodGroup of their own, separate from the "
            "leader's. Setting leader or worker selects the role level.",
            _gang_settings(k8s, " of each group's workers")),
    }
    replica = _obj(
        "Replica level: one PodGroup per group, covering its leader and workers (size pods).",
        {**_gang_settings(k8s, " of each group"), **role})
    return _obj(
        "Native gang scheduling through Kubernetes Workload and PodGroup objects (alpha). Set it "
        "when the LeaderWorkerSet is created; it cannot be added, removed or moved to another "
        "level later. Exactly one level may be used: the top-level fields here (one PodGroup for "
        "the whole LeaderWorkerSet, replicas * size pods), replica (one PodGroup per group, also "
        "selected by an empty block), or replica.leader / replica.worker (separate PodGroups for "
        "the leader and the workers of each group).",
        {**_gang_settings(k8s, " covering the whole LeaderWorkerSet"), "replica": replica})


def _pod_template(k8s: Structural, description: str) -> dict[str, Any]:
    return _described(k8s.definition(CORE + "PodTemplateSpec"), description)


def _leader_worker_template(k8s: Structural) -> dict[str, Any]:
    pvc = k8s.definition(CORE + "PersistentVolumeClaim")
    return _obj(
        "The template of one group: leader and worker pod templates, group size and failure "
        "handling. Changing it rolls every group to the new revision.",
        {
            "leaderTemplate": _pod_template(k8s, (
                "Pod template of the leader of each group (worker index 0). When omitted the "
                "leader uses workerTemplate.")),
            "workerTemplate": _pod_template(k8s, (
                "Pod template of the workers of each group (worker indexes 1 to size-1), and of "
                "the leader when leaderTemplate is omitted.")),
            "size": _int32(
                "Number of pods in each group, leader included. Defaults to 1: a leader without "
                "workers. Must be at least 1.", default=1),
            "restartPolicy": _string(
                "What happens to a group when one of its pods fails. RecreateGroupOnPodRestart "
                "(default): the whole group is deleted and recreated when any of its pods "
                "restarts or is deleted. RecreateGroupAfterStart: the same, except while a pod "
                "of the group is still pending. None: pods recover on their own, the group is "
                "left alone. Default is an old spelling of None.",
                enum=_enum(models.RestartPolicy), default="RecreateGroupOnPodRestart"),
            "maxGroupRestarts": _int32(
                "Most automatic recreations of each group, counted per group and template "
                "revision. Unset: unlimited. 0: the first qualifying failure stops the group "
                "instead. A group out of budget is stopped and reported by the Degraded "
                "condition. Not supported with restartPolicy None.", minimum=0),
            "restartBackoff": _obj(
                "Exponential backoff between recreations of a group: a group is recreated only "
                "once it has existed (since its leader pod was created) for "
                "min(baseSeconds * 2^restarts, capSeconds) seconds.",
                {
                    "baseSeconds": _int32(
                        "Delay before the first recreation, doubled for each later one. 10 when "
                        "the block is present and this field is not (set by the defaulting "
                        "webhook).", minimum=0),
                    "capSeconds": _int32(
                        "Upper bound of the delay. 300 when the block is present and this field "
                        "is not (set by the defaulting webhook).", minimum=0),
                }),
            "subGroupPolicy": _obj(
                "Splits each group into subgroups of subGroupSize pods, for example one per "
                "accelerator slice, each with its own index and exclusive placement. It can "
                "neither be added nor removed after creation.",
                {
                    "subGroupPolicyType": _string(
                        "LeaderWorker (default): the leader belongs to the first subgroup. "
                        "LeaderExcluded: the leader belongs to no subgroup and only the workers "
                        "are split.",
                        enum=_enum(models.SubGroupPolicyType), default="LeaderWorker"),
                    "subGroupSize": _int32(
                        "Pods per subgroup: size or size-1 must be a multiple of it (size-1 "
                        "with LeaderExcluded). Immutable."),
                }),
            "volumeClaimTemplates": {
                "type": "array",
                "description": (
                    "PersistentVolumeClaims created for every leader and worker pod; containers "
                    "mount them by name. Not supported with groupIdentity Hash."),
                "items": pvc,
                "x-kubernetes-list-type": "atomic",
            },
            "persistentVolumeClaimRetentionPolicy": _obj(
                "Whether the claims made from volumeClaimTemplates outlive their pods; passed to "
                "the StatefulSets the operator creates.",
                {
                    "whenDeleted": _string(
                        "Retain (the StatefulSet default) or Delete the claims when the "
                        "LeaderWorkerSet is deleted."),
                    "whenScaled": _string(
                        "Retain (the StatefulSet default) or Delete the claims of groups "
                        "removed by a scale-down."),
                }),
        },
        required=["workerTemplate"],
    )


def _spec(k8s: Structural) -> dict[str, Any]:
    rolling = _obj(
        "Pace of a rolling update, counted in whole groups.",
        {
            "partition": _int32(
                "Only groups whose ordinal is at least partition are updated; the others keep "
                "their revision. Defaults to 0. Not supported with groupIdentity Hash.",
                default=0),
            "maxUnavailable": _int_or_string(
                "Most groups, as a number or a percentage of replicas rounded down, that may be "
                "unavailable during an update. Defaults to 1. It cannot be 0 when maxSurge "
                "is 0.", default=1),
            "maxSurge": _int_or_string(
                "Most extra groups, as a number or a percentage of replicas rounded up, created "
                "above replicas during an update. Defaults to 0.", default=0),
        })
    return _obj(
        "Desired state of the LeaderWorkerSet.",
        {
            "replicas": _int32(
                "Number of groups. Defaults to 1. The scale subresource writes it, so a "
                "HorizontalPodAutoscaler can drive it.",
                default=1, minimum=0, maximum=1000000),
            "leaderWorkerTemplate": _leader_worker_template(k8s),
            "rolloutStrategy": _obj(
                "How groups are replaced when leaderWorkerTemplate or networkConfig changes.",
                {
                    "type": _string("Only RollingUpdate is supported.",
                                    enum=_enum(models.RolloutStrategyType),
                                    default="RollingUpdate"),
                    "rollingUpdateConfiguration": rolling,
                },
                required=["type"]),
            "startupPolicy": _string(
                "When the workers of a group are created. LeaderCreated (default): as soon as "
                "the leader pod exists. LeaderReady: once the leader pod is ready.",
                enum=_enum(models.StartupPolicy), default="LeaderCreated"),
            "networkConfig": _obj(
                "DNS layout of the groups' pods. When omitted the defaulting webhook sets "
                "subdomainPolicy Shared.",
                {"subdomainPolicy": _string(
                    "Shared: one headless Service, named after the LeaderWorkerSet, covers every "
                    "pod. UniquePerReplica: one headless Service per group.",
                    enum=_enum(models.SubdomainPolicy))},
                required=["subdomainPolicy"]),
            "groupIdentity": _string(
                "How groups are named and which built-in controller runs the leaders. Ordinal "
                "(default, set by the defaulting webhook): a StatefulSet, groups numbered 0 to "
                "replicas-1. Hash: a Deployment, each group named by a random key that is never "
                "reused, so a scale-down removes unhealthy groups first. Immutable.",
                enum=_enum(models.GroupIdentity)),
            "groupReplacementPolicy": _string(
                "When a replacement group may be scheduled. PostTermination (default, set by "
                "the defaulting webhook): once the group it replaces is completely gone. "
                "Immediate: at once; groupIdentity Hash only.",
                enum=_enum(models.GroupReplacementPolicy)),
            "podTerminationPolicy": _string(
                "How the pods of a deleted or rebuilt group stop. Sequential (default, set by "
                "the defaulting webhook): the workers once the leader is gone. Parallel: leader "
                "and workers at the same time. Immutable.",
                enum=_enum(models.PodTerminationPolicy)),
            "scheduling": _scheduling(k8s),
        },
        required=["leaderWorkerTemplate"],
    )


def _status(k8s: Structural) -> dict[str, Any]:
    return _obj(
        "Observed state of the LeaderWorkerSet, written by the operator.",
        {
            "conditions": {
                "type": "array",
                "description": (
                    "Current observations of the LeaderWorkerSet, one per type: Available, "
                    "Progressing, UpdateInProgress, Degraded, WorkloadSchedulingCreated."),
                "items": k8s.definition(META + "Condition"),
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["type"],
            },
            "readyReplicas": _int32(
                "Groups whose leader and workers are all ready, surge groups included."),
            "updatedReplicas": _int32(
                "Groups whose leader and workers run the current revision, ready or not."),
            "replicas": _int32(
                "Groups whose leader pod exists, updated or not, ready or not, surge groups "
                "included. The current size reported by the scale subresource."),
            "hpaPodSelector": _string(
                "Label selector, in string form, of the leader pods: the scale subresource "
                "reports it so an autoscaler reads the leaders' metrics."),
            "observedGeneration": {
                "type": "integer", "format": "int64",
                "description": "The metadata.generation this status was computed from."},
        })


def build_crd(core_doc: dict[str, Any], scheduling_doc: dict[str, Any]) -> dict[str, Any]:
    """The CRD object, from the two OpenAPI v3 documents of the pinned API server."""
    k8s = Structural(core_doc, scheduling_doc)
    schema = _obj(
        "A LeaderWorkerSet runs groups of pods as its unit of replication: each group is one "
        "leader pod and size-1 worker pods, created, placed, updated and recreated together.",
        {
            "apiVersion": _string(f"API version of this object: {GROUP}/v1."),
            "kind": _string("Kind of this object: LeaderWorkerSet."),
            "metadata": {"type": "object"},
            "spec": _spec(k8s),
            "status": _status(k8s),
        },
        required=["spec"],
    )
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{PLURAL}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": "LeaderWorkerSet",
                "listKind": "LeaderWorkerSetList",
                "plural": PLURAL,
                "singular": "leaderworkerset",
                "shortNames": ["lws"],
            },
            "scope": "Namespaced",
            "conversion": {"strategy": "None"},
            "versions": [{
                "name": "v1",
                "served": True,
                "storage": True,
                "additionalPrinterColumns": [
                    {"name": "Ready", "type": "integer", "jsonPath": ".status.readyReplicas",
                     "description": "Number of ready replicas"},
                    {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas",
                     "description": "Number of desired replicas"},
                    {"name": "Up-to-date", "type": "integer",
                     "jsonPath": ".status.updatedReplicas",
                     "description": "Number of up-to-date replicas"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
                ],
                "subresources": {
                    "status": {},
                    "scale": {
                        "specReplicasPath": ".spec.replicas",
                        "statusReplicasPath": ".status.replicas",
                        "labelSelectorPath": ".status.hpaPodSelector",
                    },
                },
                "schema": {"openAPIV3Schema": schema},
            }],
        },
    }


# ----------------------------------------------------------------------- the DisaggregatedSet API
#
# Upstream's disaggregatedset.x-k8s.io/v1 (DisaggregatedSet and DisaggregatedSetRoleScaler): the
# same resource names, short names, subresources, printer columns, bounds, defaults and CEL rule,
# so manifests written for the Go controller apply unchanged. Each role embeds the LeaderWorkerSet
# spec schema built above, node for node, so a role validates (and defaults) exactly like a
# LeaderWorkerSet, the LWS docs' additions included, and `kubectl explain` reaches into it the same
# way.

# A role name is a DNS label: it becomes a label value and the last segment of child names.
ROLE_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


def _is_external(role: str) -> str:
    return (f"(has({role}.scaling) && has({role}.scaling.mode) && "
            f"{role}.scaling.mode == '{ds.SCALING_EXTERNAL}')")


def _replicas_rule() -> dict[str, str]:
    """Upstream's all-or-nothing rule over the roles that are not External: either none of them
    asks for groups (replicas absent or 0: the paused state) or all of them do. External roles
    are exempt (their scaler holds the count). Written so that a role without ``spec`` counts as
    "no replicas" instead of failing the evaluation."""
    external = _is_external("r")
    zero = f"self.roles.all(r, {external} || !has(r.spec) || !has(r.spec.replicas) || " \
        "r.spec.replicas == 0)"
    positive = f"self.roles.all(r, {external} || (has(r.spec) && has(r.spec.replicas) && " \
        "r.spec.replicas > 0))"
    return {"rule": f"{zero} || {positive}", "message": ds.REPLICAS_RULE_MESSAGE}


def _role(k8s: Structural) -> dict[str, Any]:
    return _obj(
        "One role of the set (prefill, decode, ...): a LeaderWorkerSet template with a name. The "
        "controller runs one LeaderWorkerSet per role, slice and live revision.",
        {
            "name": _string(
                "Name of the role, unique in the set: the value of the "
                f"{ds.ROLE_LABEL} label and the last segment of the names of the role's "
                "LeaderWorkerSets and Services. Renaming a role rolls every role to a new "
                "revision.",
                minLength=1, maxLength=63, pattern=ROLE_NAME_PATTERN),
            "scaling": _obj(
                "Where the role's replica count comes from. Absent: Static.",
                {"mode": _string(
                    "Static (default): spec.replicas of the role. External: the "
                    "DisaggregatedSetRoleScaler <set>-<role> that the controller creates, "
                    "written by an autoscaler (HorizontalPodAutoscaler, KEDA) through its "
                    "scale subresource; the role's spec.replicas is then ignored.",
                    enum=_enum(ds.ScalingMode), default=ds.SCALING_STATIC)}),
            "metadata": _described(
                k8s.definition(OBJECT_META),
                "Labels and annotations put on the role's LeaderWorkerSet objects (for example "
                "a Kueue queue name). The controller's own labels win on a clash. Other fields "
                "are ignored."),
            "spec": _described(
                _spec(k8s),
                "The LeaderWorkerSet spec of the role, copied into each of its "
                "LeaderWorkerSets with replicas set by the controller (per slice). Changing "
                "leaderWorkerTemplate or groupIdentity rolls every role to a new revision; "
                "replicas and rolloutStrategy take effect in place; other fields reach only "
                "LeaderWorkerSets created afterwards."),
        },
        required=["name"],
    )


def _ds_spec(k8s: Structural) -> dict[str, Any]:
    spec = _obj(
        "Desired state of the DisaggregatedSet.",
        {
            "roles": {
                "type": "array",
                "description": (
                    f"The roles, {ds.MIN_ROLES} to {ds.MAX_ROLES}, with unique names. Their "
                    "order is the order of status.roleStatuses and part of the revision: "
                    "reordering rolls every role."),
                "items": _role(k8s),
                "minItems": ds.MIN_ROLES,
                "maxItems": ds.MAX_ROLES,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
            "slices": _int32(
                "Independent copies of the whole set of roles, each with its own "
                "LeaderWorkerSets, Services and rolling update. Defaults to 1. Changing it "
                "creates or deletes slices without a rollout. Must stay 1 while a role is "
                "External.", default=1, minimum=1, maximum=ds.MAX_SLICES),
            "placementPolicy": _obj(
                "Where slices are placed relative to topology domains (for example racks). "
                "Applied to LeaderWorkerSets created afterwards.",
                {
                    "type": _string(
                        "None (default): no placement constraints. ExclusiveSlice: the pods of "
                        "a slice share one topology domain and no other slice of this set runs "
                        "there. ExclusiveTopology: the same, and no pod of another "
                        "DisaggregatedSet runs there either.",
                        enum=_enum(ds.PlacementType), default=ds.PLACEMENT_NONE),
                    "topology": _string(
                        "The node label key that defines a topology domain (for example "
                        "topology.kubernetes.io/zone). Required when type is not None."),
                }),
        },
        required=["roles"],
    )
    spec["x-kubernetes-validations"] = [_replicas_rule()]
    return spec


def _conditions(k8s: Structural, description: str) -> dict[str, Any]:
    return {
        "type": "array",
        "description": description,
        "items": k8s.definition(META + "Condition"),
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
    }


def _observed_generation() -> dict[str, Any]:
    return {"type": "integer", "format": "int64",
            "description": "The metadata.generation this status was computed from."}


def _ds_status(k8s: Structural) -> dict[str, Any]:
    role_status = _obj(
        "Observed state of one role, summed over its LeaderWorkerSets of every slice and "
        "revision.",
        {
            "name": _string("Name of the role (spec.roles[].name)."),
            "replicas": _int32("Groups of the role, old and new revisions together."),
            "readyReplicas": _int32("Ready groups of the role, old and new revisions together."),
            "updatedReplicas": _int32("Groups of the role at the current revision."),
        },
        required=["name"])
    return _obj(
        "Observed state of the DisaggregatedSet, written by the operator.",
        {
            "observedGeneration": _observed_generation(),
            "roleStatuses": {
                "type": "array",
                "description": "One entry per role of spec.roles, in spec order.",
                "items": role_status,
                "x-kubernetes-list-type": "map",
                "x-kubernetes-list-map-keys": ["name"],
            },
            "conditions": _conditions(
                k8s, "Current observations of the DisaggregatedSet: Available or Progressing."),
        })


def _crd(kind: str, plural: str, short_names: list[str] | None, schema: dict[str, Any],
         subresources: dict[str, Any], columns: list[dict[str, Any]] | None,
         group: str = ds.GROUP) -> dict[str, Any]:
    names: dict[str, Any] = {"kind": kind, "listKind": f"{kind}List", "plural": plural,
                             "singular": kind.lower()}
    if short_names:
        names["shortNames"] = short_names
    version: dict[str, Any] = {"name": ds.VERSION, "served": True, "storage": True}
    if columns:
        version["additionalPrinterColumns"] = columns
    version["subresources"] = subresources
    version["schema"] = {"openAPIV3Schema": schema}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "names": names, "scope": "Namespaced",
                 "conversion": {"strategy": "None"}, "versions": [version]},
    }


def _top(kind: str, description: str, spec: dict[str, Any], status: dict[str, Any],
         spec_required: bool) -> dict[str, Any]:
    return _obj(
        description,
        {
            "apiVersion": _string(f"API version of this object: {ds.API_VERSION}."),
            "kind": _string(f"Kind of this object: {kind}."),
            "metadata": {"type": "object"},
            "spec": spec,
            "status": status,
        },
        required=["spec"] if spec_required else None,
    )


def build_ds_crd(core_doc: dict[str, Any], scheduling_doc: dict[str, Any]) -> dict[str, Any]:
    """The DisaggregatedSet CRD. No short name: ``ds`` is the DaemonSet's. No printer columns
    and no scale subresource, as upstream."""
    k8s = Structural(core_doc, scheduling_doc)
    schema = _top(
        ds.KIND,
        "A DisaggregatedSet runs the roles of disaggregated serving (prefill, decode, ...) as "
        "one object: one LeaderWorkerSet per role and slice, rolled to a new revision together "
        "so that no revision is left with one role serving and another gone.",
        _ds_spec(k8s), _ds_status(k8s), spec_required=True)
    return _crd(ds.KIND, ds.PLURAL, None, schema, {"status": {}}, None)


def build_scaler_crd(core_doc: dict[str, Any], scheduling_doc: dict[str, Any]) -> dict[str, Any]:
    """The DisaggregatedSetRoleScaler CRD: the scale target of an autoscaler for one External
    role. ``spec.replicas`` is defaulted (0) and required, so the scale subresource always finds
    it: a GET of ``/scale`` on an object without it fails with "the spec replicas field does not
    exist". Unlike upstream, an absent ``spec`` is defaulted too (to ``replicas: 0``): upstream's
    optional ``spec`` leaves a scaler written without one unscalable."""
    k8s = Structural(core_doc, scheduling_doc)
    spec = _obj(
        "Desired state of the role scaler.",
        {"replicas": _int32(
            "Desired groups of the role (per set; slices must be 1). The controller seeds it "
            "when it creates the scaler; an autoscaler writes it through the scale "
            "subresource.", default=0, minimum=0)},
        required=["replicas"])
    spec["default"] = {"replicas": 0}  # a default must pass the schema itself
    status = _obj(
        "Observed state of the role scaler, written by the operator.",
        {
            "replicas": _int32(
                "Groups of the role, every revision counted: the current size reported by the "
                "scale subresource."),
            "selector": _string(
                "Label selector, in string form, of the role's leader pods: the scale "
                "subresource reports it so an autoscaler reads the leaders' metrics."),
            "observedGeneration": _observed_generation(),
            "conditions": _conditions(
                k8s, "Current observations of the scaler: Ready once it is bound to a role."),
        })
    schema = _top(
        ds.SCALER_KIND,
        "A DisaggregatedSetRoleScaler holds the replica count of one External role of a "
        "DisaggregatedSet, for an autoscaler to drive. The controller creates it, named "
        "<set>-<role>, and deletes it with its role.",
        spec, status, spec_required=False)
    columns = [
        {"name": "Desired", "type": "integer", "jsonPath": ".spec.replicas",
         "description": "Desired groups of the role"},
        {"name": "Current", "type": "integer", "jsonPath": ".status.replicas",
         "description": "Current groups of the role"},
        {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    ]
    subresources = {
        "status": {},
        "scale": {"specReplicasPath": ".spec.replicas",
                  "statusReplicasPath": ".status.replicas",
                  "labelSelectorPath": ".status.selector"},
    }
    return _crd(ds.SCALER_KIND, ds.SCALER_PLURAL, [ds.SCALER_SHORT_NAME], schema, subresources,
                columns)


def build_all(core_doc: dict[str, Any], scheduling_doc: dict[str, Any],
              directory: Path = CRD_DIR) -> dict[Path, dict[str, Any]]:
    """Every CRD this repository ships, by the file it is committed as in ``directory``."""
    return {
        directory / CRD_PATH.name: build_crd(core_doc, scheduling_doc),
        directory / DS_CRD_PATH.name: build_ds_crd(core_doc, scheduling_doc),
        directory / SCALER_CRD_PATH.name: build_scaler_crd(core_doc, scheduling_doc),
    }


class _Dumper(yaml.SafeDumper):
    """Writes every repeated sub-schema out in full: no YAML anchors and aliases."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render(crd: dict[str, Any], server_version: str) -> str:
    body = yaml.dump(crd, Dumper=_Dumper, sort_keys=True, default_flow_style=False,
                     allow_unicode=True, width=100)
    header = ("# Generated by hack/gen_crd.py from the OpenAPI v3 documents of kube-apiserver "
              f"{server_version}. Do not edit.\n")
    if len(body.encode()) > 262144:  # client-side apply stores the object in an annotation
        header += "# Over 1 MB: install with `kubectl apply --server-side -f <this file>`.\n"
    return header + body


# --------------------------------------------------------------------------- the source server


def _kubectl_binary() -> str:
    from e2e.cluster.launcher import Binaries  # the pinned kubectl, when it has been built

    pinned = Binaries.pinned().k8s / "kubectl"
    if pinned.exists():
        return str(pinned)
    found = shutil.which("kubectl")
    if not found:
        raise SystemExit("no kubectl: build the pinned one (make build-cluster) or put one on PATH")
    return found


def _get_raw(kubeconfig: Path, path: str) -> str:
    proc = subprocess.run(
        [_kubectl_binary(), "--kubeconfig", str(kubeconfig), "--request-timeout=60s",
         "get", "--raw", path],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"GET {path} failed: {proc.stderr.strip()}")
    return proc.stdout


def _reachable(kubeconfig: Path) -> bool:
    if not kubeconfig.exists():
        return False
    proc = subprocess.run(
        [_kubectl_binary(), "--kubeconfig", str(kubeconfig), "--request-timeout=5s",
         "get", "--raw", "/readyz"],
        capture_output=True, text=True, check=False,
    )
    return proc.returncode == 0 and proc.stdout.strip() == "ok"


def _local_cluster(directory: Path) -> Any:
    from e2e.cluster import LocalCluster

    return LocalCluster(directory)


@contextmanager
def source_server(kubeconfig: Path | None, cluster_dir: Path, keep: bool) -> Iterator[Path]:
    """A kubeconfig of a server to read the documents from: the given one, else a local api-tier
    cluster (started, and stopped again afterwards, unless it was already running)."""
    if kubeconfig is not None:
        yield kubeconfig
        return
    cluster = _local_cluster(cluster_dir)
    if _reachable(cluster.kubeconfig):
        yield cluster.kubeconfig
        return
    cluster.up("api", timeout=180)
    try:
        yield cluster.kubeconfig
    finally:
        if not keep:
            cluster.down()


def fetch(kubeconfig: Path) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """The server version and its core/v1 and scheduling.k8s.io/v1beta1 documents."""
    version = json.loads(_get_raw(kubeconfig, "/version"))["gitVersion"]
    core = json.loads(_get_raw(kubeconfig, CORE_DOC))
    scheduling = json.loads(_get_raw(kubeconfig, SCHEDULING_DOC))
    return version, core, scheduling


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--check", action="store_true",
                        help="do not write; exit 1 if any output file differs")
    parser.add_argument("--kubeconfig", type=Path,
                        help=f"read the documents from this {K8S_VERSION} server")
    parser.add_argument("--dir", type=Path, default=CRD_DIR,
                        help="where the CRD files are (written or checked); default: %(default)s")
    parser.add_argument("--cluster-dir", type=Path, default=CLUSTER_DIR,
                        help="where to start the local cluster; default: %(default)s")
    parser.add_argument("--keep-cluster", action="store_true",
                        help="leave a cluster this run started running")
    args = parser.parse_args(argv)

    with source_server(args.kubeconfig, args.cluster_dir, args.keep_cluster) as kubeconfig:
        version, core, scheduling = fetch(kubeconfig)
    if version != K8S_VERSION:
        print(f"the source server is {version}; the CRD is pinned to {K8S_VERSION}",
              file=sys.stderr)
        return 2
    texts = {path: render(crd, version) for path, crd in build_all(core, scheduling,
                                                                   args.dir).items()}

    if args.check:
        stale = 0
        for path, text in texts.items():
            current = path.read_text() if path.exists() else ""
            if current == text:
                print(f"{path} is up to date")
                continue
            stale += 1
            diff = difflib.unified_diff(current.splitlines(), text.splitlines(),
                                        str(path), "generated", lineterm="", n=2)
            print("\n".join(list(diff)[:60]), file=sys.stderr)
            print(f"{path} is stale: run .venv/bin/python hack/gen_crd.py", file=sys.stderr)
        return 1 if stale else 0
    args.dir.mkdir(parents=True, exist_ok=True)
    for path, text in texts.items():
        path.write_text(text)
        print(f"wrote {path} ({len(text.encode())} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
