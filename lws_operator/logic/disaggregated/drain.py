"""Draining old DisaggregatedSet revisions: the planner's old totals turned into LWS scale-downs.

The planner speaks in per-role totals over every old revision; the cluster has one LeaderWorkerSet
per (old revision, role). :func:`scale_down_old` spends each role's budget (current old total
minus the planned one) on the concrete LeaderWorkerSets, as upstream's scaleDownOld
(executor.go) does:

1. revisions newest first, by the newest ``creationTimestamp`` among their LeaderWorkerSets, so a
   mid-rollout template change (A -> B -> C) drains B, the short-lived one, before A;
2. per revision, each role present drains ``min(budget, replicas)``; a role that would reach 0
   **triggers a coordinated drain**: every role of that revision goes to 0 together, so no
   revision ever serves with one role gone and another alive (a prefill without its decode
   is useless to the router); a role absent from the revision (added later) neither triggers
   nor drains;
3. a role's budget is charged only when it drained on its own account (it triggered, or nothing
   triggered); a role forced to 0 by coordination keeps its budget for the next, older revision;
4. stop as soon as no role has budget left.

Kept upstream quirk (the budget spill-over): coordination can take more old capacity than the
planner asked for; when the old spec roles all reach 0 before the new revision is at target, the
next pass finds no old replicas and the simple path scales the new revision straight to target.
It is kept because it never breaks the guarantee the feature exists for (no revision with a role
at 0 beside a live sibling) and changing it would make the rollout pace differently from the Go
controller's on the same objects.

Budgets may be 0 or negative (an old total below the plan, e.g. after orphan prevention put a
role back at 1): such a role never scales up here and is not charged; a role already at 0 with a
non-negative budget still triggers, which finishes a revision left half drained.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from lws_operator.logic.disaggregated.scale_up import RoleScaling

_EPOCH = datetime.min.replace(tzinfo=UTC)


@dataclass(frozen=True)
class OldLws:
    """One LeaderWorkerSet of an old revision: its actual name (legacy slice-0 names included),
    its role, its ``spec.replicas`` (an absent value read as 1) and its ``initial-replicas``
    annotation when it holds a valid count (the rollout's baseline; None: use ``replicas``)."""

    name: str
    role: str
    replicas: int
    initial: int | None = None

    @property
    def baseline(self) -> int:
        """What this LeaderWorkerSet adds to its role's ``initial_old``."""
        return self.replicas if self.initial is None else self.initial


@dataclass(frozen=True)
class OldRevision:
    """An old revision of one slice: its LeaderWorkerSets and the newest creation time among
    them (how the drain order is decided)."""

    revision: str
    newest_created: datetime
    members: tuple[OldLws, ...]

    def by_role(self) -> dict[str, OldLws]:
        """The revision's LeaderWorkerSet per role; if a role has several (never made by the
        controller), the last one counts, as upstream's grouping keeps the last."""
        return {member.role: member for member in self.members}


@dataclass(frozen=True)
class ScaleDown(RoleScaling):
    """One scale-down to apply."""

    direction: ClassVar[str] = "down"


def parse_timestamp(value: Any) -> datetime:
    """An RFC 3339 ``creationTimestamp`` as an aware datetime; absent or malformed reads as the
    earliest possible time (such a revision sorts as the oldest)."""
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, str) and value:
        try:
            parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return _EPOCH
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return _EPOCH


def newest_timestamp(timestamps: Iterable[Any]) -> datetime:
    """The newest of some ``creationTimestamp`` values (the epoch floor when there are none)."""
    return max((parse_timestamp(t) for t in timestamps), default=_EPOCH)


def old_revision(revision: str, lws: Iterable[Mapping[str, Any]], role_label: str,
                 replicas_of: Callable[[Mapping[str, Any]], int] | None = None,
                 initial_of: Callable[[Mapping[str, Any]], int | None] | None = None
                 ) -> OldRevision:
    """An :class:`OldRevision` from LeaderWorkerSet objects of one revision: the role from
    ``role_label``, replicas from ``spec.replicas`` (absent: 1, or ``replicas_of(obj)`` when
    given), the baseline from ``initial_of(obj)`` (the ``initial-replicas`` annotation reader;
    none given: no baseline) and the newest ``metadata.creationTimestamp`` over all of them."""
    objs = list(lws)
    members = []
    for obj in objs:
        meta = obj.get("metadata") or {}
        labels = meta.get("labels") or {}
        if replicas_of is not None:
            replicas = int(replicas_of(obj))
        else:
            value = (obj.get("spec") or {}).get("replicas")
            replicas = value if isinstance(value, int) and not isinstance(value, bool) else 1
        members.append(OldLws(str(meta.get("name") or ""), str(labels.get(role_label) or ""),
                              replicas, None if initial_of is None else initial_of(obj)))
    return OldRevision(revision,
                       newest_timestamp((o.get("metadata") or {}).get("creationTimestamp")
                                        for o in objs),
                       tuple(members))


def newest_first(revisions: Iterable[OldRevision]) -> list[OldRevision]:
    """Old revisions newest first (a new list; the input is untouched). Upstream's sort is not
    stable, so its tie order is arbitrary; here ties fall by revision name, descending, so the
    same world always drains the same revision first across passes."""
    return sorted(revisions, key=lambda r: (r.newest_created, r.revision), reverse=True)


def _budget_by_role(budget: Sequence[int] | Mapping[str, int],
                    roles: Sequence[str]) -> dict[str, int]:
    """``budget`` keyed by role, whether given keyed or aligned with ``roles``."""
    if isinstance(budget, Mapping):
        return {role: int(budget.get(role, 0)) for role in roles}
    if len(budget) != len(roles):
        raise ValueError("one budget per role")
    return dict(zip(roles, (int(b) for b in budget), strict=True))


def _drain_revision(revision: OldRevision, roles: Sequence[str],
                    left: dict[str, int]) -> list[ScaleDown]:
    """The scale-downs of one old revision, spending ``left`` (updated in place). Coordinated
    drain: when any role of the revision would reach 0, every role of it goes to 0, and only
    the roles that reached 0 by themselves spend their budget."""
    present = revision.by_role()
    drains: dict[str, int] = {}
    proposed: dict[str, int] = {}
    triggered: set[str] = set()
    for role in roles:
        lws = present.get(role)
        if lws is None:
            continue
        drains[role] = min(left[role], lws.replicas)
        proposed[role] = lws.replicas - drains[role]
        if proposed[role] == 0:
            triggered.add(role)
    if triggered:
        proposed = {role: 0 for role in proposed}
    out: list[ScaleDown] = []
    for role in roles:
        lws = present.get(role)
        if lws is None or lws.replicas <= proposed[role]:
            continue
        out.append(ScaleDown(role, lws.name, lws.replicas, proposed[role]))
        if role in triggered or not triggered:
            left[role] -= drains[role]
    return out


def scale_down_old(revisions: Iterable[OldRevision], roles: Sequence[str],
                   budget: Sequence[int] | Mapping[str, int]) -> list[ScaleDown]:
    """The scale-downs that spend ``budget`` (per role of the role universe ``roles``, either
    aligned with it or keyed by role name; ``current old - planned old``) over the old
    revisions, newest first, with coordinated drain. Returned in application order."""
    left = _budget_by_role(budget, roles)
    out: list[ScaleDown] = []
    for revision in newest_first(revisions):
        if not any(b > 0 for b in left.values()):
            break
        out += _drain_revision(revision, roles, left)
    return out
