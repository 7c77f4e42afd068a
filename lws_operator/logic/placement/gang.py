"""Native gang scheduling: the Workload and PodGroups of a set (LWS docs, "Gang Scheduling").

kube-scheduler admits the pods of a PodGroup together (``gang.minCount``); a pod joins one
through ``spec.schedulingGroup.podGroupName``, which is immutable, so the name must be known when
the pod is admitted, and the PodGroup must exist before the scheduler can place the pod. One
LeaderWorkerSet with ``spec.scheduling`` therefore gets:

* one ``Workload`` ``<lws>-<uid-hash>`` holding one PodGroup template per level: ``lws`` (the
  whole set), ``replica``, or ``leader`` and ``worker`` (role level). It is created before the
  leader StatefulSet, so before any member pod. The UID hash keeps a recreated LeaderWorkerSet of
  the same name off the (deletion-protected) objects of its predecessor.
* runtime PodGroups, instances of those templates:

  - whole-LWS level: ``<lws>-<uid-hash>-lws``, owned by the LeaderWorkerSet, created up front;
  - replica level: ``<lws>-<uid-hash>.<incarnation>-<group-index>-<revision>`` per leader pod;
  - role level: the same with ``-leader-`` / ``-worker-`` before the revision.

  At the replica and role levels the pod webhook gives each leader a random 5-character
  *incarnation* and the ``group-replacement`` scheduling gate; the controller creates the
  leader's PodGroups, then lifts the gate and creates the workers, which inherit the incarnation
  through their StatefulSet template. A recreated leader (same name, index and revision in
  Ordinal mode) thus never waits on its predecessor's PodGroup while that one is being deleted.
  These PodGroups are owned by their leader pod (not blocking its deletion: the PodGroup
  protection finalizer holds a PodGroup until its last pod is gone, and a blocking reference
  would deadlock a foreground delete of the leader), so they go with their group.

The pod webhook sees no LeaderWorkerSet, so the controller writes the level and the Workload
name on both pod templates (``workload-aware-scheduling``, ``workload-name``).

``gang.minCount`` is derived, never taken from the user: a replica PodGroup counts the size its
leader was created with (a replica the rollout has not replaced yet keeps its previous size);
role PodGroups count 1 leader and ``size - 1`` workers; the whole-LWS PodGroup sums, over the
replica indices ``0 .. replicas-1``, the size of the existing leader or the current size. When a
parent controller owns the Workload (``scheduling.k8s.io/group-template-name`` on the
LeaderWorkerSet), LWS creates no Workload: its PodGroups instantiate the parent's named template
and take that template's policy (its ``minCount``) as it is when they are created.

Choices where the LWS docs is silent: at the role level, a role without settings gets a ``basic``
(pod-by-pod) PodGroup; a ``worker`` template of a size-1 set keeps ``minCount: 1`` (templates
cannot be added later and the minimum is 1) and no worker PodGroup is created while size is 1;
the whole-LWS PodGroup does not exist while ``replicas`` is 0.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from lws_operator.api.constants import (
    API_VERSION,
    CONDITION_WORKLOAD_SCHEDULING_CREATED,
    GROUP,
    GROUP_INCARNATION_ANNOTATION,
    GROUP_INDEX_LABEL,
    GROUP_REPLACEMENT_GATE,
    GROUP_TEMPLATE_NAME_ANNOTATION,
    KIND,
    LEADER_NAME_ANNOTATION,
    NAME_LABEL,
    ROLE_LABEL,
    SCHEDULING_LEVEL_LABEL,
    SIZE_ANNOTATION,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKLOAD_NAME_ANNOTATION,
    WORKLOAD_SCHEDULING_ANNOTATION,
)
from lws_operator.api.validation import effective_priority_class
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import (
    LeaderWorkerSetView,
    annotations_of,
    deleting,
    group_index,
    is_leader,
    lws_view,
    revision_of,
)
from lws_operator.logic.identity.revision import safe_encode
from lws_operator.logic.objects.meta import labels_of, meta_of, name_of

Level = Literal["lws", "replica", "role"]
SCHEDULING_API_VERSION = "scheduling.k8s.io/v1beta1"
INCARNATION_LENGTH = 5
_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
_GANG_FIELDS = ("schedulingConstraints", "disruptionMode", "resourceClaims")
LWS_TEMPLATE, REPLICA_TEMPLATE, LEADER, WORKER = "lws", "replica", "leader", "worker"

# WorkloadSchedulingCreated reasons (False ones as upstream's troubleshooting page lists them).
REASON_CREATED = "WorkloadSchedulingCreated"
REASON_API_NOT_AVAILABLE = "APINotAvailable"
REASON_WORKLOAD_CREATE_FAILED = "WorkloadCreateFailed"
REASON_POD_GROUP_CREATE_FAILED = "PodGroupCreateFailed"
REASON_PARENT_NOT_READY = "ParentWorkloadNotReady"
REASON_CLEANUP_BLOCKED = "PodGroupCleanupBlocked"


def level_of(lws: LWS) -> Level | None:
    """The active level of ``spec.scheduling``; None without native gang scheduling (or with a
    mix of levels, which validation rejects)."""
    found = lws_view(lws).scheduling_level
    return found if found in ("lws", "replica", "role") else None  # type: ignore[return-value]


def fnv1a_32(data: bytes) -> int:
    """32-bit FNV-1a (xor, then multiply), as Go's ``hash/fnv.New32a``."""
    value = 2166136261
    for byte in data:
        value ^= byte
        value = (value * 16777619) & 0xFFFFFFFF
    return value


