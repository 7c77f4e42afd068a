"""Desired leader and worker StatefulSets of a LeaderWorkerSet (upstream's
leaderworkerset_controller.go and pod_controller.go).

The built-in StatefulSet controller does the heavy lifting of a LeaderWorkerSet: one "leader"
StatefulSet `<lws>` creates the leader pods `<lws>-<i>`, and one "worker" StatefulSet per leader,
named like it, creates `<lws>-<i>-1 .. <lws>-<i>-(S-1)`. The pod webhook then fills in the
per-pod facts these templates cannot know. What is decided here is what the templates and
StatefulSet specs say, and which LeaderWorkerSet they say it from:

* The leader StatefulSet is server-side applied on every pass from the **live** spec: its
  template always shows the current revision, and the partition (computed by the rollout logic)
  decides which leader ordinals the StatefulSet controller moves to it.
* A worker StatefulSet is created once per leader pod and never updated. It is built from the
  revision the leader pod carries (`apply_revision(live, stored patch)`), so a group rebuilt below
  the partition during a rollout comes back whole on its old template, size, subgroup policy and
  network config. Metadata, exclusive-topology and TPU facts come from the live objects.

Object names, labels, annotations and field values match the upstream Go controller's, so
StatefulSets created by either are indistinguishable to users and to the other implementation.

Quirks kept from upstream:
* LWS labels and annotations are copied onto both StatefulSets, and the exclusive-topology
  annotations of the LWS into the pod templates; editing those annotations rolls the leader pods
  through the StatefulSet controller, outside LWS rollout pacing (upstream's revision
  (revision_utils.go)).
* `serviceName` of the leader StatefulSet is `<lws>` even under UniquePerReplica.
* Volume claim templates are projected onto a few PVC fields (upstream's SSAWithStatefulset
(leaderworkerset_controller.go)); the rest is dropped.
* The worker pod template gets `subgroup-policy-type` only when the revision names a type.

Quirks fixed:
* Upstream reports a leader node without the exclusive-topology label as
  `node does not have topology label: ` (the empty lookup result where the key belongs); we name
  the key.
* An exclusive-topology annotation with an empty value pins nothing: upstream would look up the
  label "" on the node and fail on every pass, although it never copies an empty annotation into
  the pod templates either.
* A subgroup policy stored without a type (only possible on objects written before the CRD
  default existed; upstream would crash dereferencing it) gives the leader template the CRD
  default `LeaderWorker`.

Ours: the controller's own bookkeeping annotations on the LeaderWorkerSet (the restart counts and
counted leaders, which upstream does not have) are not copied onto the leader StatefulSet or
Deployment: they change with every group recreation, and each change re-applied the leader
object for nothing.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import (
    EVICTION_RESERVATIONS_ANNOTATION,
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GROUP_IDENTITY_ANNOTATION,
    GROUP_IDENTITY_HASH,
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    GROUP_RESTART_COUNTED_ANNOTATION,
    GROUP_RESTART_COUNTS_ANNOTATION,
    LEADER_NAME_ANNOTATION,
    LEADER_REQUESTS_TPUS_ANNOTATION,
    NAME_LABEL,
    REPLICAS_ANNOTATION,
    SIZE_ANNOTATION,
    SUBDOMAIN_POLICY_ANNOTATION,
    SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA,
    SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    SUBGROUP_POLICY_TYPE_ANNOTATION,
    SUBGROUP_SIZE_ANNOTATION,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.api.validation import scaled_value
from lws_operator.api.view import LEADER_INDEX, LeaderWorkerSetView, SubGroupPolicy, lws_view
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.logic.mutation.tpu import pod_requests_tpus
from lws_operator.logic.objects.meta import host_name, meta_of
from lws_operator.logic.objects.owners import lws_reference, pod_reference
from lws_operator.logic.placement.gang import template_annotations, worker_template_annotations

_PVC_REQUIREMENTS = ("limits", "requests")
_RETENTION_FIELDS = ("whenDeleted", "whenScaled")


# The LeaderWorkerSet annotations that are the controller's state, never copied (docstring).
_BOOKKEEPING = frozenset({GROUP_RESTART_COUNTS_ANNOTATION, GROUP_RESTART_COUNTED_ANNOTATION,
                          EVICTION_RESERVATIONS_ANNOTATION})


def copied_annotations(lws: LWS) -> dict[str, Any]:
    """The LeaderWorkerSet's annotations the leader StatefulSet or Deployment carries."""
    return {k: v for k, v in lws_view(lws).annotations.items() if k not in _BOOKKEEPING}


