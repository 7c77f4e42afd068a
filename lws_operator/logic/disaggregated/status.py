"""A DisaggregatedSet's status: per-role counts and the Available/Progressing pair (upstream's
status computation in disaggregatedset_controller.go).

``roleStatuses`` has one entry per role currently in the spec, in spec order (a removed role
disappears at once, even while its children drain): ``replicas`` and ``readyReplicas`` sum the
role's owned children over every slice and revision, ``updatedReplicas`` only those at the target
revision. Zero counts are left out, as Go's ``omitempty`` leaves them out of what upstream writes,
so a status written by either controller compares equal.

The set is available when every role runs exactly its wanted groups (per slice, times the
slices), all ready and updated, and every External role has its scaler; a set paused at 0 with
everything drained is available. Exactly one of Available and Progressing is True; the merge rule
(:func:`set_condition`) keeps each condition's ``lastTransitionTime`` while its status holds, and
writes the True one's reason and message onto the other when it turns it False, as upstream does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lws_operator.api.constants import PAUSED_ANNOTATION, REASON_ROLLOUT_PAUSED
from lws_operator.api.disaggregated import (
    CONDITION_AVAILABLE,
    CONDITION_PROGRESSING,
    DisaggregatedSetView,
)
from lws_operator.logic.disaggregated.scaling import ScalerLike, target_replicas
from lws_operator.logic.disaggregated.slices import revision_label, role_of, status_count

AVAILABLE_REASON: Final = "AllRolesReady"
AVAILABLE_MESSAGE: Final = ("All roles have reached their desired replica count, ready and "
                            "updated to the current revision")
PROGRESSING_REASON: Final = "RolloutInProgress"
PROGRESSING_MESSAGE: Final = ("Not all roles have reached their desired replica count, ready and "
                              "updated to the current revision")
# Ours: Progressing's reason while the set is paused (``logic.disaggregated.steps``).
PAUSED_REASON: Final = REASON_ROLLOUT_PAUSED
PAUSED_MESSAGE: Final = (f"Rollout paused ({PAUSED_ANNOTATION}): every role holds at its "
                         "current step until it is resumed (kubectl lws rollout resume {name})")
_PAIR: Final = (CONDITION_AVAILABLE, CONDITION_PROGRESSING)

Obj = Mapping[str, Any]
DS = Obj | DisaggregatedSetView


def role_statuses(ds: DS, lws_objects: Iterable[Obj], rev: str) -> list[dict[str, Any]]:
    """``status.roleStatuses`` from the set's owned children (all slices)."""
    children = list(lws_objects)
    out = []
    for role in DisaggregatedSetView.of(ds).roles:
        mine = [lws for lws in children if role_of(lws) == role.name]
        entry: dict[str, Any] = {"name": role.name}
        counts = {
            "replicas": sum(status_count(lws, "replicas") for lws in mine),
            "readyReplicas": sum(status_count(lws, "readyReplicas") for lws in mine),
            "updatedReplicas": sum(status_count(lws, "updatedReplicas") for lws in mine
                                   if revision_label(lws) == rev),
        }
        entry.update({k: v for k, v in counts.items() if v})
        out.append(entry)
    return out


def is_available(ds: DS, scalers: Mapping[str, ScalerLike],
                 statuses: Sequence[Mapping[str, Any]]) -> bool:
    """Every spec role at its wanted groups times the slices (``replicas``, ready and updated
    alike), and every External role bound to a scaler."""
    view = DisaggregatedSetView.of(ds)
    by_name = {str(s.get("name")): s for s in statuses}
    for role in view.roles:
        if role.external and role.name not in scalers:
            return False
        want = target_replicas(role, scalers, 0) * view.slices
        entry = by_name.get(role.name, {})
        if any(int(entry.get(k) or 0) != want
               for k in ("replicas", "readyReplicas", "updatedReplicas")):
            return False
    return True


