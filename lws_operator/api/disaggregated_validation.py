"""Validation of DisaggregatedSets, as the ``vdisaggregatedset.kb.io`` webhook applies it on
CREATE and UPDATE (upstream's DisaggregatedSet webhook, disaggregatedset_webhook.go).

The CRD schema and its CEL rule (``hack/gen_crd.py``) come first: types, enums, bounds, defaults,
unique role names, the all-or-nothing replicas rule. What they cannot say is checked here, in
upstream's order and with upstream's messages and field paths, since users and scripts match on
them:

1. per role, in spec order: the rollout strategy type, then (when
   ``rollingUpdateConfiguration`` is present) a non-zero ``partition`` and, for a role asking
   for replicas, the ``maxUnavailable``/``maxSurge`` values and their 0/0 combination, then for
   an External role the length of its scaler's name (and a warning when it sets replicas);
2. ``slices`` above 1 with an External role;
3. per role, the length of the Service names the controller would generate;
4. the placement policy: a topology key for a type other than None, and no LeaderWorkerSet
   exclusive-placement annotation on any role next to it;
5. ours: the revision history limit (``lws-operator.dev/revision-history-limit``) a whole
   number from 0, as on a LeaderWorkerSet (``logic.disaggregated.history``).

Errors render as apimachinery renders them (:class:`FieldError`) and are denied as one aggregate
(:func:`aggregate_message`), the way the LeaderWorkerSet webhook denies. UPDATE checks the new
object only: nothing of a DisaggregatedSet is immutable. The functions read through
:class:`DisaggregatedSetView`, take the object as the webhook gets it (after schema defaulting),
and never crash on partial ones.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .constants import EXCLUSIVE_TOPOLOGY_ANNOTATION, SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION
from .disaggregated import (
    PLACEMENT_NONE,
    REVISION_LENGTH,
    SERVICE_SUFFIX,
    DisaggregatedSetView,
    RoleView,
)
from .field_errors import FieldError, aggregate_message, scaled_value, validate_int_or_percent
from .validation import validate_history_limit, validate_paused

__all__ = ["FieldError", "Result", "aggregate_message", "validate"]

# Kubernetes' limits on the names the controller derives from the set's and the roles' names.
DNS1035_LABEL_LIMIT = 63
SCALER_NAME_LIMIT = 253  # an object name (DNS-1123 subdomain)
PLACEMENT_CONFLICT_KEYS = (EXCLUSIVE_TOPOLOGY_ANNOTATION, SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION)
_ROLLING_UPDATE = "RollingUpdate"


@dataclass(frozen=True)
class Result:
    """What the webhook answers: errors deny the object; warnings ride along either way."""

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        return aggregate_message(self.errors)


def validate(obj: Mapping[str, Any]) -> Result:
    """Every check, in upstream's evaluation order."""
    ds = DisaggregatedSetView.of(obj)
    result = Result()
    for i, role in enumerate(ds.roles):
        path = f"spec.roles[{i}]"
        result.errors.extend(_rollout(role, f"{path}.spec.rolloutStrategy"))
        if role.external:
            result.errors.extend(_scaler_name(ds, role, f"{path}.name"))
            if (role.replicas_field or 0) > 1:
                result.warnings.append(
                    f'role "{role.name}" sets scaling.mode: External and spec.replicas: '
                    f"{role.replicas_field} \u2014 spec.replicas is ignored; drive replicas via "
                    f'DisaggregatedSetRoleScaler "{ds.name}-{role.name}" instead')
    if any(r.external for r in ds.roles) and (ds.slices_field or 0) > 1:
        result.errors.append(FieldError(
            "spec.slices", "spec.slices > 1 is not supported while any role has scaling.mode: "
            "External (alpha restriction)", type="Forbidden"))
    for i, role in enumerate(ds.roles):
        result.errors.extend(_service_name(ds, role, f"spec.roles[{i}].name"))
    result.errors.extend(_placement(ds))
    result.errors.extend(validate_history_limit(ds.raw))
    result.errors.extend(validate_paused(ds.raw))
    return result


# ------------------------------------------------------------------------------- per role


