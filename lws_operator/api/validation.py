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

import re
from collections.abc import Mapping
from typing import Any

from . import disruption
from .constants import (
    HASH_MODE_NAME_LIMIT,
    HASH_MODE_NAME_LIMIT_SIZE_ONE,
    MAX_DISRUPTED_GROUPS_ANNOTATION,
    MAX_INT32,
    MAX_REPLICAS,
    PAUSED_ANNOTATION,
    PROGRESS_DEADLINE_ANNOTATION,
    REVISION_HISTORY_LIMIT_ANNOTATION,
    ROLLBACK_ON_DEADLINE_ANNOTATION,
    STATEFULSET_NAME_LIMIT,
    SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION,
)
from .defaults import apply_defaults
from .field_errors import (
    IMMUTABLE,
    LWT,
    PERCENT_MESSAGE,
    RUC,
    SPEC,
    SUBGROUP_SIZE,
    ErrorType,
    FieldError,
    aggregate_message,
    field_at,
    immutable,
    int_or_none,
    scaled_value,
    validate_int_or_percent,
)
from .scheduling_validation import (
    effective_priority_class,
    scheduling_level,
    validate_scheduling,
    validate_scheduling_update,
)

# Every name this module had before the error type and the gang scheduling rules moved out, so
# its importers keep importing them from here.
__all__ = [
    "DNS1035_MESSAGE", "IMMUTABLE", "LWT", "PERCENT_MESSAGE", "RUC", "SPEC", "SUBGROUP_SIZE",
    "ErrorType", "FieldError", "aggregate_message", "effective_priority_class", "scaled_value",
    "scheduling_level", "validate", "validate_create", "validate_int_or_percent",
    "validate_update", "warnings",
]

_DNS1035 = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
DNS1035_MESSAGE = (
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "
    "alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or "
    "'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
)

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




def _validate_metadata(lws: dict[str, Any]) -> list[FieldError]:
    name = field_at(lws, "metadata", "name") or ""
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
        value = field_at({"spec": spec}, *path.split("."))
        if value is not None and value not in allowed:
            quoted = ", ".join(f'"{a}"' for a in allowed)
            errors.append(FieldError(path, f"supported values: {quoted}", value, "NotSupported"))
    return errors


def _validate_counts(spec: dict[str, Any]) -> list[FieldError]:
    errors = []
    replicas = int_or_none(spec.get("replicas"))
    size = int_or_none(field_at(spec, "leaderWorkerTemplate", "size"))
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


def _validate_rollout(spec: dict[str, Any]) -> list[FieldError]:
    """Upstream's rules on the rollout budgets (leaderworkerset_webhook.go), in its order: the
    format of each budget, the partition, then
    the scaled budgets. A budget whose format is already reported is not scaled: upstream goes on
    to report ``invalid value`` for it, and may count it as 0 (see the module docstring)."""
    config = field_at(spec, "rolloutStrategy", "rollingUpdateConfiguration")
    if not isinstance(config, dict):
        return []
    unavailable, surge = config.get("maxUnavailable"), config.get("maxSurge")
    unavailable_errors = validate_int_or_percent(f"{RUC}.maxUnavailable", unavailable)
    surge_errors = validate_int_or_percent(f"{RUC}.maxSurge", surge)
    errors = unavailable_errors + surge_errors
    partition = int_or_none(config.get("partition"))
    if partition is not None and partition < 0:
        errors.append(FieldError(f"{RUC}.partition", "must be greater than or equal to 0",
                                 partition))
    if unavailable_errors or surge_errors:
        return errors
    replicas = int_or_none(spec.get("replicas"))
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
    policy = field_at(spec, "leaderWorkerTemplate", "subGroupPolicy")
    if not isinstance(policy, dict):
        annotations = field_at(lws, "metadata", "annotations") or {}
        if SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION in annotations:
            return [FieldError(
                f"metadata.annotations.{SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION}",
                "cannot have subgroup-exclusive-topology without subGroupSize set",
                annotations[SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION])]
        return []
    raw = policy.get("subGroupSize")
    sgs = int_or_none(raw)
    if sgs is None or sgs < 1:
        return [FieldError(SUBGROUP_SIZE, "subGroupSize must be equal or greater than 1", raw)]
    size = int_or_none(field_at(spec, "leaderWorkerTemplate", "size"))
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
    if field_at(spec, "leaderWorkerTemplate", "volumeClaimTemplates"):
        errors.append(FieldError(f"{LWT}.volumeClaimTemplates",
                                 "volumeClaimTemplates are not supported with groupIdentity Hash",
                                 type="Forbidden"))
    partition = int_or_none(field_at(spec, "rolloutStrategy", "rollingUpdateConfiguration",
                                     "partition"))
    if partition:
        errors.append(FieldError(f"{RUC}.partition",
                                 "partition is not supported with groupIdentity Hash",
                                 partition, "Forbidden"))
    name = field_at(lws, "metadata", "name") or ""
    size = int_or_none(field_at(spec, "leaderWorkerTemplate", "size"))
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
        if int_or_none(budget) is None or budget < 0:
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
            if value is not None and (int_or_none(value) is None or value < 0):
                errors.append(FieldError(f"{LWT}.restartBackoff.{key}",
                                         "must be greater than or equal to 0", value))
        base, cap = int_or_none(backoff.get("baseSeconds")), int_or_none(backoff.get("capSeconds"))
        if base is not None and cap is not None and 0 <= cap < base:
            errors.append(FieldError(f"{LWT}.restartBackoff.capSeconds",
                                     f"must be greater than or equal to baseSeconds ({base})",
                                     cap))
        if lwt.get("restartPolicy") in ("None", "Default"):
            errors.append(FieldError(f"{LWT}.restartBackoff",
                                     "restartBackoff is not supported with restartPolicy None",
                                     type="Forbidden"))
    return errors


