"""Slices, the objects made before slices existed, and the replica counts read off child
LeaderWorkerSets (upstream's lws_manager.go and utils/disaggregatedset).

A DisaggregatedSet with ``slices: S`` runs S full copies of its topology, each child labelled with
its slice index. Objects made by releases before slices existed carry no slice label and the name
``<ds>-<rev>-<role>``: they belong to slice 0, and only to slice 0. "The label is 0 or absent"
cannot be a label selector, so objects are listed by the set's name label and bucketed here.

The replica reads follow upstream's: a LeaderWorkerSet whose ``spec.replicas`` is absent runs one
group (the LeaderWorkerSet default), and the ``initial-replicas`` annotation (the LWS docs' "replica
baseline used by the controller when the DisaggregatedSet revision becomes old") is trusted only
when it is a non-negative decimal that fits an int32; anything else falls back to the
LeaderWorkerSet's ``spec.replicas``. Upstream's parser also accepts a sign; a negative baseline
would only be a hand edit and would make the planner's arithmetic meaningless, so it is ignored
like any other unreadable value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any, Final

from lws_operator.api.disaggregated import (
    INITIAL_REPLICAS_ANNOTATION,
    REVISION_LABEL,
    ROLE_LABEL,
    SLICE_LABEL,
    DisaggregatedSetView,
    controlled_by,
)
from lws_operator.api.view import annotations_of, labels, metadata
from lws_operator.logic.disaggregated.names import legacy_lws_name, lws_name, service_name

# The slice argument that selects every slice, legacy objects included.
ALL_SLICES: Final = -1
_INT32_MAX: Final = 2**31 - 1
_DECIMAL: Final = re.compile(r"[0-9]+")
# Go's strconv.Atoi, which upstream parses the slice label with: an optional sign, then digits.
_SIGNED_DECIMAL: Final = re.compile(r"[+-]?[0-9]+")

Obj = Mapping[str, Any]


def _name(obj: Obj) -> str:
    return str(metadata(obj).get("name") or "")


def lws_replicas(lws: Obj) -> int:
    """``spec.replicas`` of a child LeaderWorkerSet: absent (or null) is 1, the LeaderWorkerSet
    default, as every upstream read of an existing child counts it."""
    spec = lws.get("spec")
    value = spec.get("replicas") if isinstance(spec, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 1


def status_count(lws: Obj, key: str) -> int:
    """An integer of a LeaderWorkerSet's ``status`` (``replicas``, ``readyReplicas``,
    ``updatedReplicas``): absent is 0."""
    status = lws.get("status")
    value = status.get(key) if isinstance(status, Mapping) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def role_of(obj: Obj) -> str:
    return str(labels(obj).get(ROLE_LABEL) or "")


def revision_label(obj: Obj) -> str:
    return str(labels(obj).get(REVISION_LABEL) or "")


def has_slice_label(obj_labels: Mapping[str, Any] | None) -> bool:
    """Whether the labels name a slice: a legacy (pre-slices) object has none, or an empty one."""
    return bool((obj_labels or {}).get(SLICE_LABEL))


def slice_label_matches(obj_labels: Mapping[str, Any] | None, slice_index: int) -> bool:
    """Whether an object with these labels belongs to ``slice_index``: every object for
    :data:`ALL_SLICES`; for slice 0 also a missing or empty label (legacy objects); otherwise
    the label must be the decimal index."""
    if slice_index == ALL_SLICES:
        return True
    value = (obj_labels or {}).get(SLICE_LABEL)
    if not value:
        return slice_index == 0
    return str(value) == str(slice_index)


def in_slice(obj: Obj, slice_index: int) -> bool:
    return slice_label_matches(labels(obj), slice_index)


def in_slice_objects(objects: Iterable[Obj], slice_index: int) -> list[Obj]:
    """The objects of one slice (or all, for :data:`ALL_SLICES`), in the given order."""
    return [obj for obj in objects if in_slice(obj, slice_index)]


def slice_index_of(obj: Obj) -> int | None:
    """The slice label parsed as an integer, or None when it is absent, empty or not a number
    (such an object is never taken for a removed slice)."""
    value = labels(obj).get(SLICE_LABEL)
    if not isinstance(value, str) or not _SIGNED_DECIMAL.fullmatch(value):
        return None
    return int(value)


def in_removed_slice(obj: Obj, slices: int) -> bool:
    """Whether ``obj`` belongs to a slice at or above ``slices`` (the count lowered): its
    LeaderWorkerSets and Services are deleted directly, without a drain. An object without a
    readable slice label is never removed this way."""
    index = slice_index_of(obj)
    return index is not None and index >= slices


def owned(objects: Iterable[Obj], ds: Obj | DisaggregatedSetView) -> list[Obj]:
    """The objects the set controls (controller ownerReference to its UID): the label alone is
    never trusted, since a deleted and recreated namesake or a hand-made object can carry it."""
    uid = DisaggregatedSetView.of(ds).uid
    return [obj for obj in objects if controlled_by(obj, uid)]


def find_role_lws(objects: Iterable[Obj], ds: Obj | DisaggregatedSetView, slice_index: int,
                  rev: str, role: str) -> Obj | None:
    """The owned LeaderWorkerSet of ``role`` at ``rev`` in ``slice_index``: the slice-aware name
    first, then, for slice 0 only, the legacy name (adopted in place). An object at either name
    that another owner controls counts as absent."""
    view = DisaggregatedSetView.of(ds)
    by_name = {_name(obj): obj for obj in owned(objects, view)}
    found = by_name.get(lws_name(view.name, slice_index, rev, role))
    if found is None and slice_index == 0:
        found = by_name.get(legacy_lws_name(view.name, rev, role))
    return found


# ------------------------------------------------------------------ initial-replicas annotation

def parse_initial_replicas(annotations: Mapping[str, Any] | None) -> int | None:
    """The ``initial-replicas`` baseline, or None when it is missing or unreadable (module
    docstring)."""
    value = (annotations or {}).get(INITIAL_REPLICAS_ANNOTATION)
    if not isinstance(value, str) or not _DECIMAL.fullmatch(value):
        return None
    number = int(value)
    return number if number <= _INT32_MAX else None


def initial_replicas(lws: Obj) -> int | None:
    return parse_initial_replicas(annotations_of(lws))


def with_initial_replicas(annotations: Mapping[str, Any] | None, value: int) -> dict[str, Any]:
    """A copy of ``annotations`` (None is an empty map) with the baseline set to ``value``."""
    out = dict(annotations or {})
    out[INITIAL_REPLICAS_ANNOTATION] = str(value)
    return out


def set_initial_replicas(annotations: MutableMapping[str, Any], value: int) -> int | None:
    """Set the baseline in place; returns the previous readable value (None if there was none),
    so the caller can skip the write when it is unchanged and warn when it overwrote another."""
    previous = parse_initial_replicas(annotations)
    annotations[INITIAL_REPLICAS_ANNOTATION] = str(value)
    return previous


def baseline(lws: Obj) -> int:
    """What one old LeaderWorkerSet contributes to the planner's ``initialOld``: its annotation
    when readable, else its ``spec.replicas`` (absent is 1)."""
    annotated = initial_replicas(lws)
    return lws_replicas(lws) if annotated is None else annotated


def initial_replica_state(lws_objects: Iterable[Obj]) -> dict[str, int]:
    """``initialOld`` per role label: the sum of :func:`baseline` over the given (old)
    LeaderWorkerSets, recomputed from those that still exist, so a revision deleted after
    draining drops out."""
    out: dict[str, int] = {}
    for lws in lws_objects:
        role = role_of(lws)
        out[role] = out.get(role, 0) + baseline(lws)
    return out


def initial_replicas_patch(lws: Obj) -> dict[str, Any] | None:
    """The annotation patch that records ``lws``'s current replicas as its baseline when a
    rollout starts (None when the annotation already holds that value; a different value is
    overwritten, which re-snapshots A and B alike when A -> B -> C)."""
    current = lws_replicas(lws)
    if initial_replicas(lws) == current:
        return None
    return {"metadata": {"annotations": {INITIAL_REPLICAS_ANNOTATION: str(current)}}}


# ------------------------------------------------------------------ revision groups

def group_by_revision(lws_objects: Iterable[Obj]) -> dict[str, dict[str, Obj]]:
    """The LeaderWorkerSets grouped by revision label, then by role label, in first-seen
    order. When one revision holds several LeaderWorkerSets of a role the last one is kept, as
    upstream does (see :func:`duplicate_roles` to log them)."""
    out: dict[str, dict[str, Obj]] = {}
    for lws in lws_objects:
        out.setdefault(revision_label(lws), {})[role_of(lws)] = lws
    return out


def duplicate_roles(lws_objects: Iterable[Obj]) -> list[tuple[str, str]]:
    """The (revision, role) pairs held by more than one LeaderWorkerSet."""
    seen: set[tuple[str, str]] = set()
    duplicates: list[tuple[str, str]] = []
    for lws in lws_objects:
        key = (revision_label(lws), role_of(lws))
        if key in seen and key not in duplicates:
            duplicates.append(key)
        seen.add(key)
    return duplicates


def drained_revisions(groups: Mapping[str, Mapping[str, Obj]], target: str) -> list[str]:
    """The revisions other than ``target`` whose every LeaderWorkerSet is at 0 replicas
    (absent counts as 1): their LeaderWorkerSets are deleted by their actual names."""
    return [rev for rev, roles in groups.items()
            if rev != target and roles and all(lws_replicas(lws) == 0 for lws in roles.values())]


# ------------------------------------------------------------------ legacy slice 0

def is_legacy(lws: Obj) -> bool:
    """A LeaderWorkerSet made before slices existed (no slice label): it belongs to slice 0."""
    return not has_slice_label(labels(lws))


def legacy_migrations(ds: Obj | DisaggregatedSetView, rev: str,
                      objects: Iterable[Obj]) -> list[tuple[str, str]]:
    """When ``slices > 1``: the (Service, LeaderWorkerSet) names to delete, in that order, so
    that slice 0 is recreated in slice-aware form in the same pass as its siblings.

    Only an owned LeaderWorkerSet at the legacy name of a spec role at the target revision and
    without a slice label qualifies. Its Service goes first: its selector has no slice, so once a
    sibling slice's same-revision pods exist it would select them too. A legacy slice 0 at an
    older revision is left to the ordinary rollout, and a foreign object at the legacy name
    blocks nothing."""
    view = DisaggregatedSetView.of(ds)
    if view.slices <= 1:
        return []
    by_name = {_name(obj): obj for obj in owned(objects, view)}
    out = []
    for role in view.roles:
        name = legacy_lws_name(view.name, rev, role.name)
        lws = by_name.get(name)
        if lws is not None and is_legacy(lws):
            out.append((service_name(name), name))
    return out


def replica_totals(lws_objects: Iterable[Obj]) -> dict[str, int]:
    """Σ ``spec.replicas`` (absent is 1) per role label: the planner's ``currentOld`` over the
    old children, or a role's running groups."""
    out: dict[str, int] = {}
    for lws in lws_objects:
        role = role_of(lws)
        out[role] = out.get(role, 0) + lws_replicas(lws)
    return out
