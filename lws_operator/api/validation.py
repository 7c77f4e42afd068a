"""Validation of LeaderWorkerSets, as the validating webhook applies it on CREATE and UPDATE.

Messages and field paths are interface facts: users grep for them, scripts and tests written
against upstream match them (upstream's ValidateCreate and ValidateUpdate,
leaderworkerset_webhook.go), so
they are reproduced exactly, and so is the way
they reach the client. Upstream's webhook returns ``field.ErrorList.ToAggregate()``, which
controller-runtime turns into ``admission.Denied(err.Error())`` (code 403, reason ``Forbidden``)
and the API server prefixes with ``admission webhook "vleaderworkerset.kb.io" denied the
request: ``. :func:`aggregate_message` is that ``Error()`` text: one error as itself, several
(identical texts once) as ``[first, second]``; each error is rendered by :class:`FieldError` as
apimachinery renders a ``field.Error`` (numbers bare, strings quoted, null as ``null``).

Deliberate differences, each better than upstream on purpose:

* Subgroup errors are reported at ``spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize``
  (lowercase, the field as the LWS docs and the CRD spell it) instead of upstream's
  ``SubGroupPolicy``.
* Upstream's webhook panics on a null ``subGroupSize`` (an empty ``subGroupPolicy``) and on
  ``subGroupSize: 0`` (a division by zero), so the client gets no field error at all; both are
  rejected here with rule 15's ``subGroupSize must be equal or greater than 1``.
* A ``maxUnavailable``/``maxSurge`` that is not an integer or percentage gets one error, the
  percent-format one; upstream adds a second, ``invalid value``, for the same value (and a third,
  ``must not be 0 when `maxSurge` is 0``, as it then takes the value for 0).
* ``persistentVolumeClaimRetentionPolicy`` values are checked against the StatefulSet API's
  (``Retain``, ``Delete``): upstream accepts any string and then fails every StatefulSet write.
* The documented rules that upstream's webhook lacks (group identity, replacement policy, restart
  budget and backoff, termination policy, native gang scheduling, Hash name limits) are enforced
  with messages of our own, in the same format, naming the field.

Immutability on update compares the stored and the new object with defaults applied to both
(:func:`validate_update`): a field that is absent means its default. Objects written by upstream,
or by an older release of ours, lack the fields added since (``groupIdentity``,
``podTerminationPolicy`` ...), while the defaulting webhook adds them to every update; comparing
absent with the default would refuse every update of those objects.

The functions take defaulted objects (the webhook defaults first), but never crash on partial
ones.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from . import disruption
from .constants import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    HASH_MODE_NAME_LIMIT,
    HASH_MODE_NAME_LIMIT_SIZE_ONE,
    MAX_DISRUPTED_GROUPS_ANNOTATION,
    MAX_INT32,
    MAX_REPLICAS,
    PROGRESS_DEADLINE_ANNOTATION,
    ROLLBACK_ON_DEADLINE_ANNOTATION,
    STATEFULSET_NAME_LIMIT,
    SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION,
)
from .defaults import apply_defaults

ErrorType = Literal["Invalid", "Required", "Forbidden", "NotSupported"]

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_PERCENT = re.compile(r"^[0-9]+%$")
DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)
PERCENT_MESSAGE = (
    "a valid percent string must be a numeric string followed by an ending '%' (e.g. '1%',  or "
    "'93%', regex used for validation is '[0-9]+%')"
)
IMMUTABLE = "field is immutable"

SPEC = "spec"
LWT = "spec.leaderWorkerTemplate"
RUC = "spec.rolloutStrategy.rollingUpdateConfiguration"
SUBGROUP_SIZE = "spec.leaderWorkerTemplate.subGroupPolicy.subGroupSize"
_ENUMS: dict[str, tuple[str, ...]] = {
    "spec.groupIdentity": ("Ordinal", "Hash"),
    "spec.groupReplacementPolicy": ("PostTermination", "Immediate"),
    "spec.podTerminationPolicy": ("Sequential", "Parallel"),
    "spec.startupPolicy": ("LeaderCreated", "LeaderReady"),
    "spec.networkConfig.subdomainPolicy": ("Shared", "UniquePerReplica"),
    "spec.rolloutStrategy.type": ("RollingUpdate",),
    "spec.leaderWorkerTemplate.restartPolicy": (
        "RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None", "Default"),
    "spec.leaderWorkerTemplate.subGroupPolicy.subGroupPolicyType": (
        "LeaderWorker", "LeaderExcluded"),
    # Free strings in the CRD (upstream's StatefulSet type has no enum marker), but copied into
    # the StatefulSets, whose API accepts only these: an unknown value was accepted here and
    # then failed every StatefulSet write, the set never starting (found by the bad-input
    # fuzzing).
    "spec.leaderWorkerTemplate.persistentVolumeClaimRetentionPolicy.whenDeleted": (
        "Retain", "Delete"),
    "spec.leaderWorkerTemplate.persistentVolumeClaimRetentionPolicy.whenScaled": (
        "Retain", "Delete"),
}
_GANG_FIELDS = ("schedulingPolicy", "schedulingConstraints", "disruptionMode", "resourceClaims")


@dataclass(frozen=True)
class FieldError:
    """One field error, rendered like apimachinery's ``field.Error``."""

    path: str
    message: str
    value: Any = None
    type: ErrorType = "Invalid"

    def __str__(self) -> str:
        if self.type == "Invalid":
            return f"{self.path}: Invalid value: {_render(self.value)}: {self.message}"
        if self.type == "Required":
            return f"{self.path}: Required value" + (f": {self.message}" if self.message else "")
        if self.type == "NotSupported":
            return f"{self.path}: Unsupported value: {_render(self.value)}: {self.message}"
        return f"{self.path}: Forbidden: {self.message}"


