"""Validation of native gang scheduling (``spec.scheduling``), ours: the upstream snapshot has
none. One scheduling level at a time (the whole set, each replica, or each role), settings the
PodGroup API accepts, and, on update, nothing changed but a gang's ``minCount`` (which LWS
derives anyway)."""

from __future__ import annotations

from typing import Any

from .constants import EXCLUSIVE_TOPOLOGY_ANNOTATION
from .field_errors import LWT, FieldError, field_at, immutable, int_or_none

_GANG_FIELDS = ("schedulingPolicy", "schedulingConstraints", "disruptionMode", "resourceClaims")


def _templates(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    lwt = spec.get("leaderWorkerTemplate") or {}
    out = []
    for key in ("leaderTemplate", "workerTemplate"):
        if isinstance(lwt.get(key), dict):
            out.append((f"{LWT}.{key}", lwt[key]))
    return out


def effective_priority_class(spec: dict[str, Any]) -> str | None:
    """The priority class of the group's leader: the leader template's, else the worker's."""
    lwt = spec.get("leaderWorkerTemplate") or {}
    template = lwt.get("leaderTemplate") or lwt.get("workerTemplate") or {}
    value = field_at(template, "spec", "priorityClassName")
    return value if isinstance(value, str) and value else None


def scheduling_level(scheduling: Any) -> str | None:
    """``lws``, ``replica`` or ``role``; ``mixed`` when settings of two levels are combined."""
    if not isinstance(scheduling, dict):
        return None
    replica = scheduling.get("replica")
    whole = any(scheduling.get(f) is not None for f in _GANG_FIELDS)
    roles = isinstance(replica, dict) and any(replica.get(r) is not None
                                              for r in ("leader", "worker"))
    replica_set = isinstance(replica, dict) and any(replica.get(f) is not None
                                                    for f in _GANG_FIELDS)
    if whole:
        return "mixed" if replica is not None else "lws"
    if roles:
        return "mixed" if replica_set else "role"
    return "replica"



def validate_scheduling(lws: dict[str, Any]) -> list[FieldError]:
    spec = lws.get("spec") or {}
    scheduling = spec.get("scheduling")
    if scheduling is None:
        return []
    errors = []
    if scheduling_level(scheduling) == "mixed":
        errors.append(FieldError(
            "spec.scheduling",
            "exactly one scheduling level may be set: whole-LWS (schedulingPolicy, "
            "schedulingConstraints, disruptionMode, resourceClaims), replica "
            "(replica) or role (replica.leader, replica.worker)", type="Forbidden"))
    if spec.get("startupPolicy") == "LeaderReady":
        errors.append(FieldError("spec.startupPolicy",
                                 "LeaderReady is not supported with gang scheduling "
                                 "(spec.scheduling): the gang could never form", "LeaderReady"))
    annotations = field_at(lws, "metadata", "annotations") or {}
    if EXCLUSIVE_TOPOLOGY_ANNOTATION in annotations:
        errors.append(FieldError(f"metadata.annotations.{EXCLUSIVE_TOPOLOGY_ANNOTATION}",
                                 "exclusive-topology cannot be combined with gang scheduling "
                                 "(spec.scheduling)", type="Forbidden"))
    for path, template in _templates(spec):
        if field_at(template, "spec", "schedulingGroup") is not None:
            errors.append(FieldError(f"{path}.spec.schedulingGroup",
                                     "must not be set: LWS derives the PodGroup of each pod "
                                     "when gang scheduling (spec.scheduling) is enabled",
                                     type="Forbidden"))
    errors += _validate_gang_settings(spec, scheduling)
    lwt = spec.get("leaderWorkerTemplate") or {}
    if isinstance(lwt.get("leaderTemplate"), dict):
        leader = field_at(lwt, "leaderTemplate", "spec", "priorityClassName") or None
        worker = field_at(lwt, "workerTemplate", "spec", "priorityClassName") or None
        if leader != worker:
            errors.append(FieldError(f"{LWT}.leaderTemplate.spec.priorityClassName",
                                     "leader and worker templates must use the same "
                                     "priorityClassName with gang scheduling", leader))
    return errors


def _derived_min_counts(spec: dict[str, Any], level: str | None) -> dict[str, int]:
    """``gang.minCount`` as LWS derives it, per settings path (what a user value must equal)."""
    size = int_or_none(field_at(spec, "leaderWorkerTemplate", "size")) or 1
    replicas = int_or_none(spec.get("replicas"))
    replicas = 1 if replicas is None else replicas
    if level == "lws":
        return {"spec.scheduling": replicas * size}
    if level == "replica":
        return {"spec.scheduling.replica": size}
    if level == "role":
        return {"spec.scheduling.replica.leader": 1, "spec.scheduling.replica.worker": size - 1}
    return {}


def _validate_gang_settings(spec: dict[str, Any], scheduling: Any) -> list[FieldError]:
    """Per active template: one policy (basic or gang), a positive minCount, at most 4 shared
    resource claims (the PodGroup API's limit). A user's ``gang.minCount`` is accepted (and may
    change, as the LWS docs allow) but not used: LWS derives the minimum from replicas and size
    (``placement.gang``), which the LWS docs promise; ``derived`` only selects the paths."""
    if not isinstance(scheduling, dict):
        return []
    errors = []
    for path, _derived in _derived_min_counts(spec, scheduling_level(scheduling)).items():
        settings = field_at({"spec": {"scheduling": scheduling}}, *path.split("."))
        if not isinstance(settings, dict):
            continue
        policy = settings.get("schedulingPolicy")
        if isinstance(policy, dict):
            if policy.get("basic") is not None and policy.get("gang") is not None:
                errors.append(FieldError(f"{path}.schedulingPolicy",
                                         "exactly one of basic and gang may be set",
                                         type="Forbidden"))
            min_count = field_at(policy, "gang", "minCount")
            if min_count is not None and (int_or_none(min_count) is None or min_count < 1):
                errors.append(FieldError(f"{path}.schedulingPolicy.gang.minCount",
                                         "must be greater than or equal to 1", min_count))
        claims = settings.get("resourceClaims")
        if isinstance(claims, list) and len(claims) > 4:
            errors.append(FieldError(f"{path}.resourceClaims", "must have at most 4 items",
                                     len(claims), "Invalid"))
    return errors


def validate_scheduling_update(spec: dict[str, Any], old_spec: dict[str, Any]) -> list[FieldError]:
    new_s, old_s = spec.get("scheduling"), old_spec.get("scheduling")
    if (new_s is None) != (old_s is None):
        verb = "added" if old_s is None else "removed"
        return [FieldError("spec.scheduling",
                           f"gang scheduling cannot be {verb} after creation", type="Forbidden")]
    if new_s is None:
        return []
    errors = []
    new_level, old_level = scheduling_level(new_s), scheduling_level(old_s)
    if new_level != old_level:
        errors.append(FieldError("spec.scheduling",
                                 f"the scheduling level cannot change after creation "
                                 f"(was {old_level}, now {new_level})", type="Forbidden"))
    else:
        errors += _immutable_gang_settings("spec.scheduling", new_s, old_s)
        for sub in ("replica", "replica.leader", "replica.worker"):
            keys = sub.split(".")
            errors += _immutable_gang_settings(f"spec.scheduling.{sub}", field_at(new_s, *keys),
                                               field_at(old_s, *keys))
    errors += immutable("spec.leaderWorkerTemplate.leaderTemplate.spec.priorityClassName",
                        effective_priority_class(old_spec), effective_priority_class(spec))
    return errors


def _without_min_count(policy: Any) -> Any:
    """A scheduling policy minus ``gang.minCount``, the one field allowed to change."""
    if not isinstance(policy, dict) or not isinstance(policy.get("gang"), dict):
        return policy
    gang = {k: v for k, v in policy["gang"].items() if k != "minCount"}
    return {**policy, "gang": gang}


def _immutable_gang_settings(path: str, new: Any, old: Any) -> list[FieldError]:
    if not isinstance(new, dict) or not isinstance(old, dict):
        return []
    errors = []
    for key in _GANG_FIELDS:
        old_value, new_value = old.get(key), new.get(key)
        if key == "schedulingPolicy":
            old_value, new_value = _without_min_count(old_value), _without_min_count(new_value)
        errors += immutable(f"{path}.{key}", old_value, new_value)
    return errors