def uid_hash(uid: str) -> str:
    """The UID part of scheduling object names: FNV-1a over the UID as Kubernetes' hash dump
    renders it (``(types.UID)<uid>``), in decimal, safe-encoded; as upstream names them."""
    return safe_encode(str(fnv1a_32(f"(types.UID){uid}".encode())))


def workload_name(lws: LWS) -> str:
    """``<lws>-<uid-hash>``: the Workload, and the stem of every runtime PodGroup name."""
    view = lws_view(lws)
    return f"{view.meta.get('name')}-{uid_hash(view.uid)}"


def whole_set_pod_group_name(workload: str) -> str:
    return f"{workload}-{LWS_TEMPLATE}"


def group_pod_group_name(workload: str, incarnation: str | None, group_index: str,
                         revision: str, role: str | None = None) -> str:
    """A replica (``role`` None) or role PodGroup name. Without an incarnation (a leader admitted
    by a version that gave none) the name is the earlier ``<workload>-<index>[-<role>]-<rev>``."""
    head = f"{workload}.{incarnation}" if incarnation else workload
    return "-".join([head, group_index, *([role] if role else []), revision])


def new_incarnation() -> str:
    """A random group incarnation (5 characters of the safe alphabet: DNS-label safe)."""
    return "".join(secrets.choice(_ALPHABET) for _ in range(INCARNATION_LENGTH))


def template_annotations(lws: LWS) -> dict[str, str]:
    """What both pod templates carry so the pod webhook can name a pod's PodGroup."""
    level = level_of(lws)
    if level is None:
        return {}
    return {WORKLOAD_SCHEDULING_ANNOTATION: level, WORKLOAD_NAME_ANNOTATION: workload_name(lws)}


def worker_template_annotations(lws: LWS, leader_pod: Mapping[str, Any]) -> dict[str, str]:
    """The worker template's: the leader's incarnation on top of ``template_annotations``."""
    out = template_annotations(lws)
    incarnation = annotations_of(leader_pod).get(GROUP_INCARNATION_ANNOTATION)
    if out and incarnation:
        out[GROUP_INCARNATION_ANNOTATION] = str(incarnation)
    return out


# ------------------------------------------------------------------------------ pod admission


def _child(parent: dict[str, Any], key: str) -> dict[str, Any]:
    child = parent.get(key)
    if not isinstance(child, dict):
        child = parent[key] = {}
    return child