def _render(value: Any) -> str:
    """A value the way apimachinery's ``field.Error`` prints it: numbers and booleans bare,
    strings quoted, anything else (a pointer included) as its JSON, so a nil one is ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value)
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def aggregate_message(errors: list[FieldError]) -> str:
    """``field.ErrorList.ToAggregate().Error()``: the message upstream's webhook denies with.

    Errors with the same text are kept once; one error is its own text, several are joined
    with ``", "`` inside brackets."""
    rendered = list(dict.fromkeys(str(e) for e in errors))
    return "".join(rendered) if len(rendered) <= 1 else "[" + ", ".join(rendered) + "]"


# ------------------------------------------------------------------------------ small readers


def _get(obj: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(obj, dict):
            return None
        obj = obj.get(key)
    return obj


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def scaled_value(value: Any, total: int, round_up: bool) -> int | None:
    """An int-or-percent scaled against ``total`` (None when it is neither), like apimachinery's
    ``GetScaledValueFromIntOrPercent``: percentages round up or down as asked."""
    if _int(value) is not None:
        return int(value)
    if isinstance(value, str) and _PERCENT.match(value):
        exact = int(value[:-1]) * total / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return None


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
    value = _get(template, "spec", "priorityClassName")
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


# ------------------------------------------------------------------------------------- rules


def _validate_metadata(lws: dict[str, Any]) -> list[FieldError]:
    name = _get(lws, "metadata", "name") or ""
    if not name:  # generateName: the API server validates the generated name itself
        return []
    errors = []
    if len(name) > 63:
        errors.append(FieldError("metadata.name", "must be no more than 63 characters", name))
    if not _DNS1035.match(name):
        errors.append(FieldError("metadata.name", DNS1035_MESSAGE, name))
    return errors


def _validate_enums(spec: dict[str, Any]) -> list[FieldError]:
    """The CRD checks these too; repeated so a hand-installed CRD cannot let a typo through."""
    errors = []
    for path, allowed in _ENUMS.items():
        value = _get({"spec": spec}, *path.split("."))
        if value is not None and value not in allowed:
            quoted = ", ".join(f'"{a}"' for a in allowed)
            errors.append(FieldError(path, f"supported values: {quoted}", value, "NotSupported"))
    return errors


def _validate_counts(spec: dict[str, Any]) -> list[FieldError]:
    errors = []
    replicas = _int(spec.get("replicas"))
    size = _int(_get(spec, "leaderWorkerTemplate", "size"))
    if replicas is not None and replicas < 0:
        errors.append(FieldError("spec.replicas", "replicas must be equal or greater than 0",
                                 replicas))
    if replicas is not None and replicas > MAX_REPLICAS:
        errors.append(FieldError("spec.replicas",
                                 f"replicas must be equal or less than {MAX_REPLICAS}", replicas))
    if size is not None and size < 1:
        errors.append(FieldError(f"{LWT}.size", "size must be equal or greater than 1", size))
    if replicas is not None and size is not None and replicas * size > MAX_INT32:
        errors.append(FieldError(
            "spec.replicas",
            "the product of replicas and worker replicas must not exceed 2147483647", replicas))
    return errors


def validate_int_or_percent(path: str, value: Any) -> list[FieldError]:
    """apimachinery's IntOrPercent checks (a non-negative int, or a percent string of at most
    100%); None is not checked. The DisaggregatedSet webhook applies them to its roles too."""
    if value is None:
        return []
    if _int(value) is not None:
        if value < 0:
            return [FieldError(path, "must be greater than or equal to 0", value)]
        return []
    if not isinstance(value, str):
        return [FieldError(path, "invalid value", value)]
    if not _PERCENT.match(value):
        return [FieldError(path, PERCENT_MESSAGE, value)]
    if int(value[:-1]) > 100:
        return [FieldError(path, "must not be greater than 100%", value)]
    return []


def _validate_rollout(spec: dict[str, Any]) -> list[FieldError]:
    """Upstream's rules on the rollout budgets (leaderworkerset_webhook.go), in its order: the
    format of each budget, the partition, then
    the scaled budgets. A budget whose format is already reported is not scaled: upstream goes on
    to report ``invalid value`` for it, and may count it as 0 (see the module docstring)."""
    config = _get(spec, "rolloutStrategy", "rollingUpdateConfiguration")
    if not isinstance(config, dict):
        return []
    unavailable, surge = config.get("maxUnavailable"), config.get("maxSurge")
    unavailable_errors = validate_int_or_percent(f"{RUC}.maxUnavailable", unavailable)
    surge_errors = validate_int_or_percent(f"{RUC}.maxSurge", surge)
    errors = unavailable_errors + surge_errors
    partition = _int(config.get("partition"))
    if partition is not None and partition < 0:
        errors.append(FieldError(f"{RUC}.partition", "must be greater than or equal to 0",
                                 partition))
    if unavailable_errors or surge_errors:
        return errors
    replicas = _int(spec.get("replicas"))
    replicas = 1 if replicas is None else replicas
    scaled_unavailable = scaled_value(1 if unavailable is None else unavailable, replicas, False)
    scaled_surge = scaled_value(0 if surge is None else surge, replicas, True)
    if scaled_unavailable is None:
        errors.append(FieldError(f"{RUC}.maxUnavailable", "invalid value", unavailable))
    if scaled_surge is None:
        errors.append(FieldError(f"{RUC}.maxSurge", "invalid value", surge))
    if scaled_unavailable == 0 and scaled_surge == 0 and replicas != 0:
        errors.append(FieldError(f"{RUC}.maxUnavailable", "must not be 0 when `maxSurge` is 0",
                                 unavailable))
    return errors


def _validate_subgroups(lws: dict[str, Any]) -> list[FieldError]:
    spec = lws.get("spec") or {}
    policy = _get(spec, "leaderWorkerTemplate", "subGroupPolicy")
    if not isinstance(policy, dict):
        annotations = _get(lws, "metadata", "annotations") or {}
        if SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION in annotations:
            return [FieldError(
                f"metadata.annotations.{SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION}",
                "cannot have subgroup-exclusive-topology without subGroupSize set",
                annotations[SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION])]
        return []
    raw = policy.get("subGroupSize")
    sgs = _int(raw)
    if sgs is None or sgs < 1:
        return [FieldError(SUBGROUP_SIZE, "subGroupSize must be equal or greater than 1", raw)]
    size = _int(_get(spec, "leaderWorkerTemplate", "size"))
    if size is None or size < 1:
        return []  # reported by the size rule
    errors = []
    if size % sgs != 0 and (size - 1) % sgs != 0:
        errors.append(FieldError(SUBGROUP_SIZE, "size or size - 1 must be divisible by "
                                 "subGroupSize", sgs))
    if size < sgs:
        errors.append(FieldError(SUBGROUP_SIZE, "subGroupSize cannot be larger than size", sgs))
    if policy.get("subGroupPolicyType") == "LeaderExcluded" and (size - 1) % sgs != 0:
        errors.append(FieldError(SUBGROUP_SIZE, "size-1 must be divisible by subGroupSize when "
                                 "using LeaderExcluded", sgs))
    return errors


def _validate_group_identity(lws: dict[str, Any]) -> list[FieldError]:
    spec = lws.get("spec") or {}
    errors = []
    hashed = spec.get("groupIdentity") == "Hash"
    if spec.get("groupReplacementPolicy") == "Immediate" and not hashed:
        errors.append(FieldError("spec.groupReplacementPolicy",
                                 "Immediate is only supported with groupIdentity Hash",
                                 "Immediate"))
    if not hashed:
        return errors
    if _get(spec, "leaderWorkerTemplate", "volumeClaimTemplates"):
        errors.append(FieldError(f"{LWT}.volumeClaimTemplates",
                                 "volumeClaimTemplates are not supported with groupIdentity Hash",
                                 type="Forbidden"))
    partition = _int(_get(spec, "rolloutStrategy", "rollingUpdateConfiguration", "partition"))
    if partition:
        errors.append(FieldError(f"{RUC}.partition",
                                 "partition is not supported with groupIdentity Hash",
                                 partition, "Forbidden"))
    name = _get(lws, "metadata", "name") or ""
    size = _int(_get(spec, "leaderWorkerTemplate", "size"))
    limit = HASH_MODE_NAME_LIMIT_SIZE_ONE if size == 1 else HASH_MODE_NAME_LIMIT
    if len(name) > limit:
        errors.append(FieldError(
            "metadata.name",
            f"must be no more than {limit} characters with groupIdentity Hash"
            + (" and size 1" if size == 1 else ""), name))
    return errors


def _validate_restarts(spec: dict[str, Any]) -> list[FieldError]:
    lwt = spec.get("leaderWorkerTemplate") or {}
    errors = []
    budget = lwt.get("maxGroupRestarts")
    if budget is not None:
        if _int(budget) is None or budget < 0:
            errors.append(FieldError(f"{LWT}.maxGroupRestarts",
                                     "must be greater than or equal to 0", budget))
        if lwt.get("restartPolicy") in ("None", "Default"):
            errors.append(FieldError(f"{LWT}.maxGroupRestarts",
                                     "maxGroupRestarts is not supported with restartPolicy None",
                                     type="Forbidden"))
    backoff = lwt.get("restartBackoff")
    if isinstance(backoff, dict):
        for key in ("baseSeconds", "capSeconds"):
            value = backoff.get(key)
            if value is not None and (_int(value) is None or value < 0):
                errors.append(FieldError(f"{LWT}.restartBackoff.{key}",
                                         "must be greater than or equal to 0", value))
        base, cap = _int(backoff.get("baseSeconds")), _int(backoff.get("capSeconds"))
        if base is not None and cap is not None and 0 <= cap < base:
            errors.append(FieldError(f"{LWT}.restartBackoff.capSeconds",
                                     f"must be greater than or equal to baseSeconds ({base})",
                                     cap))
        if lwt.get("restartPolicy") in ("None", "Default"):
            errors.append(FieldError(f"{LWT}.restartBackoff",
                                     "restartBackoff is not supported with restartPolicy None",
                                     type="Forbidden"))
    return errors


def _validate_scheduling(lws: dict[str, Any]) -> list[FieldError]:
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
    annotations = _get(lws, "metadata", "annotations") or {}
    if EXCLUSIVE_TOPOLOGY_ANNOTATION in annotations:
        errors.append(FieldError(f"metadata.annotations.{EXCLUSIVE_TOPOLOGY_ANNOTATION}",
                                 "exclusive-topology cannot be combined with gang scheduling "
                                 "(spec.scheduling)", type="Forbidden"))
    for path, template in _templates(spec):
        if _get(template, "spec", "schedulingGroup") is not None:
            errors.append(FieldError(f"{path}.spec.schedulingGroup",
                                     "must not be set: LWS derives the PodGroup of each pod "
                                     "when gang scheduling (spec.scheduling) is enabled",
                                     type="Forbidden"))
    errors += _validate_gang_settings(spec, scheduling)
    lwt = spec.get("leaderWorkerTemplate") or {}
    if isinstance(lwt.get("leaderTemplate"), dict):
        leader = _get(lwt, "leaderTemplate", "spec", "priorityClassName") or None
        worker = _get(lwt, "workerTemplate", "spec", "priorityClassName") or None
        if leader != worker:
            errors.append(FieldError(f"{LWT}.leaderTemplate.spec.priorityClassName",
                                     "leader and worker templates must use the same "
                                     "priorityClassName with gang scheduling", leader))
    return errors


def _derived_min_counts(spec: dict[str, Any], level: str | None) -> dict[str, int]:
    """``gang.minCount`` as LWS derives it, per settings path (what a user value must equal)."""
    size = _int(_get(spec, "leaderWorkerTemplate", "size")) or 1
    replicas = _int(spec.get("replicas"))
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
        settings = _get({"spec": {"scheduling": scheduling}}, *path.split("."))
        if not isinstance(settings, dict):
            continue
        policy = settings.get("schedulingPolicy")
        if isinstance(policy, dict):
            if policy.get("basic") is not None and policy.get("gang") is not None:
                errors.append(FieldError(f"{path}.schedulingPolicy",
                                         "exactly one of basic and gang may be set",
                                         type="Forbidden"))
            min_count = _get(policy, "gang", "minCount")
            if min_count is not None and (_int(min_count) is None or min_count < 1):
                errors.append(FieldError(f"{path}.schedulingPolicy.gang.minCount",
                                         "must be greater than or equal to 1", min_count))
        claims = settings.get("resourceClaims")
        if isinstance(claims, list) and len(claims) > 4:
            errors.append(FieldError(f"{path}.resourceClaims", "must have at most 4 items",
                                     len(claims), "Invalid"))
    return errors


def _validate_progress_deadline(lws: dict[str, Any]) -> list[FieldError]:
    """Our progress deadline and rollback opt-ins (``logic.rollout.deadline``): a whole number of
    seconds from 1, ``"true"`` or ``"false"``, the rollback only with a deadline, and neither
    with Hash groups, whose rollout (admission as groups go) the deadline does not hold."""
    annotations = _get(lws, "metadata", "annotations") or {}
    deadline = annotations.get(PROGRESS_DEADLINE_ANNOTATION)
    rollback = annotations.get(ROLLBACK_ON_DEADLINE_ANNOTATION)
    errors = []
    path = f"metadata.annotations.{PROGRESS_DEADLINE_ANNOTATION}"
    if deadline is not None and not (isinstance(deadline, str) and deadline.isdigit()
                                     and 1 <= int(deadline) <= MAX_INT32):
        errors.append(FieldError(path, "must be a whole number of seconds from 1", deadline))
    rollback_path = f"metadata.annotations.{ROLLBACK_ON_DEADLINE_ANNOTATION}"
    if rollback is not None and rollback not in ("true", "false"):
        errors.append(FieldError(rollback_path, 'must be "true" or "false"', rollback))
    if rollback == "true" and deadline is None:
        errors.append(FieldError(rollback_path, f"requires {PROGRESS_DEADLINE_ANNOTATION}",
                                 rollback))
    if deadline is not None and (lws.get("spec") or {}).get("groupIdentity") == "Hash":
        errors.append(FieldError(path, "is not supported with groupIdentity Hash", deadline,
                                 "Forbidden"))
    return errors


def validate_create(lws: dict[str, Any]) -> list[FieldError]:
    """Every rule that holds for any LeaderWorkerSet (checked on create and on update)."""
    spec = lws.get("spec") or {}
    errors = _validate_metadata(lws)
    errors += _validate_enums(spec)
    errors += _validate_counts(spec)
    errors += _validate_rollout(spec)
    errors += _validate_subgroups(lws)
    errors += _validate_group_identity(lws)
    errors += _validate_restarts(spec)
    errors += _validate_scheduling(lws)
    errors += _validate_progress_deadline(lws)
    errors += _validate_disruption_budget(lws)
    return errors


def _validate_disruption_budget(lws: dict[str, Any]) -> list[FieldError]:
    """The group disruption budget's annotation (ours, ``api.disruption``), when present."""
    annotations = _get(lws, "metadata", "annotations") or {}
    if not isinstance(annotations, dict) or MAX_DISRUPTED_GROUPS_ANNOTATION not in annotations:
        return []
    value = annotations[MAX_DISRUPTED_GROUPS_ANNOTATION]
    try:
        disruption.parse(value)
    except disruption.BadBudget as exc:
        return [FieldError(f"metadata.annotations.{MAX_DISRUPTED_GROUPS_ANNOTATION}", str(exc),
                           value)]
    return []


