"""The objects a DisaggregatedSet creates: a LeaderWorkerSet per (slice, revision, role), a
headless Service per ready one, and a role scaler per External role (upstream's lws_manager.go,
service_manager.go and scaler_manager.go).

The builders return whole desired objects; whether to create, and what an existing object means,
is the controller's decision. Children are created once and never updated but for
``spec.replicas`` and the ``initial-replicas`` annotation, so what a builder writes here is what
the child keeps for its lifetime.

A child LeaderWorkerSet is a copy of the role's whole LeaderWorkerSet spec (the rollout strategy
too: the child's templates never change, so it is never used) with ``spec.replicas`` set by the
caller, the role's ``metadata`` labels and annotations on the object, and the five system labels
(``names.system_labels``) on the object and on each pod template, where they win over a user's
label of the same key. The copy is deep: mutating a built child never reaches the
DisaggregatedSet held in the cache.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import API_VERSION as LWS_API_VERSION
from lws_operator.api.constants import KIND as LWS_KIND
from lws_operator.api.constants import WORKER_INDEX_LABEL
from lws_operator.api.disaggregated import (
    API_VERSION,
    KIND,
    NAME_LABEL,
    REVISION_LABEL,
    ROLE_LABEL,
    SCALER_KIND,
    SLICE_LABEL,
    DisaggregatedSetView,
    RoleView,
)
from lws_operator.api.view import labels as labels_of
from lws_operator.api.view import metadata
from lws_operator.logic.disaggregated.names import (
    lws_name,
    scaler_name,
    service_name,
    system_labels,
)
from lws_operator.logic.disaggregated.placement import placement_affinity

DS = Mapping[str, Any] | DisaggregatedSetView
# The LeaderWorkerSet's ``groupReplacementPolicy`` when absent (LWS docs, "Group Replacement").
_DEFAULT_REPLACEMENT = "PostTermination"


def owner_reference(ds: DS, block_owner_deletion: bool = False) -> dict[str, Any]:
    """The controller ownerReference every child carries. LeaderWorkerSets and Services leave
    ``blockOwnerDeletion`` unset, as upstream's do; scalers set it.

    Raises ValueError when the set has no name or uid: the API server would refuse the reference,
    and a child created without it would never be garbage-collected."""
    view = DisaggregatedSetView.of(ds)
    if not view.name or not view.uid:
        raise ValueError(f"DisaggregatedSet {view.name or '<unnamed>'} has no name or uid")
    ref: dict[str, Any] = {"apiVersion": API_VERSION, "kind": KIND, "name": view.name,
                           "uid": view.uid, "controller": True}
    if block_owner_deletion:
        ref["blockOwnerDeletion"] = True
    return ref


def _role_view(role: RoleView | Mapping[str, Any]) -> RoleView:
    return role if isinstance(role, RoleView) else RoleView(role)


def _pod_template(template: Any, system: Mapping[str, str], ds: str, slice_index: int,
                  view: DisaggregatedSetView) -> dict[str, Any]:
    """A pod template with the system labels merged over the user's and the placement terms
    appended to its affinity (the argument is already a private copy)."""
    out = template if isinstance(template, dict) else {}
    meta = out.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    user_labels = meta.get("labels")
    meta["labels"] = {**(user_labels if isinstance(user_labels, Mapping) else {}), **system}
    out["metadata"] = meta
    spec = out.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    affinity = placement_affinity(spec.get("affinity"), ds, slice_index, view.placement)
    if affinity is not None:
        spec["affinity"] = affinity
    out["spec"] = spec
    return out


def build_lws(ds: DS, role: RoleView | Mapping[str, Any], slice_index: int, rev: str,
              replicas: int) -> dict[str, Any]:
    """The child LeaderWorkerSet of ``role`` at revision ``rev`` in ``slice_index``, with
    ``replicas`` groups (the desired count on the simple path, 0 for a rollout's new child)."""
    view = DisaggregatedSetView.of(ds)
    role_view = _role_view(role)
    system = system_labels(view.name, slice_index, rev, role_view.name)
    spec = copy.deepcopy(dict(role_view.spec))
    spec["replicas"] = replicas
    template = spec.get("leaderWorkerTemplate")
    template = template if isinstance(template, dict) else {}
    template["workerTemplate"] = _pod_template(template.get("workerTemplate"), system,
                                               view.name, slice_index, view)
    if isinstance(template.get("leaderTemplate"), dict):
        template["leaderTemplate"] = _pod_template(template["leaderTemplate"], system,
                                                   view.name, slice_index, view)
    spec["leaderWorkerTemplate"] = template
    meta: dict[str, Any] = {
        "name": lws_name(view.name, slice_index, rev, role_view.name),
        "namespace": view.namespace,
        "labels": {**role_view.labels, **system},
        "ownerReferences": [owner_reference(view)],
    }
    if role_view.annotations:
        meta["annotations"] = dict(role_view.annotations)
    return {"apiVersion": LWS_API_VERSION, "kind": LWS_KIND, "metadata": meta, "spec": spec}


def service_selector(ds: DS, lws: Mapping[str, Any]) -> dict[str, str]:
    """What a child's Service selects: the set's name, and the LeaderWorkerSet's role and
    revision labels, plus its slice label when it has one (a legacy child's Service selects
    without a slice, like its label-less pods)."""
    view = DisaggregatedSetView.of(ds)
    lws_labels = labels_of(lws)
    selector = {
        NAME_LABEL: view.name,
        ROLE_LABEL: str(lws_labels.get(ROLE_LABEL) or ""),
        REVISION_LABEL: str(lws_labels.get(REVISION_LABEL) or ""),
    }
    if lws_labels.get(SLICE_LABEL):
        selector[SLICE_LABEL] = str(lws_labels[SLICE_LABEL])
    return selector


def build_service(ds: DS, lws: Mapping[str, Any]) -> dict[str, Any]:
    """The headless, portless Service ``<lws>-prv`` through which a router finds the ready pods
    of one role at one revision in one slice: every pod of the LeaderWorkerSet, leaders and
    workers, resolves under it. Its labels are exactly its selector (no ``app``, no user
    labels)."""
    view = DisaggregatedSetView.of(ds)
    selector = service_selector(view, lws)
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": service_name(str(metadata(lws).get("name") or "")),
            "namespace": view.namespace,
            "labels": dict(selector),
            "ownerReferences": [owner_reference(view)],
        },
        "spec": {"clusterIP": "None", "selector": selector},
    }


