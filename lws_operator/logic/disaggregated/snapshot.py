"""``DsObserved``: everything one step of a DisaggregatedSet pass reads, as one immutable value.

The DisaggregatedSet controller (``controllers.disaggregatedset``) builds it from its watch caches
before every step, so a step sees the answers of the writes the steps before it made (the
executor stores each answer in the cache; a delete forgets the object). It holds no decision of
the pass: what a later step needs of an earlier one (the target revision, fixed once per pass)
is an argument of that step (``logic.disaggregated.pipeline``). Nothing outlives a pass: every
fact the rollout needs across passes lives on the objects (the children's replicas, their
revision labels, the ``initial-replicas`` annotation, the revision history's
ControllerRevisions).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from lws_operator.api.disaggregated import (
    API_VERSION,
    KIND,
    DisaggregatedSetView,
    RoleScalerView,
    controlled_by,
)
from lws_operator.logic.disaggregated import revision_data

Obj = dict[str, Any]


@dataclass(frozen=True)
class DsObserved:
    """A DisaggregatedSet and its children as the caches hold them.

    ``lws``/``services``/``scalers``/``revisions``: the children the cache lists under this set
    (labelled with its name and controlled by a DisaggregatedSet of that name; the steps check
    the UID); ``revisions`` are the set's own ControllerRevisions (``logic.disaggregated.history``).
    ``*_named``: every cached object of the kind in the namespace by name, for "is this name
    taken, and by whom". ``now``: condition transition times. ``collected``: the failure
    reasons the previous step's plan collected."""

    body: Obj
    lws: tuple[Obj, ...]
    lws_named: Mapping[str, Obj]
    services: tuple[Obj, ...]
    services_named: Mapping[str, Obj]
    scalers: tuple[Obj, ...]
    scalers_named: Mapping[str, Obj]
    now: str
    collected: tuple[str, ...] = ()
    fetched: Mapping[str, Obj] = field(default_factory=dict)
    revisions: tuple[Obj, ...] = ()

    @cached_property
    def ds(self) -> DisaggregatedSetView:
        return DisaggregatedSetView({"apiVersion": API_VERSION, "kind": KIND, **self.body})

    @cached_property
    def owned_lws(self) -> tuple[Obj, ...]:
        """The LeaderWorkerSets this set controls (controller ownerReference with its UID)."""
        return tuple(o for o in self.lws if controlled_by(o, self.ds.uid))

    @cached_property
    def owned_services(self) -> tuple[Obj, ...]:
        return tuple(o for o in self.services if controlled_by(o, self.ds.uid))

    @cached_property
    def owned_revisions(self) -> tuple[Mapping[str, Any], ...]:
        """The set's revision history: the ControllerRevisions it controls."""
        return tuple(revision_data.owned(self.ds, self.revisions))

    @cached_property
    def owned_scalers(self) -> tuple[Obj, ...]:
        return tuple(o for o in self.scalers if controlled_by(o, self.ds.uid))

    def owned_lws_named(self, name: str) -> Obj | None:
        """The LeaderWorkerSet of that name if this set controls it (a foreign one counts as
        absent, upstream's lws_manager.go)."""
        found = self.lws_named.get(name)
        return found if found is not None and controlled_by(found, self.ds.uid) else None

    @cached_property
    def scaler_views(self) -> dict[str, RoleScalerView]:
        """The scalers this set controls, by role (upstream's scaler map: a role whose scaler is
        missing or foreign has none)."""
        external = {r.name for r in self.ds.roles if r.external}
        views = (RoleScalerView(s) for s in self.owned_scalers)
        return {v.role: v for v in views if v.role in external}