def _omitempty(value: Any) -> Any:
    """``value`` without the entries that mean "not set": null, ``""`` and ``[]``, at any depth.

    Go drops such zero values when it writes an object (``omitempty``), and apimachinery's
    semantic equality takes an empty list for a missing one, so a stored object may hold either
    form of the same thing. Empty objects are kept: ``gang: {}`` selects a policy."""
    if isinstance(value, dict):
        kept = {k: _omitempty(v) for k, v in value.items()}
        return {k: v for k, v in kept.items() if v not in (None, "", [])}
    if isinstance(value, list):
        return [_omitempty(v) for v in value]
    return value


def _immutable(path: str, old: Any, new: Any) -> list[FieldError]:
    """``ValidateImmutableField``: the new value, reported as ``field is immutable``."""
    if _omitempty({"v": old}) == _omitempty({"v": new}):
        return []
    return [FieldError(path, IMMUTABLE, new)]


def validate_update(new: dict[str, Any], old: dict[str, Any]) -> list[FieldError]:
    """The rules comparing an update with the stored object (upstream's ValidateUpdate,
    leaderworkerset_webhook.go).

    Every comparison is made between the two objects with defaults applied (``apply_defaults``,
    the defaulting webhook's function): a field the stored object lacks means its default, so an
    object written before the field existed (by upstream, or an older release of ours) can be
    updated, while changing the value it has always meant is still refused.

    Schema defaults would not do it. The CRD defaults only upstream's own fields (the API server
    applies them on read too, so a stored object never lacks them); the ones only documented have no
    schema default, on purpose (``hack/gen_crd.py``: one inside ``leaderWorkerTemplate`` would
    change the revision hash of every existing object on read). And while upstream's CRD, or an
    older one of ours, is still installed, nothing defaults them at all."""
    raw_spec = new.get("spec") or {}
    new, old = apply_defaults(new), apply_defaults(old)
    spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
    errors = []
    policy = _get(spec, "leaderWorkerTemplate", "subGroupPolicy")
    old_policy = _get(old_spec, "leaderWorkerTemplate", "subGroupPolicy")
    if isinstance(policy, dict) and isinstance(old_policy, dict):
        errors += _immutable(SUBGROUP_SIZE, old_policy.get("subGroupSize"),
                             policy.get("subGroupSize"))
    elif isinstance(policy, dict):
        errors.append(FieldError(SUBGROUP_SIZE,
                                 "cannot enable subGroupSize after the lws is already created",
                                 policy.get("subGroupSize")))
    elif isinstance(old_policy, dict):
        errors.append(FieldError(SUBGROUP_SIZE, "cannot remove subGroupSize after enabled",
                                 old_policy.get("subGroupSize")))
    # On the object as sent: defaulting fills the field, which is why the rule never fires
    # behind the defaulting webhook (upstream's webhook validation (leaderworkerset_webhook.go)).
    # Upstream reports the stored value.
    network = raw_spec.get("networkConfig")
    if isinstance(network, dict) and network.get("subdomainPolicy") is None:
        errors.append(FieldError("spec.networkConfig.subdomainPolicy",
                                 "cannot set subdomainPolicy as null",
                                 _get(old_spec, "networkConfig", "subdomainPolicy")))
    for key in ("groupIdentity", "podTerminationPolicy"):
        errors += _immutable(f"spec.{key}", old_spec.get(key), spec.get(key))
    errors += _validate_scheduling_update(spec, old_spec)
    return errors


