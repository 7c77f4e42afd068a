"""How many groups each role wants, and the role scalers that let an autoscaler decide it for an
External role (upstream's scaler_manager.go and GetTargetReplicas, KEP-849).

A Static role wants its ``spec.replicas`` per slice (absent is 1). An External role wants what
its DisaggregatedSetRoleScaler ``<ds>-<role>`` says, which an HPA or KEDA writes through the
scaler's ``/scale`` subresource; the role's own ``spec.replicas`` is ignored (admission warns).
Without a scaler (a foreign object holds its name, or it is not created yet) the role keeps what
it runs: the caller's ``current``.

A scaler is seeded when it is created: with the role's running groups over every slice and
revision when it has any (a Static to External flip keeps the fleet), else 1 (an HPA refuses to
act on a current count of 0). The scaler's status reports the role's groups and a selector
matching the role's leaders only: an HPA divides per-pod metrics by the pods it matches, and the
count it reads and writes is groups.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from lws_operator.api.disaggregated import (
    SCALER_CONDITION_READY,
    DisaggregatedSetView,
    RoleScalerView,
    RoleView,
    controlled_by,
)
from lws_operator.logic.disaggregated.children import scaler_selector
from lws_operator.logic.disaggregated.names import scaler_name
from lws_operator.logic.disaggregated.slices import lws_replicas, role_of, status_count

READY_REASON: Final = "Bound"
READY_MESSAGE: Final = "Scaler bound to a live DisaggregatedSet role"

Obj = Mapping[str, Any]
ScalerLike = RoleScalerView | Mapping[str, Any]


def _scaler(value: ScalerLike) -> RoleScalerView:
    return value if isinstance(value, RoleScalerView) else RoleScalerView(value)


def target_replicas(role: RoleView | None, scalers: Mapping[str, ScalerLike],
                    current: int) -> int:
    """Groups per slice the role wants (upstream's resolution matrix): a Static role's replicas
    (absent is 1); an External role's scaler ``spec.replicas`` (0 is honoured), or ``current``
    when it has no scaler; 1 for a role not in the spec."""
    if role is None:
        return 1
    if not role.external:
        return role.replicas
    scaler = scalers.get(role.name)
    return current if scaler is None else _scaler(scaler).replicas


def scaler_seed(role: str, lws_objects: Iterable[Obj]) -> int:
    """``spec.replicas`` of a new scaler: the role's groups over every given (owned) child, all
    slices and revisions (mid-rollout that is old plus new), or 1 when it has none."""
    counts = [lws_replicas(lws) for lws in lws_objects if role_of(lws) == role]
    return sum(counts) if counts else 1


def observed_groups(role: str, lws_objects: Iterable[Obj]) -> int:
    """The scaler's ``status.replicas``: Σ ``status.replicas`` of the role's children."""
    return sum(status_count(lws, "replicas") for lws in lws_objects if role_of(lws) == role)


@dataclass(frozen=True)
class ScalerPlan:
    """What the scaler pass does, in this order: delete the owned scalers of roles that are no
    longer External (or gone), create the missing ones, and report the name conflicts (a
    ``ScalerConflict`` Warning; the role stays without a scaler this pass)."""

    bound: dict[str, RoleScalerView] = field(default_factory=dict)
    delete: tuple[RoleScalerView, ...] = ()
    create: tuple[str, ...] = ()
    conflicts: tuple[str, ...] = ()


def plan_scalers(ds: Obj | DisaggregatedSetView, scalers: Iterable[ScalerLike]) -> ScalerPlan:
    """Decide the scaler pass from the scalers known in the set's namespace (any of them: the
    name label narrows the owned ones, the name finds a foreign one in the way).

    Owned means a controller ownerReference to the set's UID; the role is the owned scaler's role
    label. A role is bound to its owned scaler; an External role without one adopts an owned
    scaler holding its name ``<ds>-<role>`` (whatever its label says), or gets one created, unless
    a scaler the set does not control holds that name. The owned scalers left unbound whose role
    is not External are deleted (the role turned Static, or is gone)."""
    view = DisaggregatedSetView.of(ds)
    external = [role.name for role in view.roles if role.external]
    known = [_scaler(s) for s in scalers]
    mine = [s for s in known if controlled_by(s.raw, view.uid)]
    bound: dict[str, RoleScalerView] = {}
    for scaler in mine:
        if scaler.role in external and scaler.role not in bound:
            bound[scaler.role] = scaler
    names = {s.name for s in known}
    create, conflicts = [], []
    for role in external:
        if role in bound:
            continue
        name = scaler_name(view.name, role)
        taken = {id(s.raw) for s in bound.values()}
        owned_at_name = next((s for s in mine if s.name == name and id(s.raw) not in taken),
                             None)
        if owned_at_name is not None:
            bound[role] = owned_at_name
        elif name in names:
            conflicts.append(role)
        else:
            create.append(role)
    taken = {id(s.raw) for s in bound.values()}
    delete = tuple(s for s in mine if id(s.raw) not in taken and s.role not in external)
    return ScalerPlan(bound, delete, tuple(create), tuple(conflicts))


def scaler_status(ds: Obj | DisaggregatedSetView, role: str, scaler: ScalerLike, groups: int,
                  now: str) -> dict[str, Any] | None:
    """The new ``status`` of ``role``'s scaler (for a merge patch of the status subresource),
    or None when it already says the same: ``groups`` observed, the leaders-only selector, the
    generation seen, and ``Ready=True`` (reason ``Bound``), whose ``lastTransitionTime`` is kept
    while its status and reason are unchanged."""
    view = DisaggregatedSetView.of(ds)
    current = _scaler(scaler)
    status = current.raw.get("status")
    status = status if isinstance(status, Mapping) else {}
    ready = {"type": SCALER_CONDITION_READY, "status": "True",
             "observedGeneration": current.generation, "reason": READY_REASON,
             "message": READY_MESSAGE, "lastTransitionTime": now}
    conditions = [dict(c) for c in status.get("conditions") or () if isinstance(c, Mapping)]
    found = False
    for i, condition in enumerate(conditions):
        if condition.get("type") != SCALER_CONDITION_READY:
            continue
        found = True
        if condition.get("status") != "True" or condition.get("reason") != READY_REASON:
            conditions[i] = ready
    if not found:
        conditions.append(ready)
    desired = {
        "replicas": groups,
        "selector": scaler_selector(view.name, role),
        "observedGeneration": current.generation,
        "conditions": conditions,
    }
    unchanged = all(status.get(k) == desired[k] for k in ("replicas", "selector",
                                                          "observedGeneration"))
    return None if unchanged and conditions == list(status.get("conditions") or ()) else desired
