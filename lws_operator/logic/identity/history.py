"""Revision history: which ControllerRevisions of a set are kept, how they are numbered, and what
each records beyond its templates (beyond upstream, which keeps only the current and the update
revision and deletes the others once an update is done).

* **Kept**: the current revision (every revision carrying the current key) and at most
  ``lws-operator.dev/revision-history-limit`` others (default 10), the highest-numbered ones; the
  rest are deleted oldest first, and only once an update is done, so no revision a group still
  runs on is ever deleted (an update in progress may run groups of several older revisions).
  The limit counts the revisions other than the current one, as a Deployment's
  ``revisionHistoryLimit`` counts its old ReplicaSets: ``0`` keeps none, upstream's behaviour.
* **Numbered** as a Deployment's revisions: ``.revision`` is one above the highest when a
  revision is created, and a revision that becomes current again (the templates put back to an
  earlier revision's, by ``kubectl lws rollout undo``, a rollback or by hand) is renumbered one
  above the highest, so the numbers say in which order revisions were last current, and the
  previous revision is always the second highest.
* **Change cause**: the set's ``kubernetes.io/change-cause`` (as ``kubectl annotate`` or
  ``--record`` writes it) is copied onto the revision when it is created, and follows the set's
  while the revision is current, as a Deployment's annotation follows onto its newest
  ReplicaSet: ``kubectl set image`` then ``kubectl annotate ... change-cause=...`` records the
  cause on the revision the image change made. A set without the annotation removes nothing.
* **Ever fully Ready**: ``lws-operator.dev/fully-ready-at``, the time the operator first saw the
  set's update to the revision done (every group updated and Ready, no user partition), written
  once. The progress deadline's rollback reads it (``logic.rollout.deadline.last_fully_ready``)
  and ``kubectl lws rollout history`` shows it.

Every decision is derived from the objects on each pass, so a restarted operator, a new leader
or a set handed over from the upstream controller (which deletes every revision but the current
and the update one, and knows none of these annotations) is decided the same way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lws_operator.api.constants import (
    CHANGE_CAUSE_ANNOTATION,
    DEFAULT_REVISION_HISTORY_LIMIT,
    FULLY_READY_ANNOTATION,
    MAX_INT32,
    REVISION_HISTORY_LIMIT_ANNOTATION,
)
from lws_operator.api.view import deleting, metadata, revision_of

# How a revision's key is read: the LeaderWorkerSet's ``template-revision-hash`` label by
# default; a DisaggregatedSet's revisions carry its own revision label
# (``logic.disaggregated.history``), and every rule here holds for both.
KeyOf = Callable[[Mapping[str, Any] | None], str]


def number(revision: Mapping[str, Any]) -> int:
    """The ``.revision`` number of a ControllerRevision (0 when missing or not an integer)."""
    value = revision.get("revision")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _annotations(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return metadata(obj).get("annotations") or {}


def history_limit(lws: Mapping[str, Any]) -> int:
    """How many revisions besides the current one ``lws`` keeps: the annotation when it is a
    whole number (the webhook refuses anything else), else the default."""
    raw = _annotations(lws).get(REVISION_HISTORY_LIMIT_ANNOTATION)
    if isinstance(raw, str) and raw.isdigit() and int(raw) <= MAX_INT32:
        return int(raw)
    return DEFAULT_REVISION_HISTORY_LIMIT


def change_cause(obj: Mapping[str, Any] | None) -> str | None:
    """The ``kubernetes.io/change-cause`` of a set or a revision, None when absent or empty."""
    value = _annotations(obj).get(CHANGE_CAUSE_ANNOTATION)
    return str(value) if value else None


def fully_ready_at(revision: Mapping[str, Any]) -> str | None:
    """When the set was first seen fully Ready on ``revision``, None when it never was (or the
    revision predates the record: the upstream controller's and earlier releases' carry none)."""
    value = _annotations(revision).get(FULLY_READY_ANNOTATION)
    return str(value) if value else None


def revision_for_key(revisions: Iterable[Mapping[str, Any]], key: str,
                     key_of: KeyOf = revision_of) -> Mapping[str, Any] | None:
    """The revision labelled with ``key`` (the highest ``revision`` number if several)."""
    matching = [r for r in revisions if key_of(r) == key]
    return max(matching, key=number, default=None)


def ordered(revisions: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The revisions not being deleted, newest (highest number) first; ties by name."""
    alive = [r for r in revisions if not deleting(r)]
    return sorted(alive, key=lambda r: (-number(r), str(metadata(r).get("name") or "")))


def to_prune(revisions: Iterable[Mapping[str, Any]], current_key: str,
             limit: int, key_of: KeyOf = revision_of) -> list[Mapping[str, Any]]:
    """The revisions beyond the history limit, oldest first: of those not carrying
    ``current_key``, all but the ``limit`` highest-numbered. Call only once an update is done
    (no group runs on another revision)."""
    others = [r for r in ordered(revisions) if key_of(r) != current_key]
    return list(reversed(others[limit:]))


def current_revision_patch(lws: Mapping[str, Any], revisions: Iterable[Mapping[str, Any]],
                           current_key: str, key_of: KeyOf = revision_of,
                           ) -> dict[str, Any] | None:
    """The merge patch bringing the current revision up to date, or None when it is: numbered
    above every other revision (it became current again) and carrying the set's change cause."""
    revisions = list(revisions)
    current = revision_for_key(revisions, current_key, key_of)
    if current is None or deleting(current):
        return None
    patch: dict[str, Any] = {}
    highest_other = max((number(r) for r in revisions
                         if r is not current and key_of(r) != current_key), default=0)
    if number(current) <= highest_other:
        patch["revision"] = highest_other + 1
    cause = change_cause(lws)
    if cause is not None and change_cause(current) != cause:
        patch["metadata"] = {"annotations": {CHANGE_CAUSE_ANNOTATION: cause}}
    return patch or None


def fully_ready_patch(revision: Mapping[str, Any] | None, now: str) -> dict[str, Any] | None:
    """The merge patch recording on ``revision`` that the set is fully Ready on it now, or None
    when it is recorded already (the first time is kept)."""
    if revision is None or deleting(revision) or fully_ready_at(revision) is not None:
        return None
    return {"metadata": {"annotations": {FULLY_READY_ANNOTATION: now}}}


def fully_ready(update_done: bool, replicas: int) -> bool:
    """Whether the set is fully Ready on its current revision: its update is done (every group
    updated and Ready, no user partition: ``logic.status.set_status``) with at least one group
    (a set scaled to zero proves nothing of its templates)."""
    return update_done and replicas >= 1