def _validate_scheduling_update(spec: dict[str, Any], old_spec: dict[str, Any]) -> list[FieldError]:
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
            errors += _immutable_gang_settings(f"spec.scheduling.{sub}", _get(new_s, *keys),
                                               _get(old_s, *keys))
    errors += _immutable("spec.leaderWorkerTemplate.leaderTemplate.spec.priorityClassName",
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
        errors += _immutable(f"{path}.{key}", old_value, new_value)
    return errors


def warnings(lws: dict[str, Any]) -> list[str]:
    """What an accepted LeaderWorkerSet will not do, for the admission response's warnings
    (``kubectl`` prints them).

    An Ordinal name may be a DNS-1035 label of up to 63 characters, as upstream allows, yet a
    StatefulSet named over 52 characters never gets a pod (``STATEFULSET_NAME_LIMIT``): the
    leader StatefulSet is ``<name>`` and a group's worker StatefulSet ``<name>-<index>``. Upstream
    accepts such a set and it never runs; rejecting it would refuse manifests upstream takes, so
    the user is told instead, with the longest name that runs at this scale. Hash mode rejects
    long names outright (the documented 43/54 limit)."""
    spec = lws.get("spec") or {}
    if spec.get("groupIdentity") == "Hash":
        return []
    name = str(_get(lws, "metadata", "name") or "")
    replicas, size = _int(spec.get("replicas")), _int(_get(spec, "leaderWorkerTemplate", "size"))
    suffix = f"-{replicas - 1}" if replicas and size is not None and size > 1 else ""
    longest = name + suffix
    if len(longest) <= STATEFULSET_NAME_LIMIT:
        return []
    return [f"metadata.name: StatefulSet {longest!r} would be {len(longest)} characters, over "
            f"the {STATEFULSET_NAME_LIMIT} whose pods the StatefulSet controller can label, so "
            f"its pods would never be created; use a name of at most "
            f"{STATEFULSET_NAME_LIMIT - len(suffix)} characters"]


def validate(new: dict[str, Any], old: dict[str, Any] | None) -> list[FieldError]:
    """All errors of a create (``old`` None) or an update."""
    errors = validate_create(new)
    if old is not None:
        errors += validate_update(new, old)
    return errors
