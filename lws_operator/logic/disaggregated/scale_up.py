"""The new revision's side of a DisaggregatedSet rollout step: the stability gate, the missing
children, and the scale-ups a planned step asks for (upstream's isRevisionStable, scaleUpNew and
ensureNewLWSExists, executor.go), as decisions the controller applies.

The stability gate holds the rollout until every spec role's new LeaderWorkerSet has as many
ready groups as it asks for (``spec.replicas``, absent read as 1; 0 of 0 is stable), so a step is
always planned against settled capacity; old revisions' readiness is not looked at.

Upstream quirk fixed here (the recommended fix): upstream creates the new revision's
LeaderWorkerSets only at rollout start, so if that start was cut short (a crash between two
creates) a role's new LeaderWorkerSet never appears and the gate waits forever. The controller
asks :func:`missing_roles` at the gate too and creates those at 0 replicas, exactly what the
start would have created.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True)
class NewLws:
    """The new revision's LeaderWorkerSet of one role: its name, ``spec.replicas`` (absent read
    as 1) and ``status.readyReplicas``."""

    name: str
    role: str
    replicas: int
    ready: int

    @property
    def stable(self) -> bool:
        return self.replicas == self.ready


@dataclass(frozen=True)
class RoleScaling:
    """One change to apply: LeaderWorkerSet ``name`` of ``role`` from ``current`` to ``to``
    replicas, up or down (the subclass says which)."""

    role: str
    name: str
    current: int
    to: int

    direction: ClassVar[str]

    @property
    def message(self) -> str:
        """The event's note, as upstream words it: "Scaling <up|down> <role> LWS <name> from
        <current> to <to> replicas"."""
        return (f"Scaling {self.direction} {self.role} LWS {self.name} from {self.current} to "
                f"{self.to} replicas")


@dataclass(frozen=True)
class ScaleUp(RoleScaling):
    """One scale-up to apply (the ``ScalingUp`` event)."""

    direction: ClassVar[str] = "up"


def revision_stable(new: Mapping[str, NewLws], spec_roles: Sequence[str]) -> bool:
    """Whether every spec role has its new LeaderWorkerSet and all of its groups are ready."""
    return all(role in new and new[role].stable for role in spec_roles)


def missing_roles(new: Collection[str], spec_roles: Sequence[str]) -> list[str]:
    """The spec roles (in spec order) with no new-revision LeaderWorkerSet yet: created at 0
    replicas, at rollout start and, fixing upstream's stuck gate, at the gate."""
    return [role for role in spec_roles if role not in new]


def scale_up_new(roles: Sequence[str], spec_roles: Collection[str], current: Sequence[int],
                 planned: Sequence[int], names: Mapping[str, str]) -> list[ScaleUp]:
    """The scale-ups of a planned step: each spec role of the universe ``roles`` whose new count
    ``current`` is below the step's ``planned`` one, addressed by its generated name in
    ``names`` (removed roles have no new LeaderWorkerSet and are skipped)."""
    if not len(roles) == len(current) == len(planned):
        raise ValueError("one count per role")
    return [ScaleUp(role, names[role], c, p)
            for role, c, p in zip(roles, current, planned, strict=True)
            if role in spec_roles and c < p]