def spec_replicas(lws: LWS) -> int:
    """``spec.replicas``, 1 when absent (the API default; ``LeaderWorkerSetView.replicas``)."""
    return lws_view(lws).replicas


def _non_empty_annotation(lws: LeaderWorkerSetView, key: str) -> str | None:
    value = lws.annotations.get(key)
    return str(value) if value else None


def exclusive_topology_key(lws: LWS) -> str | None:
    """The node label key of exclusive group placement, or None when it is not requested.

    The pod controller must wait for the leader to be scheduled when this is set (upstream's pod
    Reconcile, pod_controller.go) and read the leader's node labels for `worker_statefulset`. An
    empty value counts as not requested (see the module docstring)."""
    return lws_view(lws).exclusive_topology


def _scaled(value: int | str, field: str, total: int, up: bool) -> int:
    scaled = scaled_value(value, total, up)
    if scaled is None or scaled < 0:
        raise ValueError(
            f"spec.rolloutStrategy.rollingUpdateConfiguration.{field}: invalid value {value!r}"
        )
    return scaled


def leader_max_unavailable(lws: LWS) -> int:
    """The leader StatefulSet's own `maxUnavailable`: the LWS budget plus the surge, at least 1.

    The LWS partition is what paces a rollout; this only keeps the StatefulSet controller from
    being the bottleneck (at least 1 also covers `replicas == 0`, where every percentage scales
    to 0). maxUnavailable rounds down, maxSurge rounds up and is capped at `spec.replicas`, both
    scaled against `spec.replicas`. Raises ValueError for a value the validating webhook rejects.
    """
    view = lws_view(lws)
    config, total = view.rolling_update, view.replicas
    max_unavailable = _scaled(config.max_unavailable, "maxUnavailable", total, up=False)
    max_surge = _scaled(config.max_surge, "maxSurge", total, up=True)
    return max(1, max_unavailable + min(max_surge, total))


def volume_claim_templates(lws: LWS) -> list[dict[str, Any]]:
    """The LWS volume claim templates as both StatefulSets carry them (upstream's
    SSAWithStatefulset (leaderworkerset_controller.go)).

    Each keeps only its name (in the LWS namespace) and the spec's `accessModes`,
    `storageClassName`, `volumeMode` and `resources.requests/limits`; selectors, data sources,
    volume names and the template's own labels and annotations are dropped, as upstream does.
    `storageClassName: ""` (no dynamic provisioning) is kept: it is set, not absent.
    """
    view = lws_view(lws)
    namespace = view.meta.get("namespace")
    out: list[dict[str, Any]] = []
    for claim in view.volume_claim_templates:
        claim_spec = claim.get("spec") or {}
        spec: dict[str, Any] = {}
        if claim_spec.get("accessModes"):
            spec["accessModes"] = list(claim_spec["accessModes"])
        for field in ("storageClassName", "volumeMode"):
            if claim_spec.get(field) is not None:
                spec[field] = claim_spec[field]
        requirements = claim_spec.get("resources") or {}
        resources = {
            field: copy.deepcopy(requirements[field])
            for field in _PVC_REQUIREMENTS
            if requirements.get(field)
        }
        if resources:
            spec["resources"] = resources
        out.append({
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": meta_of(claim).get("name"), "namespace": namespace},
            "spec": spec,
        })
    return out


def _add_storage(sts_spec: dict[str, Any], lws: LeaderWorkerSetView) -> None:
    claims = volume_claim_templates(lws)
    if claims:
        sts_spec["volumeClaimTemplates"] = claims
    policy = lws.pvc_retention_policy
    if policy is not None:
        sts_spec["persistentVolumeClaimRetentionPolicy"] = {
            field: policy[field] for field in _RETENTION_FIELDS if policy.get(field) is not None
        }


