"""The revision history of a DisaggregatedSet (ours: upstream keeps none, and a coordinated
rollout deletes the LeaderWorkerSets of the revision it drained, so without it nothing was left
to go back to).

Each revision of the set is a ControllerRevision of its own:

* **Found** by the set's name label (``disaggregatedset.x-k8s.io/name``), which the DisaggregatedSet
  controller's watch selects, and owned by the set (controller ownerReference), which its cache
  index confirms (``kube.cache.ds_owner_key``). It carries none of the LeaderWorkerSet labels, so
  the LeaderWorkerSet controller, whose watch selects ``leaderworkerset.sigs.k8s.io/name``, never
  sees it, and the revisions the child LeaderWorkerSets keep (labelled with the child's name,
  owned by the child) are never one of the set's.
* **Keyed** by the set's revision label (``disaggregatedset.x-k8s.io/revision``), the revision the
  pass targets (``logic.disaggregated.revision.target_revision``): our hash of the roles, or the
  revision of children taken over from the upstream controller.
* **Holding** in ``data`` what the revision hash covers, ``{"roles": [{"name", "template", ...}]}``
  as ``revision.revision_input`` writes it: what an undo writes back (``roles_restored``). For our
  own keys the key is the hash of exactly these bytes' roles.
* **Numbered, caused, marked and pruned** as a LeaderWorkerSet's (``logic.identity.history``, the
  same functions, reading this key): one above the highest when made, renumbered above the others
  when it becomes current again, the set's ``kubernetes.io/change-cause`` followed while it is
  current, ``lws-operator.dev/fully-ready-at`` written once when the coordinated rollout to it is
  done (no child of another revision left) and every role is Ready at its wanted groups, and the
  revisions beyond ``lws-operator.dev/revision-history-limit`` deleted only then.

Everything is decided from the cached objects on each pass: a set created before the history
existed (or taken over) gets its current revision recorded on its next pass, numbered 1, and
nothing else of it is written.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from lws_operator.api.constants import CHANGE_CAUSE_ANNOTATION, FULLY_READY_ANNOTATION
from lws_operator.api.disaggregated import (
    NAME_LABEL,
    REVISION_LABEL,
    DisaggregatedSetView,
    controlled_by,
)
from lws_operator.api.view import labels
from lws_operator.logic.disaggregated.children import owner_reference
from lws_operator.logic.disaggregated.revision import IMMUTABLE_SPEC_FIELDS, revision_input
from lws_operator.logic.disaggregated.scaling import ScalerLike, target_replicas
from lws_operator.logic.disaggregated.slices import revision_label
from lws_operator.logic.disaggregated.status import is_available, role_statuses
from lws_operator.logic.identity import history
from lws_operator.logic.identity.writes import apply_merge_patch

Obj = Mapping[str, Any]
DS = Obj | DisaggregatedSetView
# A revision's name: ``<set name, at most this long>-<key>-<number>`` (a name is at most 253).
_NAME_LIMIT: Final = 220


def key_of(revision: Obj | None) -> str:
    """The set revision a ControllerRevision records ('' when it carries none)."""
    return str(labels(revision).get(REVISION_LABEL) or "")


def revision_name(ds_name: str, key: str, number: int) -> str:
    return f"{ds_name[:_NAME_LIMIT]}-{key}-{number}"


def revision_data(ds: DS) -> dict[str, Any]:
    """What a revision stores: the roles as the revision hash covers them."""
    return {"roles": copy.deepcopy(revision_input(DisaggregatedSetView.of(ds).roles))}


def stored_roles(revision: Obj) -> list[dict[str, Any]]:
    """The role entries a revision stores (none when its data is not ours)."""
    roles = (revision.get("data") or {}).get("roles")
    if not isinstance(roles, list):
        return []
    return [dict(r) for r in roles if isinstance(r, Mapping) and r.get("name")]


def owned(ds: DS, revisions: Iterable[Obj]) -> list[Obj]:
    """The revisions ``ds`` controls (its UID in their controller ownerReference) that carry a
    key: the cache lists by name label, which anyone can write."""
    uid = DisaggregatedSetView.of(ds).uid
    return [r for r in revisions if controlled_by(r, uid) and key_of(r)]


def controller_revision(ds: DS, key: str, revisions: Iterable[Obj],
                        fully_ready_at: str | None = None) -> dict[str, Any]:
    """A ControllerRevision of ``ds``'s current roles under ``key``, numbered one above the
    highest of ``revisions``, with the set's change cause, and ``fully_ready_at`` when the set
    is fully Ready on it already (a set recorded for the first time at rest)."""
    view = DisaggregatedSetView.of(ds)
    number = 1 + max((history.number(r) for r in revisions), default=0)
    annotations: dict[str, str] = {}
    cause = history.change_cause(view.raw)
    if cause is not None:
        annotations[CHANGE_CAUSE_ANNOTATION] = cause
    if fully_ready_at is not None:
        annotations[FULLY_READY_ANNOTATION] = fully_ready_at
    metadata: dict[str, Any] = {
        "name": revision_name(view.name, key, number),
        "namespace": view.namespace,
        "labels": {NAME_LABEL: view.name, REVISION_LABEL: key},
        "ownerReferences": [owner_reference(view)],
    }
    if annotations:
        metadata["annotations"] = annotations
    return {"apiVersion": "apps/v1", "kind": "ControllerRevision", "metadata": metadata,
            "data": revision_data(view), "revision": number}


def rollout_done(lws_objects: Iterable[Obj], rev: str) -> bool:
    """Whether no owned child of another revision than ``rev`` is left (the coordinated rollout
    deletes a revision's children once it drained them): no revision but ``rev`` runs."""
    return all(revision_label(lws) == rev for lws in lws_objects)


def fully_ready(ds: DS, lws_objects: Iterable[Obj], rev: str,
                scalers: Mapping[str, ScalerLike]) -> bool:
    """Whether the set is fully Ready on ``rev``: the rollout to it done, every role at its
    wanted groups in every slice, all Ready and at ``rev`` (the status's Available), with a
    group at least (a set at 0 proves nothing of its templates)."""
    view = DisaggregatedSetView.of(ds)
    children = list(lws_objects)
    available = is_available(view, scalers, role_statuses(view, children, rev))
    groups = sum(target_replicas(role, scalers, 0) for role in view.roles) * view.slices
    return history.fully_ready(rollout_done(children, rev) and available, groups)


@dataclass(frozen=True)
class HistoryDecision:
    """This pass's writes of the history: the revision to create, or the cached current one
    with the merge patch bringing it up to date; the revisions to delete, oldest first."""

    create: dict[str, Any] | None = None
    update: tuple[Obj, dict[str, Any]] | None = None
    prune: tuple[Obj, ...] = ()


def decide(ds: DS, revisions: Iterable[Obj], lws_objects: Iterable[Obj], rev: str,
           scalers: Mapping[str, ScalerLike], now: str) -> HistoryDecision:
    """The history writes for the set ``ds`` targeting ``rev``: its owned ``revisions`` and
    owned children ``lws_objects`` as cached. Nothing when the history is up to date."""
    mine = list(revisions)
    children = list(lws_objects)
    ready_at = now if fully_ready(ds, children, rev, scalers) else None
    done = rollout_done(children, rev)
    prune = tuple(history.to_prune(mine, rev, history.history_limit(
        DisaggregatedSetView.of(ds).raw), key_of)) if done else ()
    current = history.revision_for_key(mine, rev, key_of)
    if current is None:
        return HistoryDecision(create=controller_revision(ds, rev, mine, ready_at), prune=prune)
    patch = history.current_revision_patch(DisaggregatedSetView.of(ds).raw, mine, rev, key_of)
    mark = history.fully_ready_patch(current, ready_at) if ready_at is not None else None
    if mark is not None:
        patch = apply_merge_patch(patch or {}, mark)
    return HistoryDecision(update=(current, patch) if patch else None, prune=prune)


# ------------------------------------------------------------------------------- undo


def _default_absent(spec: Mapping[str, Any], field: str) -> bool:
    """Whether the immutable ``field`` says what absent says (the hash leaves it out)."""
    value = spec.get(field)
    return value is None or value == IMMUTABLE_SPEC_FIELDS[field]


def roles_restored(ds: DS, revision: Obj) -> list[dict[str, Any]]:
    """``spec.roles`` with the roles ``revision`` stores written back, in its order: each
    role's ``leaderWorkerTemplate`` and immutable fields as stored; everything the revision does
    not cover (replicas, scaling, the rollout strategy, metadata) kept from the live role of that
    name. A role the set no longer has comes back with its stored fields alone, at 0 groups when
    every Static role of the set is at 0 (the API's rule: all or none), else the default."""
    view = DisaggregatedSetView.of(ds)
    live = {role.name: role.raw for role in view.roles}
    static = [role for role in view.roles if not role.external]
    all_zero = bool(static) and all(role.replicas == 0 for role in static)
    out = []
    for entry in stored_roles(revision):
        name = str(entry["name"])
        role = copy.deepcopy(dict(live.get(name) or {"name": name}))
        spec = dict(role.get("spec") or {})
        if name not in live and all_zero:
            spec["replicas"] = 0
        spec["leaderWorkerTemplate"] = copy.deepcopy(entry.get("template"))
        if spec["leaderWorkerTemplate"] is None:
            del spec["leaderWorkerTemplate"]
        for field in IMMUTABLE_SPEC_FIELDS:
            if field in entry:
                spec[field] = copy.deepcopy(entry[field])
            elif not _default_absent(spec, field):
                del spec[field]
        role["spec"] = spec
        out.append(role)
    return out