def computed_condition(ds: DS, available: bool, now: str) -> dict[str, Any]:
    """The True member of the pair this pass computes, stamped ``now``; ``Progressing`` says
    ``RolloutPaused`` (ours) while the set is paused."""
    view = DisaggregatedSetView.of(ds)
    generation = view.generation
    if available:
        kind, reason, message = CONDITION_AVAILABLE, AVAILABLE_REASON, AVAILABLE_MESSAGE
    elif view.paused:
        kind, reason = CONDITION_PROGRESSING, PAUSED_REASON
        message = PAUSED_MESSAGE.format(name=view.name)
    else:
        kind, reason, message = CONDITION_PROGRESSING, PROGRESSING_REASON, PROGRESSING_MESSAGE
    return {"type": kind, "status": "True", "observedGeneration": generation,
            "lastTransitionTime": now, "reason": reason, "message": message}


def set_condition(conditions: Sequence[Mapping[str, Any]], new: Mapping[str, Any],
                  now: str) -> tuple[list[dict[str, Any]], bool]:
    """Merge ``new`` (a member of the Available/Progressing pair) into ``conditions``; returns
    the new list and whether anything changed.

    * An entry of the same type whose status differs is replaced whole, stamped ``now``; one
      with the same status takes ``new``'s observedGeneration, reason and message and keeps its
      ``lastTransitionTime``. Without one, ``new`` is appended, stamped ``now``.
    * The other member of the pair, if True, turns False, stamped ``now``, with ``new``'s
      observedGeneration, reason and message; if already False, only its observedGeneration
      follows.
    * Other condition types are never touched."""
    out = [dict(c) for c in conditions]
    changed = False
    kind = new.get("type")
    index = next((i for i, c in enumerate(out) if c.get("type") == kind), None)
    if index is None:
        out.append({**new, "lastTransitionTime": now})
        changed = True
    elif out[index].get("status") != new.get("status"):
        out[index] = {**new, "lastTransitionTime": now}
        changed = True
    else:
        for key in ("observedGeneration", "reason", "message"):
            if out[index].get(key) != new.get(key):
                out[index][key] = new.get(key)
                changed = True
    if kind in _PAIR:
        other = _PAIR[1] if kind == _PAIR[0] else _PAIR[0]
        for condition in out:
            if condition.get("type") != other:
                continue
            if condition.get("status") == "True":
                condition.update({"status": "False", "lastTransitionTime": now,
                                  "observedGeneration": new.get("observedGeneration"),
                                  "reason": new.get("reason"), "message": new.get("message")})
                changed = True
            elif condition.get("observedGeneration") != new.get("observedGeneration"):
                condition["observedGeneration"] = new.get("observedGeneration")
                changed = True
    return out, changed


@dataclass(frozen=True)
class StatusDecision:
    """The status to write (the whole ``status``) and whether it differs from the stored one:
    nothing is written when it does not."""

    status: dict[str, Any]
    changed: bool


def compute_status(ds: DS, lws_objects: Iterable[Obj], rev: str,
                   scalers: Mapping[str, ScalerLike], now: str) -> StatusDecision:
    """The set's status after a pass: ``lws_objects`` are its owned children (all slices, read
    after the slices were reconciled), ``scalers`` the role scalers bound this pass."""
    view = DisaggregatedSetView.of(ds)
    stored = view.status
    statuses = role_statuses(view, lws_objects, rev)
    condition = computed_condition(view, is_available(view, scalers, statuses), now)
    existing = [c for c in stored.get("conditions") or () if isinstance(c, Mapping)]
    conditions, conditions_changed = set_condition(existing, condition, now)
    status = dict(stored)
    status["observedGeneration"] = view.generation
    status["roleStatuses"] = statuses
    status["conditions"] = conditions
    changed = (conditions_changed or stored.get("observedGeneration") != view.generation
               or list(stored.get("roleStatuses") or []) != statuses)
    return StatusDecision(status, changed)