def assign_pod_group(pod: dict[str, Any], *, leader: bool,
                     incarnation: Callable[[], str] = new_incarnation) -> None:
    """Admission, in place: the PodGroup of a gang-scheduled pod (no-op for other pods).

    A replica- or role-level leader gets an incarnation (kept if it has one) and the
    ``group-replacement`` gate; every pod gets ``spec.schedulingGroup.podGroupName`` unless it
    already names one."""
    metadata = _child(pod, "metadata")
    annotations = metadata.get("annotations") or {}
    level = annotations.get(WORKLOAD_SCHEDULING_ANNOTATION)
    workload = annotations.get(WORKLOAD_NAME_ANNOTATION)
    if level not in ("lws", "replica", "role") or not workload:
        return
    labels = metadata.get("labels") or {}
    spec = _child(pod, "spec")
    if level == "lws":
        name = whole_set_pod_group_name(str(workload))
    else:
        inc = annotations.get(GROUP_INCARNATION_ANNOTATION)
        if leader:
            if not inc:
                inc = incarnation()
                _child(metadata, "annotations")[GROUP_INCARNATION_ANNOTATION] = inc
            gates = spec.setdefault("schedulingGates", []) or []
            spec["schedulingGates"] = gates
            if not any(g.get("name") == GROUP_REPLACEMENT_GATE for g in gates):
                gates.append({"name": GROUP_REPLACEMENT_GATE})
        role = (LEADER if leader else WORKER) if level == "role" else None
        name = group_pod_group_name(str(workload), str(inc) if inc else None,
                                    str(labels.get(GROUP_INDEX_LABEL, "")),
                                    str(labels.get(TEMPLATE_REVISION_HASH_LABEL, "")), role)
    group = spec.get("schedulingGroup")
    if not isinstance(group, dict) or not group.get("podGroupName"):
        spec["schedulingGroup"] = {"podGroupName": name}


def pod_group_of(pod: Mapping[str, Any]) -> str | None:
    """The PodGroup a pod belongs to, or None."""
    group = (pod.get("spec") or {}).get("schedulingGroup")
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return str(name) if name else None


def gated(pod: Mapping[str, Any]) -> bool:
    """Whether the pod still carries our ``group-replacement`` scheduling gate."""
    return any(isinstance(g, Mapping) and g.get("name") == GROUP_REPLACEMENT_GATE
               for g in (pod.get("spec") or {}).get("schedulingGates") or [])