def scaler_selector(ds: str, role: str) -> str:
    """The role scaler's ``status.selector``: the role's leader pods of every revision and
    slice. An HPA divides per-pod metrics by the pods it matches, and the count it reads and
    writes is groups, so only leaders may match."""
    return f"{NAME_LABEL}={ds},{ROLE_LABEL}={role},{WORKER_INDEX_LABEL}=0"


def build_scaler(ds: DS, role: RoleView | Mapping[str, Any] | str, seed: int) -> dict[str, Any]:
    """The DisaggregatedSetRoleScaler ``<ds>-<role>`` of an External role, seeded with ``seed``
    groups. ``spec.replicas`` is always written: ``/scale`` fails on a scaler without it."""
    view = DisaggregatedSetView.of(ds)
    name = role if isinstance(role, str) else _role_view(role).name
    return {
        "apiVersion": API_VERSION,
        "kind": SCALER_KIND,
        "metadata": {
            "name": scaler_name(view.name, name),
            "namespace": view.namespace,
            "labels": {NAME_LABEL: view.name, ROLE_LABEL: name},
            "ownerReferences": [owner_reference(view, block_owner_deletion=True)],
        },
        "spec": {"replicas": seed},
    }


def not_controlled_message(lws: str, ds: str, verb: str) -> str:
    """The error of a write refused because another owner controls the LeaderWorkerSet at a
    child's name (``verb`` is ``adopt`` on create, ``scale`` on a replica patch): the pass fails
    and is retried, since the foreign object's events never wake this set."""
    return (f"LeaderWorkerSet {lws} exists but is not controlled by DisaggregatedSet {ds}; "
            f"refusing to {verb} it")


def live_spec_patch(role: RoleView | Mapping[str, Any],
                    lws: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that brings an existing child's live settings to the role's, or None.

    The LWS docs: ``groupReplacementPolicy`` "is a live setting, not part of the LeaderWorkerSet
    revision, so switching it takes effect on the next reconcile without rolling any group".
    Upstream's controller never updates a child's spec but for its replicas, so a role's switch
    would never reach its running children; patching this one field in place honours the LWS docs.
    Values are compared as the LeaderWorkerSet reads them (absent is ``PostTermination``). The
    other fields outside the revision (startup policy, network configuration, role metadata)
    keep upstream's behaviour and reach a child only when it is created."""
    wanted = _role_view(role).spec.get("groupReplacementPolicy") or _DEFAULT_REPLACEMENT
    spec = lws.get("spec")
    have = (spec.get("groupReplacementPolicy") if isinstance(spec, Mapping) else None) \
        or _DEFAULT_REPLACEMENT
    return None if wanted == have else {"spec": {"groupReplacementPolicy": wanted}}
