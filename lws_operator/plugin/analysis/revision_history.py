"""``kubectl lws rollout history`` and ``undo`` without the API: the history table of a
LeaderWorkerSet's ControllerRevisions, the revision an undo goes to, and the patch it writes.

The operator keeps the revisions (``logic.identity.history``): numbered as a Deployment's, the
change cause copied from the set, the time the set was first fully Ready on each. The revision
the set runs now is the one whose templates are the live ones, compared as the controller
compares them (``logic.identity.revision.template_difference``: the same templates however each
was written), so a set whose revisions another controller wrote is read right too.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.api.constants import CHANGE_CAUSE_ANNOTATION
from lws_operator.api.view import lws_view, metadata, revision_of
from lws_operator.logic.identity import history
from lws_operator.logic.identity.revision import restore_spec_patch, template_difference


@dataclass(frozen=True)
class Row:
    """One revision as the history lists it."""

    number: int
    key: str
    name: str
    created: str
    cause: str | None
    fully_ready_at: str | None
    current: bool

    def as_data(self) -> dict[str, Any]:
        return {"revision": self.number, "hash": self.key, "name": self.name,
                "created": self.created, "changeCause": self.cause,
                "everFullyReady": self.fully_ready_at is not None,
                "fullyReadyAt": self.fully_ready_at, "current": self.current}


def owned(lws: Mapping[str, Any],
          revisions: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The revisions ``lws`` controls (its UID in their owner references), not being deleted."""
    uid = metadata(lws).get("uid")
    return [r for r in history.ordered(revisions)
            if any(ref.get("uid") == uid and ref.get("controller")
                   for ref in metadata(r).get("ownerReferences") or [])]


def running(lws: Mapping[str, Any], revisions: Iterable[Mapping[str, Any]]
            ) -> Mapping[str, Any] | None:
    """The highest-numbered revision holding ``lws``'s live templates, None when none does yet
    (the controller has not recorded a change just made)."""
    for revision in history.ordered(revisions):
        if template_difference(lws, dict(revision.get("data") or {})) is None:
            return revision
    return None


def rows(lws: Mapping[str, Any], revisions: Iterable[Mapping[str, Any]]) -> list[Row]:
    """The history, oldest first as ``kubectl rollout history`` lists it."""
    mine = owned(lws, revisions)
    return rows_of(mine, running(lws, mine))


def rows_of(mine: list[Mapping[str, Any]], current: Mapping[str, Any] | None,
            key_of: history.KeyOf = revision_of) -> list[Row]:
    """The rows of a set's own revisions ``mine`` (newest first, as ``owned`` lists them),
    oldest first, ``current`` marked; a revision's key read by ``key_of`` (a
    DisaggregatedSet's revisions carry their own label: ``plugin.analysis.ds_history``)."""
    return [Row(history.number(r), key_of(r), str(metadata(r).get("name") or ""),
                str(metadata(r).get("creationTimestamp") or ""), history.change_cause(r),
                history.fully_ready_at(r), r is current)
            for r in reversed(mine)]


def table(entries: list[Row]) -> str:
    """The history as a table for people: the current revision marked, a cause or ``<none>``."""
    header = ("REVISION", "HASH", "CREATED", "EVER-FULLY-READY", "CHANGE-CAUSE")
    lines = [header] + [(f"{e.number}{' (current)' if e.current else ''}", e.key, e.created,
                         f"yes, {e.fully_ready_at}" if e.fully_ready_at else "no",
                         e.cause or "<none>") for e in entries]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header) - 1)]
    return "".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=False))
                   + "  " + line[-1] + "\n" for line in lines)


def templates(revision: Mapping[str, Any]) -> dict[str, Any]:
    """What a revision stores, as the set's spec writes it: ``leaderWorkerTemplate`` and
    ``networkConfig`` without the ``$patch`` directives of the stored patch."""
    spec = dict((revision.get("data") or {}).get("spec") or {})
    out: dict[str, Any] = {}
    for field in ("leaderWorkerTemplate", "networkConfig"):
        if isinstance(spec.get(field), Mapping):
            value = copy.deepcopy(dict(spec[field]))
            value.pop("$patch", None)
            out[field] = value
    return out


class NoSuchRevision(LookupError):
    """The revision asked for is not in the history (pruned, or never made); the message says
    which are."""


@dataclass(frozen=True)
class UndoChoice:
    """Where an undo goes: ``target``, or nothing to do (``already``: the set runs it)."""

    target: Mapping[str, Any]
    already: bool


def kept(revisions: Iterable[Mapping[str, Any]]) -> str:
    """The numbers of the revisions kept, for a refusal's message."""
    found = sorted({history.number(r) for r in revisions})
    return ", ".join(str(n) for n in found) if found else "none"


def undo_target(lws: Mapping[str, Any], revisions: Iterable[Mapping[str, Any]],
                to_revision: int | None) -> UndoChoice:
    """The revision ``kubectl lws rollout undo`` goes to: ``to_revision`` (its number), else the
    previous one: the highest-numbered revision whose templates are not the live ones. Raises
    NoSuchRevision when there is none."""
    mine = owned(lws, revisions)
    return choose(mine, running(lws, mine), to_revision,
                  f'LeaderWorkerSet "{lws_view(lws).name}"')


def choose(mine: list[Mapping[str, Any]], current: Mapping[str, Any] | None,
           to_revision: int | None, what: str,
           key_of: history.KeyOf = revision_of) -> UndoChoice:
    """``undo_target`` over a set's own revisions ``mine`` (newest first) of which ``current``
    runs, for either kind of set (``what`` names it in the refusals)."""
    if to_revision:
        target = next((r for r in mine if history.number(r) == to_revision), None)
        if target is None:
            raise NoSuchRevision(
                f"revision {to_revision} of {what} does not exist (pruned beyond the history "
                f"limit, or never made); revisions kept: {kept(mine)}")
        same = current is not None and key_of(target) == key_of(current)
        return UndoChoice(target, same)
    current_key = key_of(current) if current is not None else None
    previous = next((r for r in mine if key_of(r) != current_key), None)
    if previous is None:
        raise NoSuchRevision(f"{what} has no previous revision to undo to; "
                             f"revisions kept: {kept(mine)}")
    return UndoChoice(previous, False)


def undo_patch(lws: Mapping[str, Any], revision: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch writing ``revision``'s templates back onto ``lws``, guarded by its
    resourceVersion (a set changed meanwhile is refused, not overwritten), with the set's change
    cause set to the revision's (removed when it recorded none), so the controller's copy of the
    cause onto the current revision keeps the revision's own."""
    view = lws_view(lws)
    body: dict[str, Any] = {"metadata": {"resourceVersion": view.resource_version},
                            "spec": restore_spec_patch(view.raw, dict(revision.get("data") or {}))}
    cause = history.change_cause(revision)
    if cause != history.change_cause(view.raw):
        body["metadata"]["annotations"] = {CHANGE_CAUSE_ANNOTATION: cause}
    return body