def _validate_progress_deadline(lws: dict[str, Any]) -> list[FieldError]:
    """Our progress deadline and rollback opt-ins (``logic.rollout.deadline``): a whole number of
    seconds from 1, ``"true"`` or ``"false"``, the rollback only with a deadline, and neither
    with Hash groups, whose rollout (admission as groups go) the deadline does not hold; and
    the pause (``logic.rollout.pause``) ``"true"`` or ``"false"``, so a typo ("yes", "True")
    is refused rather than silently not pausing."""
    annotations = field_at(lws, "metadata", "annotations") or {}
    deadline = annotations.get(PROGRESS_DEADLINE_ANNOTATION)
    rollback = annotations.get(ROLLBACK_ON_DEADLINE_ANNOTATION)
    errors = validate_paused(lws)
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
    errors += validate_scheduling(lws)
    errors += _validate_progress_deadline(lws)
    errors += _validate_disruption_budget(lws)
    errors += validate_history_limit(lws)
    return errors


def validate_paused(obj: Mapping[str, Any]) -> list[FieldError]:
    """The pause (``logic.rollout.pause``) of a LeaderWorkerSet or a DisaggregatedSet:
    ``"true"`` or ``"false"``, so a typo ("yes", "True") is refused rather than silently not
    pausing."""
    annotations = field_at(dict(obj), "metadata", "annotations") or {}
    paused = annotations.get(PAUSED_ANNOTATION) if isinstance(annotations, dict) else None
    if paused is None or paused in ("true", "false"):
        return []
    return [FieldError(f"metadata.annotations.{PAUSED_ANNOTATION}", 'must be "true" or "false"',
                       paused)]


def validate_history_limit(obj: Mapping[str, Any]) -> list[FieldError]:
    """The revision history limit (ours, ``logic.identity.history``) of a LeaderWorkerSet or a
    DisaggregatedSet: a whole number from 0, as a Deployment's ``revisionHistoryLimit``."""
    annotations = field_at(dict(obj), "metadata", "annotations") or {}
    value = annotations.get(REVISION_HISTORY_LIMIT_ANNOTATION) \
        if isinstance(annotations, dict) else None
    if value is None or (isinstance(value, str) and value.isdigit() and int(value) <= MAX_INT32):
        return []
    return [FieldError(f"metadata.annotations.{REVISION_HISTORY_LIMIT_ANNOTATION}",
                       "must be a whole number from 0", value)]


def _validate_disruption_budget(lws: dict[str, Any]) -> list[FieldError]:
    """The group disruption budget's annotation (ours, ``api.disruption``), when present."""
    annotations = field_at(lws, "metadata", "annotations") or {}
    if not isinstance(annotations, dict) or MAX_DISRUPTED_GROUPS_ANNOTATION not in annotations:
        return []
    value = annotations[MAX_DISRUPTED_GROUPS_ANNOTATION]
    try:
        disruption.parse(value)
    except disruption.BadBudget as exc:
        return [FieldError(f"metadata.annotations.{MAX_DISRUPTED_GROUPS_ANNOTATION}", str(exc),
                           value)]
    return []


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
    policy = field_at(spec, "leaderWorkerTemplate", "subGroupPolicy")
    old_policy = field_at(old_spec, "leaderWorkerTemplate", "subGroupPolicy")
    if isinstance(policy, dict) and isinstance(old_policy, dict):
        errors += immutable(SUBGROUP_SIZE, old_policy.get("subGroupSize"),
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
                                 field_at(old_spec, "networkConfig", "subdomainPolicy")))
    for key in ("groupIdentity", "podTerminationPolicy"):
        errors += immutable(f"spec.{key}", old_spec.get(key), spec.get(key))
    errors += validate_scheduling_update(spec, old_spec)
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
    name = str(field_at(lws, "metadata", "name") or "")
    replicas = int_or_none(spec.get("replicas"))
    size = int_or_none(field_at(spec, "leaderWorkerTemplate", "size"))
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