def _rollout(role: RoleView, path: str) -> list[FieldError]:
    strategy = role.spec.get("rolloutStrategy")
    strategy = strategy if isinstance(strategy, Mapping) else {}
    errors: list[FieldError] = []
    kind = strategy.get("type")
    if kind not in (None, "", _ROLLING_UPDATE):
        errors.append(FieldError(f"{path}.type", f'supported values: "{_ROLLING_UPDATE}", ""',
                                 kind, "NotSupported"))
    config = role.rolling_update_configuration
    if config is None:
        return errors
    path = f"{path}.rollingUpdateConfiguration"
    partition = config.get("partition")
    if partition is not None and partition != 0:
        errors.append(FieldError(
            f"{path}.partition", "partition is not supported by DisaggregatedSet; rolling "
            "updates are managed across roles by the DisaggregatedSet controller",
            type="Forbidden"))
    replicas = role.replicas_field
    if replicas is None or replicas <= 0:
        return errors  # nothing to roll: a paused (or unset) role cannot be stuck at 0/0
    # An absent value is the Go zero value, 0 (the schema defaults both when the block exists).
    unavailable = config.get("maxUnavailable", 0)
    surge = config.get("maxSurge", 0)
    value_errors = [*validate_int_or_percent(f"{path}.maxUnavailable", unavailable),
                    *validate_int_or_percent(f"{path}.maxSurge", surge)]
    errors.extend(value_errors)
    if value_errors:
        return errors
    if (scaled_value(unavailable, replicas, round_up=False) == 0
            and scaled_value(surge, replicas, round_up=True) == 0):
        errors.append(FieldError(f"{path}.maxUnavailable",
                                 "must not be 0 when `maxSurge` is 0", unavailable))
    return errors


def _scaler_name(ds: DisaggregatedSetView, role: RoleView, path: str) -> list[FieldError]:
    name = f"{ds.name}-{role.name}"
    if len(name) <= SCALER_NAME_LIMIT:
        return []
    return [FieldError(path, f'would produce scaler name "{name}" exceeding '
                             f"{SCALER_NAME_LIMIT} characters", role.name)]


def _service_name(ds: DisaggregatedSetView, role: RoleView, path: str) -> list[FieldError]:
    """The longest Service name of the role, ``<ds>-<slice>-<rev>-<role>-prv`` for the highest
    slice index, must be a DNS-1035 label (the LeaderWorkerSet name inside it is shorter)."""
    fixed = 3 + len(str(ds.slices - 1)) + REVISION_LENGTH + len(SERVICE_SUFFIX)
    length = len(ds.name) + fixed + len(role.name)
    if length <= DNS1035_LABEL_LIMIT:
        return []
    return [FieldError(
        path, f"the generated service name ({length} chars) would exceed the DNS-1035 limit of "
              f"{DNS1035_LABEL_LIMIT} characters; reduce the DisaggregatedSet name and/or role "
              f"name (combined limit: {DNS1035_LABEL_LIMIT - fixed} characters)", role.name)]


# ------------------------------------------------------------------------------ placement


def _placement(ds: DisaggregatedSetView) -> list[FieldError]:
    if not ds.has_placement_policy:
        return []
    policy = ds.placement
    if policy.type in ("", PLACEMENT_NONE):
        return []
    errors: list[FieldError] = []
    if not policy.topology:
        errors.append(FieldError("spec.placementPolicy.topology",
                                 "topology is required when type is not None", type="Required"))
    for i, role in enumerate(ds.roles):
        key = _conflicting_annotation(role)
        if key is not None:
            errors.append(FieldError(
                f"spec.roles[{i}]", f'the "{key}" annotation must not be combined with a '
                                    f"non-None spec.placementPolicy.type ({policy.type})",
                type="Forbidden"))
    return errors


def _conflicting_annotation(role: RoleView) -> str | None:
    """The first LeaderWorkerSet exclusive-placement annotation on the role (its metadata, then
    its leader template, then its worker template): those place each group on its own, which
    fights the set's own slice placement. Labels of the same keys do not count."""
    templates = [role.leader_worker_template.get(t) for t in ("leaderTemplate", "workerTemplate")]
    sources = [role.annotations, *(_annotations(t) for t in templates)]
    for key in PLACEMENT_CONFLICT_KEYS:
        if any(key in annotations for annotations in sources):
            return key
    return None


def _annotations(template: Any) -> Mapping[str, Any]:
    if not isinstance(template, Mapping):
        return {}
    meta = template.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    return annotations if isinstance(annotations, Mapping) else {}