def _overlay_template(
    template: dict[str, Any], labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    """The template with `labels` and `annotations` laid over the user's own (which are kept)."""
    metadata = dict(template.get("metadata") or {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **labels}
    metadata["annotations"] = {**(metadata.get("annotations") or {}), **annotations}
    template["metadata"] = metadata
    return template


def _subgroup_annotations(
    subgroup_policy: SubGroupPolicy, live_lws: LeaderWorkerSetView, policy_type: str | None
) -> dict[str, str]:
    annotations: dict[str, str] = {}
    if policy_type is not None:
        annotations[SUBGROUP_POLICY_TYPE_ANNOTATION] = policy_type
    if subgroup_policy.size is not None:
        annotations[SUBGROUP_SIZE_ANNOTATION] = str(subgroup_policy.size)
    topology = _non_empty_annotation(live_lws, SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION)
    if topology is not None:
        annotations[SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION] = topology
    return annotations


def leader_pod_template(lws: LWS, key: str) -> dict[str, Any]:
    """The leader pod template of revision `key`: the user's leader template (or the worker
    template), with the LWS identity labels and the annotations the pod webhook reads. Shared
    by the leader StatefulSet (Ordinal) and the leader Deployment (Hash)."""
    view = lws_view(lws)
    name = view.name
    annotations = {SIZE_ANNOTATION: str(view.size)}
    topology = view.exclusive_topology
    if topology is not None:
        annotations[EXCLUSIVE_TOPOLOGY_ANNOTATION] = topology
    subgroup_policy = view.subgroup_policy
    if subgroup_policy is not None:
        annotations.update(
            _subgroup_annotations(subgroup_policy, view, subgroup_policy.effective_type))
    if view.subdomain_policy == SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA:
        annotations[SUBDOMAIN_POLICY_ANNOTATION] = SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA
    annotations.update(template_annotations(view))
    return _overlay_template(
        copy.deepcopy(dict(view.leader_pod_source)),
        {WORKER_INDEX_LABEL: LEADER_INDEX, NAME_LABEL: name, TEMPLATE_REVISION_HASH_LABEL: key},
        annotations,
    )


def leader_statefulset(
    lws: LWS, key: str, partition: int, replicas: int
) -> dict[str, Any]:
    """The server-side-apply body of the leader StatefulSet `<lws>` (upstream's SSAWithStatefulset
    (leaderworkerset_controller.go)).

    `lws` is the live LeaderWorkerSet, `key` its current revision key, `partition` and
    `replicas` the rollout decision of this pass (surge included). The full object is returned
    on every pass so that server-side apply with force owns every field it sets.
    """
    if partition < 0 or replicas < 0:
        raise ValueError(f"partition {partition} and replicas {replicas} must not be negative")
    view = lws_view(lws)
    metadata = view.meta
    name = view.name
    template = leader_pod_template(view, key)

    sts_spec: dict[str, Any] = {
        "replicas": replicas,
        "serviceName": name,
        "podManagementPolicy": "Parallel",
        "selector": {"matchLabels": {NAME_LABEL: name, WORKER_INDEX_LABEL: LEADER_INDEX}},
        "updateStrategy": {
            "type": view.rollout_type,
            "rollingUpdate": {
                "partition": partition,
                "maxUnavailable": leader_max_unavailable(view),
            },
        },
        "template": template,
    }
    _add_storage(sts_spec, view)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": name,
            "namespace": metadata.get("namespace"),
            "labels": {
                **(metadata.get("labels") or {}),
                NAME_LABEL: name,
                TEMPLATE_REVISION_HASH_LABEL: key,
            },
            "annotations": {
                **copied_annotations(view),
                REPLICAS_ANNOTATION: str(view.replicas),
            },
            "ownerReferences": [lws_reference(view)],
        },
        "spec": sts_spec,
    }


def hashed(lws: LWS) -> bool:
    """Whether the LeaderWorkerSet uses Hash group identity (a leader Deployment)."""
    return lws_view(lws).hashed


def _leader_label(leader_pod: Mapping[str, Any], label: str) -> str:
    value = (meta_of(leader_pod).get("labels") or {}).get(label)
    if value is None:
        name = meta_of(leader_pod).get("name")
        raise ValueError(f"leader pod {name} has no {label} label")
    return str(value)