def gates_without_ours(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [dict(g) for g in (pod.get("spec") or {}).get("schedulingGates") or []
            if not (isinstance(g, Mapping) and g.get("name") == GROUP_REPLACEMENT_GATE)]


# ------------------------------------------------------------------------------ the objects


def _settings(lws: LeaderWorkerSetView, level: Level,
              role: str | None) -> Mapping[str, Any] | None:
    """The user's settings of one template (``spec.scheduling``, ``.replica`` or a role); None
    for a role the user did not set."""
    scheduling = lws.scheduling or {}
    if level == "lws":
        return scheduling
    replica = scheduling.get("replica") or {}
    if level == "replica":
        return replica
    settings = replica.get(role or "")
    return settings if isinstance(settings, Mapping) else None


def _policy(settings: Mapping[str, Any] | None, min_count: int) -> dict[str, Any]:
    """The template's scheduling policy: ``basic`` when the user chose it or the role has no
    settings at all (``settings`` None), else gang with the derived minimum (at least 1)."""
    if settings is None:
        return {"basic": {}}
    policy = settings.get("schedulingPolicy")
    if (isinstance(policy, Mapping) and policy.get("basic") is not None
            and policy.get("gang") is None):
        return {"basic": {}}
    return {"gang": {"minCount": max(1, min_count)}}


def _template(lws: LeaderWorkerSetView, level: Level, name: str, role: str | None,
              min_count: int) -> dict[str, Any]:
    settings = _settings(lws, level, role)
    template: dict[str, Any] = {"name": name, "schedulingPolicy": _policy(settings, min_count)}
    for key in _GANG_FIELDS:
        if settings is not None and settings.get(key) is not None:
            template[key] = settings[key]
    priority_class = effective_priority_class(dict(lws.spec))
    if priority_class:
        template["priorityClassName"] = priority_class
    return template


def whole_set_min_count(lws: LWS, leaders: Iterable[Mapping[str, Any]]) -> int:
    """Σ over replica indices ``0 .. replicas-1`` of the size their existing leader was created
    with (a replica the rollout has not replaced yet counts its previous size), else the
    current size. Surge replicas are not counted: once the gang's minimum runs, they place one
    pod at a time, as the LWS docs describe."""
    view = lws_view(lws)
    replicas, size = view.replicas, view.size
    sizes: dict[str, int] = {}
    for leader in leaders:
        if deleting(leader):
            continue
        index = group_index(leader) or ""
        raw = annotations_of(leader).get(SIZE_ANNOTATION)
        if raw is not None and str(raw).isdigit():
            sizes[index] = int(raw)
    return sum(sizes.get(str(i), size) for i in range(replicas))


def desired_workload(lws: LWS, leaders: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The Workload LWS owns, or None (no gang scheduling, or a parent owns the Workload)."""
    view = lws_view(lws)
    level = level_of(view)
    if level is None or view.annotations.get(GROUP_TEMPLATE_NAME_ANNOTATION):
        return None
    size = view.size
    if level == "lws":
        templates = [_template(view, level, LWS_TEMPLATE, None,
                               whole_set_min_count(view, leaders))]
    elif level == "replica":
        templates = [_template(view, level, REPLICA_TEMPLATE, None, size)]
    else:
        templates = [_template(view, level, LEADER, LEADER, 1),
                     _template(view, level, WORKER, WORKER, size - 1)]
    meta = view.meta
    return {
        "apiVersion": SCHEDULING_API_VERSION,
        "kind": "Workload",
        "metadata": {
            "name": workload_name(view),
            "namespace": meta.get("namespace"),
            "labels": {NAME_LABEL: meta.get("name")},
            "ownerReferences": [_reference(view.raw, API_VERSION, KIND, block=True)],
        },
        "spec": {
            "controllerRef": {"apiGroup": GROUP, "kind": KIND, "name": meta.get("name")},
            "podGroupTemplates": templates,
        },
    }


def _reference(owner: Mapping[str, Any], api_version: str, kind: str,
               block: bool) -> dict[str, Any]:
    meta = meta_of(owner)
    if not meta.get("name") or not meta.get("uid"):
        raise ValueError(f"owner {kind} {meta.get('name') or '<unnamed>'} has no name or uid")
    return {"apiVersion": api_version, "kind": kind, "name": meta.get("name"),
            "uid": meta.get("uid"), "controller": True, "blockOwnerDeletion": block}


@dataclass(frozen=True)
class Source:
    """Where runtime PodGroups take their template from (``workloadRef``): LWS's own Workload,
    or the parent's. Their names always follow the LeaderWorkerSet (``workload_name``), which
    is what the pod webhook derives too."""

    workload: str
    parent_templates: Mapping[str, Mapping[str, Any]] | None = None  # name -> template
    parent_template: str | None = None


def find_parent_workload(lws: LWS, workloads: Iterable[Mapping[str, Any]]
                         ) -> tuple[Source | None, str]:
    """The parent-owned Workload named by ``scheduling.k8s.io/group-template-name``: the
    Workload of the LeaderWorkerSet's namespace whose ``controllerRef`` is the LeaderWorkerSet's
    controller owner and which has that template. Returns (None, why) when it is not there."""
    view = lws_view(lws)
    template = str(view.annotations.get(GROUP_TEMPLATE_NAME_ANNOTATION))
    owner = next((r for r in view.meta.get("ownerReferences") or [] if r.get("controller")),
                 None)
    if owner is None:
        return None, (f"{GROUP_TEMPLATE_NAME_ANNOTATION} is set but the LeaderWorkerSet has no "
                      "controller owner whose Workload could hold the template")
    group = str(owner.get("apiVersion") or "").rpartition("/")[0]
    for workload in workloads:
        ref = (workload.get("spec") or {}).get("controllerRef") or {}
        if (ref.get("kind") != owner.get("kind") or ref.get("name") != owner.get("name")
                or (ref.get("apiGroup") or "") != group
                or meta_of(workload).get("namespace") != view.meta.get("namespace")):
            continue
        templates = {str(t.get("name")): t
                     for t in (workload.get("spec") or {}).get("podGroupTemplates") or []}
        if template not in templates:
            return None, (f"the parent Workload {name_of(workload)} has no PodGroup template "
                          f"{template!r}")
        return Source(name_of(workload), templates, template), ""
    return None, (f"no Workload controlled by {owner.get('kind')} {owner.get('name')} exists yet "
                  f"(for PodGroup template {template!r})")


def _pod_group(lws: LeaderWorkerSetView, source: Source, name: str, template_name: str,
               template: Mapping[str, Any], labels: dict[str, str],
               owner: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"workloadRef": {"workloadName": source.workload,
                                            "templateName": template_name}}
    for key in ("schedulingPolicy", *_GANG_FIELDS, "priorityClassName"):
        if template.get(key) is not None:
            spec[key] = template[key]
    return {
        "apiVersion": SCHEDULING_API_VERSION,
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": lws.meta.get("namespace"),
                     "labels": {NAME_LABEL: str(lws.meta.get("name")), **labels},
                     "ownerReferences": [owner]},
        "spec": spec,
    }


def _group_roles(level: str, size: int) -> list[tuple[str | None, str, int]]:
    """The PodGroups of one group of ``size`` pods, as (role, template name, minCount): one for
    the whole group at the replica level; at the role level the leader's, and the workers'
    when the group has any."""
    if level == "replica":
        return [(None, REPLICA_TEMPLATE, size)]
    return [(LEADER, LEADER, 1), *([(WORKER, WORKER, size - 1)] if size > 1 else [])]


def desired_pod_groups(lws: LWS, source: Source,
                       leaders: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Every runtime PodGroup that should exist now (created if absent; only a whole-LWS
    PodGroup's ``minCount`` is ever updated). Terminating leaders get none: nothing is built
    for a group that is going away."""
    view = lws_view(lws)
    level = level_of(view)
    if level is None:
        return []
    live = [p for p in leaders if not deleting(p)]
    stem = workload_name(view)  # names follow the LeaderWorkerSet, even under a parent Workload

    def template(name: str, role: str | None, min_count: int) -> tuple[str, Mapping[str, Any]]:
        if source.parent_templates is not None and source.parent_template:
            return source.parent_template, source.parent_templates[source.parent_template]
        return name, _template(view, level, name, role, min_count)

    if level == "lws":
        if view.replicas == 0:
            return []
        template_name, body = template(LWS_TEMPLATE, None, whole_set_min_count(view, live))
        return [_pod_group(view, source, whole_set_pod_group_name(stem),
                           template_name, body, {SCHEDULING_LEVEL_LABEL: "lws"},
                           _reference(view.raw, API_VERSION, KIND, block=True))]
    out = []
    for leader in live:
        annotations = annotations_of(leader)
        index = group_index(leader) or ""
        revision = revision_of(leader)
        if not index or not revision:
            continue
        raw = str(annotations.get(SIZE_ANNOTATION) or view.size)
        size = int(raw) if raw.isdigit() else view.size
        incarnation = annotations.get(GROUP_INCARNATION_ANNOTATION)
        base = {GROUP_INDEX_LABEL: index, TEMPLATE_REVISION_HASH_LABEL: revision,
                SCHEDULING_LEVEL_LABEL: level}
        owner = _reference(leader, "v1", "Pod", block=False)
        for role, name, min_count in _group_roles(level, size):
            template_name, body = template(name, role, min_count)
            group_name = group_pod_group_name(stem, incarnation, index, revision, role)
            out.append(_pod_group(view, source, group_name, template_name, body,
                                  {**base, **({ROLE_LABEL: role} if role else {})}, owner))
    return out


def names_for_leader(lws: LWS, workload: str, leader: Mapping[str, Any]) -> list[str]:
    """The PodGroups a gated leader needs before its gate is lifted."""
    level = level_of(lws)
    annotations = annotations_of(leader)
    incarnation = annotations.get(GROUP_INCARNATION_ANNOTATION)
    index = group_index(leader) or ""
    revision = revision_of(leader)
    if level in ("replica", "role"):
        raw = str(annotations.get(SIZE_ANNOTATION) or "1")
        size = int(raw) if raw.isdigit() else 1
        return [group_pod_group_name(workload, incarnation, index, revision, role)
                for role, _, _ in _group_roles(level, size)]
    return [whole_set_pod_group_name(workload)] if level == "lws" else []


def stale_pod_groups(pod_groups: Iterable[Mapping[str, Any]], desired: Iterable[str],
                     pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """PodGroups of the LeaderWorkerSet that nothing needs any more: not desired, referenced by
    no pod, not already being deleted. This removes those of groups that are gone (scale-down,
    replaced revisions) and those an earlier version named without an incarnation."""
    keep = set(desired) | {n for n in (pod_group_of(p) for p in pods) if n}
    return [g for g in pod_groups
            if name_of(g) not in keep and not deleting(g)
            and labels_of(g).get(SCHEDULING_LEVEL_LABEL)]


def min_count_of(obj: Mapping[str, Any]) -> int | None:
    gang = ((obj.get("spec") or {}).get("schedulingPolicy") or {}).get("gang")
    return int(gang["minCount"]) if isinstance(gang, Mapping) and "minCount" in gang else None


def workload_update(desired: Mapping[str, Any], live: Mapping[str, Any]) -> dict[str, Any] | None:
    """The merge patch that brings the live Workload's ``gang.minCount`` values to the desired
    ones (the only mutable part LWS manages), or None when they agree."""
    live_templates = {str(t.get("name")): t
                      for t in (live.get("spec") or {}).get("podGroupTemplates") or []}
    changed = False
    templates = []
    for template in (desired.get("spec") or {}).get("podGroupTemplates") or []:
        current = live_templates.get(str(template.get("name")))
        if current is None:
            return None  # templates cannot be added; an immutable drift is reported elsewhere
        want = ((template.get("schedulingPolicy") or {}).get("gang") or {}).get("minCount")
        have = ((current.get("schedulingPolicy") or {}).get("gang") or {}).get("minCount")
        merged = dict(current)
        if want is not None and have is not None and want != have:
            merged["schedulingPolicy"] = {**current["schedulingPolicy"],
                                          "gang": {**current["schedulingPolicy"]["gang"],
                                                   "minCount": want}}
            changed = True
        templates.append(merged)
    if not changed:
        return None
    return {"metadata": {"resourceVersion": meta_of(live).get("resourceVersion")},
            "spec": {"podGroupTemplates": templates}}


def mismatched_groups(lws: LWS, workload: str,
                      pods: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Leaders whose workers joined another PodGroup than the leader's workers must (a leader
    admitted by this version whose workers an earlier controller created, upgrade skew): they
    are recreated, but only while none of their workers is scheduled."""
    level = level_of(lws)
    if level not in ("replica", "role"):
        return []
    pods = list(pods)
    leaders = {name_of(p): p for p in pods
               if is_leader(p) and not deleting(p)
               and annotations_of(p).get(GROUP_INCARNATION_ANNOTATION)}
    out: dict[str, Mapping[str, Any]] = {}
    by_leader: dict[str, list[Mapping[str, Any]]] = {}
    for pod in pods:
        leader_name = str(annotations_of(pod).get(LEADER_NAME_ANNOTATION) or "")
        if not is_leader(pod) and leader_name in leaders:
            by_leader.setdefault(leader_name, []).append(pod)
    for leader_name, workers in by_leader.items():
        leader = leaders[leader_name]
        expected = names_for_leader(lws, workload, leader)[-1]
        if level == "role" and len(names_for_leader(lws, workload, leader)) < 2:
            continue
        wrong = [w for w in workers if pod_group_of(w) not in (None, expected)
                 and revision_of(w) == revision_of(leader)]
        if wrong and not any((w.get("spec") or {}).get("nodeName") for w in workers):
            out[leader_name] = leader
    return list(out.values())


def scheduling_condition(observed: Iterable[Mapping[str, Any]], ok: bool, reason: str,
                         message: str, generation: int, now: str) -> dict[str, Any]:
    """``WorkloadSchedulingCreated``: True once the requested scheduling objects exist (it says
    nothing about placement); False with a reason naming what failed."""
    status = "True" if ok else "False"
    before = next((c for c in observed if c.get("type") == CONDITION_WORKLOAD_SCHEDULING_CREATED),
                  None)
    changed = before is None or before.get("status") != status
    return {"type": CONDITION_WORKLOAD_SCHEDULING_CREATED, "status": status, "reason": reason,
            "message": message,
            "lastTransitionTime": now if changed else before.get("lastTransitionTime") if before
            else now,
            "observedGeneration": generation}


def apply_condition(status: dict[str, Any], condition: Mapping[str, Any] | None
                    ) -> dict[str, Any]:
    """The status with ``condition`` in place of its type (unchanged when None)."""
    if condition is None:
        return status
    conditions = [dict(c) for c in status.get("conditions") or []
                  if c.get("type") != condition["type"]]
    conditions.append(dict(condition))
    return {**status, "conditions": conditions}
