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
  as ``revision.revision_input`` writes it: what an undo writes back
  (``logic.disaggregated.revision_data``, which ``kubectl lws`` shares). For our own keys the key
  is the hash of exactly these roles.
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

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.api.constants import CHANGE_CAUSE_ANNOTATION, FULLY_READY_ANNOTATION
from lws_operator.api.disaggregated import NAME_LABEL, REVISION_LABEL, DisaggregatedSetView
from lws_operator.logic.disaggregated.children import owner_reference
from lws_operator.logic.disaggregated.revision_data import key_of, revision_data, revision_name
from lws_operator.logic.disaggregated.scaling import ScalerLike, target_replicas
from lws_operator.logic.disaggregated.slices import revision_label
from lws_operator.logic.disaggregated.status import is_available, role_statuses
from lws_operator.logic.identity import history
from lws_operator.logic.identity.writes import apply_merge_patch

Obj = Mapping[str, Any]
DS = Obj | DisaggregatedSetView


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
