"""Which headless Services of one slice to create and which to delete (upstream's
service_manager.go, at the snapshot the controller follows).

A router pairs same-revision backends through the ``<lws>-prv`` Services, so a revision gets its
Services only once it serves on every spec role (each role's child has at least one ready group):
half a revision would pair a prefill with nothing. Until the target revision is ready in the
slice, nothing is created and nothing is deleted. Once it is, the Services of the revisions that
are still ready on every current spec role are kept with the target's, so while old and new both
serve, both are published (no flip-flop); the others are deleted, a legacy (slice-less) Service
with them in slice 0.

Upstream quirk kept: a revision that lacks a role added since loses its Services as soon as the
target is ready, even while its pods still serve (it is not ready on every current role).
Upstream deletes from every Service labelled with the set's name, owned or not; the candidates
for deletion here are exactly the Services the caller passes, so passing only the owned ones
keeps a hand-made Service that carries the label.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.api.disaggregated import DisaggregatedSetView
from lws_operator.api.view import metadata
from lws_operator.logic.disaggregated.children import build_service
from lws_operator.logic.disaggregated.slices import (
    group_by_revision,
    in_slice_objects,
    revision_label,
    status_count,
)

Obj = Mapping[str, Any]
DS = Obj | DisaggregatedSetView


def ready_on_roles(group: Mapping[str, Obj], roles: Iterable[str]) -> bool:
    """Whether every role has a child in ``group`` (a revision's children by role) with at
    least one ready group."""
    return all(role in group and status_count(group[role], "readyReplicas") >= 1
               for role in roles)


@dataclass(frozen=True)
class ServicePlan:
    """Services to create if absent (whole objects) and names to delete (a 404 is fine)."""

    create: tuple[dict[str, Any], ...] = ()
    delete: tuple[str, ...] = ()


def plan_services(ds: DS, slice_index: int, lws_objects: Iterable[Obj],
                  services: Iterable[Obj], rev: str) -> ServicePlan:
    """The Service work of one slice: ``lws_objects`` are the set's owned children (any slice;
    this one's are picked), ``services`` the set's Services (any slice; the candidates for
    deletion, module docstring)."""
    view = DisaggregatedSetView.of(ds)
    roles = [role.name for role in view.roles]
    groups = group_by_revision(in_slice_objects(lws_objects, slice_index))
    target = groups.get(rev)
    if target is None or not ready_on_roles(target, roles):
        return ServicePlan()
    existing = in_slice_objects(services, slice_index)
    present = {str(metadata(s).get("name") or "") for s in existing}
    create = tuple(service for service in (build_service(view, target[role]) for role in roles)
                   if service["metadata"]["name"] not in present)
    # The target is ready here, so it is among the revisions kept.
    keep = {r for r, group in groups.items() if ready_on_roles(group, roles)}
    delete = tuple(str(metadata(s).get("name") or "") for s in existing
                   if revision_label(s) not in keep)
    return ServicePlan(create, delete)