def worker_statefulset(
    revision_lws: LWS,
    live_lws: LWS,
    leader_pod: dict[str, Any],
    leader_node_labels: dict[str, str] | None,
) -> dict[str, Any]:
    """The worker StatefulSet `<leader host name>` of one group (upstream's pod_controller.go), for
    a plain create
    (the host name is the leader pod name in Ordinal mode, `<lws>-<key prefix>` in Hash mode).

    `revision_lws` is `apply_revision(live_lws, <patch of the leader's revision>)`: the template,
    size, subgroup policy, network config and storage come from it. Metadata, the exclusive
    topology annotations and the StatefulSet's namespace come from `live_lws`.
    `leader_pod` is the leader as the pod cache holds it, which keeps only what
    `logic.reconcile.observed.POD_SPEC_SHAPE` declares: its containers' TPU requests are there
    because `leader-requests-tpus` is decided from them (without it every worker of a TPU leader
    took the leader's TPU id).
    `leader_node_labels` are the labels of the leader's node; they are needed only when the live
    LWS requests exclusive placement (`exclusive_topology_key`), and then the workers are pinned
    to the leader's topology domain by a nodeSelector.

    Raises ValueError when the leader lacks the labels the pod webhook gives every leader, when
    exclusive placement is requested but `leader_node_labels` is None (the leader is not
    scheduled yet: the caller should have waited), or when the node lacks the topology label:
    `node does not have topology label: <key>`. Upstream's message leaves the key out (it
    interpolates the empty lookup result); ours names it.
    """
    live, revision = lws_view(live_lws), lws_view(revision_lws)
    live_metadata = live.meta
    lws_name = live.name
    leader_name = str(meta_of(leader_pod).get("name") or "")
    host = host_name(leader_pod)
    group_index = _leader_label(leader_pod, GROUP_INDEX_LABEL)
    group_key = _leader_label(leader_pod, GROUP_KEY_LABEL)
    revision_key = _leader_label(leader_pod, TEMPLATE_REVISION_HASH_LABEL)
    size = revision.size
    if size < 1:
        raise ValueError(f"revision size {size} must be at least 1")

    selector = {GROUP_INDEX_LABEL: group_index, NAME_LABEL: lws_name, GROUP_KEY_LABEL: group_key}
    identity = {**selector, TEMPLATE_REVISION_HASH_LABEL: revision_key}
    annotations = {SIZE_ANNOTATION: str(size), LEADER_NAME_ANNOTATION: leader_name}
    topology = live.exclusive_topology
    if topology is not None:
        annotations[EXCLUSIVE_TOPOLOGY_ANNOTATION] = topology
    subgroup_policy = revision.subgroup_policy
    if subgroup_policy is not None:
        # The type only when the revision names one (module docstring).
        annotations.update(
            _subgroup_annotations(subgroup_policy, live, subgroup_policy.policy_type))
    if pod_requests_tpus(leader_pod):
        annotations[LEADER_REQUESTS_TPUS_ANNOTATION] = "true"
    if live.hashed:
        annotations[GROUP_IDENTITY_ANNOTATION] = GROUP_IDENTITY_HASH
    annotations.update(worker_template_annotations(live, leader_pod))
    template = _overlay_template(
        copy.deepcopy(dict(revision.worker_template)), identity, annotations
    )
    if topology is not None:
        if leader_node_labels is None:
            raise ValueError(
                f"leader pod {leader_name} is not scheduled yet: its node's {topology} label "
                "is needed to place the workers"
            )
        if topology not in leader_node_labels:
            raise ValueError(f"node does not have topology label: {topology}")
        pod_spec = dict(template.get("spec") or {})
        pod_spec["nodeSelector"] = {
            **(pod_spec.get("nodeSelector") or {}),
            topology: leader_node_labels[topology],
        }
        template["spec"] = pod_spec

    service_name = (
        host if revision.subdomain_policy == SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA else lws_name
    )
    sts_spec: dict[str, Any] = {
        "replicas": size - 1,
        "serviceName": service_name,
        "podManagementPolicy": "Parallel",
        "ordinals": {"start": 1},
        "selector": {"matchLabels": selector},
        "template": template,
    }
    _add_storage(sts_spec, revision)
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {
            "name": host,
            "namespace": live_metadata.get("namespace"),
            "labels": {**(live_metadata.get("labels") or {}), **identity},
            "annotations": dict(live_metadata.get("annotations") or {}),
            "ownerReferences": [pod_reference(leader_pod)],
        },
        "spec": sts_spec,
    }
