"""``kubectl lws rollout history`` and ``undo`` of a DisaggregatedSet without the API: its
revision history as rows, the revision an undo goes to, and the patch it writes.

The controller keeps the history (``logic.disaggregated.history``): one ControllerRevision per
set revision, holding the roles as the revision hash covers them, numbered, caused and marked as
a LeaderWorkerSet's. The table, the choice of the previous revision and the refusals are the
LeaderWorkerSet's (``plugin.analysis.revision_history``); what differs is how a revision is read:
its key is the set's revision label, and the revision the set runs now is the one whose stored
roles are the live ones, compared in normal form (``logic.identity.template_form``), so a
revision recorded under the key of children taken over from the upstream controller is read
right too.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from lws_operator.api.constants import CHANGE_CAUSE_ANNOTATION
from lws_operator.api.disaggregated import DisaggregatedSetView
from lws_operator.logic.disaggregated import revision_data
from lws_operator.logic.disaggregated.revision import compute_revision, revision_input
from lws_operator.logic.identity import history
from lws_operator.logic.identity.template_form import equal, normal_form
from lws_operator.plugin.analysis.revision_history import Row, UndoChoice, choose, rows_of

Obj = Mapping[str, Any]


def owned(ds: Obj, revisions: Iterable[Obj]) -> list[Obj]:
    """The set's own revisions, not being deleted, newest first."""
    return history.ordered(revision_data.owned(ds, revisions))


def running(ds: Obj, mine: Iterable[Obj]) -> Obj | None:
    """The highest-numbered revision holding the set's live roles; None when none does yet (the
    controller has not recorded a change just made)."""
    view = DisaggregatedSetView.of(ds)
    key = compute_revision(view)
    live = normal_form(revision_input(view.roles))
    for revision in history.ordered(mine):
        if revision_data.key_of(revision) == key or equal(
                normal_form(revision_data.stored_roles(revision)), live):
            return revision
    return None


def rows(ds: Obj, revisions: Iterable[Obj]) -> list[Row]:
    """The history, oldest first, the current revision marked."""
    mine = owned(ds, revisions)
    return rows_of(mine, running(ds, mine), revision_data.key_of)


def roles(revision: Obj) -> dict[str, Any]:
    """What a revision stores, as ``--revision=N`` shows it: each role's name, its
    ``leaderWorkerTemplate`` and the immutable fields it sets."""
    return {"roles": copy.deepcopy(revision_data.stored_roles(revision))}


def undo_target(ds: Obj, revisions: Iterable[Obj], to_revision: int | None) -> UndoChoice:
    """The revision an undo goes to: ``to_revision`` (its number), else the previous one (the
    highest-numbered whose roles are not the live ones). Raises ``NoSuchRevision`` when there is
    none, naming the revisions kept."""
    mine = owned(ds, revisions)
    return choose(mine, running(ds, mine), to_revision,
                  f'DisaggregatedSet "{DisaggregatedSetView.of(ds).name}"', revision_data.key_of)


def undo_patch(ds: Obj, revision: Obj) -> dict[str, Any]:
    """The merge patch writing ``revision``'s roles back onto ``ds`` (``spec.roles`` whole:
    ``logic.disaggregated.history.roles_restored`` keeps what the revision does not cover),
    guarded by the resourceVersion read, with the set's change cause set to the revision's
    (removed when it recorded none)."""
    view = DisaggregatedSetView.of(ds)
    body: dict[str, Any] = {"metadata": {"resourceVersion": view.resource_version},
                            "spec": {"roles": revision_data.roles_restored(view, revision)}}
    cause = history.change_cause(revision)
    if cause != history.change_cause(view.raw):
        body["metadata"]["annotations"] = {CHANGE_CAUSE_ANNOTATION: cause}
    return body
