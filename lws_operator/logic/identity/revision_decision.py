"""Which revision is current, and whether this pass must create one (upstream's Reconcile
(leaderworkerset_controller.go)), and the ControllerRevision object itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.api.constants import (
    CHANGE_CAUSE_ANNOTATION,
    EVENT_ACTION_CREATE,
    EVENT_TYPE_NORMAL,
    KIND,
    NAME_LABEL,
    REASON_CREATING_REVISION,
    TEMPLATE_REVISION_HASH_LABEL,
)
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import lws_view, revision_of
from lws_operator.logic.identity.adoption import rolled_out
from lws_operator.logic.identity.history import change_cause, number, revision_for_key
from lws_operator.logic.identity.revision import (
    canonical_json,
    revision_key,
    revision_name,
    revision_patch,
    template_difference,
)
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.owners import lws_reference
from lws_operator.logic.reconcile.memo import Memo


def controller_revision(lws: LWS, key: str,
                        revisions: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """A ControllerRevision holding ``lws``'s current templates, labelled ``key``, numbered one
    above the highest existing revision, with the set's change cause
    (``logic.identity.history``)."""
    view = lws_view(lws)
    meta = view.meta
    next_number = 1 + max((number(r) for r in revisions), default=0)
    metadata: dict[str, Any] = {
        "name": revision_name(str(meta.get("name")), key, next_number),
        "namespace": meta.get("namespace"),
        "labels": {NAME_LABEL: meta.get("name"), TEMPLATE_REVISION_HASH_LABEL: key},
        "ownerReferences": [lws_reference(lws)],
    }
    cause = change_cause(view.raw)
    if cause is not None:
        metadata["annotations"] = {CHANGE_CAUSE_ANNOTATION: cause}
    return {
        "apiVersion": "apps/v1",
        "kind": "ControllerRevision",
        "metadata": metadata,
        "data": revision_patch(lws),
        "revision": next_number,
    }


@dataclass(frozen=True)
class RevisionDecision:
    """The current revision key, the revision to create first (if any), and whether this pass
    is a template update (the rollout's ``lws_updated``)."""

    current_key: str
    create: dict[str, Any] | None
    updated: bool
    events: tuple[Event, ...] = ()


def _template_difference(lws: LWS, stored: Mapping[str, Any]) -> str | None:
    """Where the stored revision and ``lws``'s templates differ; None when it describes them:
    identical bytes, or the same templates however each was written (another controller's
    JSON, ``logic.identity.template_form``)."""
    patch = stored.get("data") or {}
    if canonical_json(patch) == canonical_json(revision_patch(lws)):
        return None
    return template_difference(lws, dict(patch))


def _revision_event(note: str) -> Event:
    return Event(REASON_CREATING_REVISION, EVENT_TYPE_NORMAL, EVENT_ACTION_CREATE, note)


def decide_revision(lws: LWS, leader_sts: Mapping[str, Any] | None,
                    revisions: list[Mapping[str, Any]],
                    workers: Iterable[Mapping[str, Any]] = (),
                    memo: Memo | None = None) -> RevisionDecision:
    """Upstream's Reconcile (leaderworkerset_controller.go): ensure a revision exists for the
    leader StatefulSet's key, then detect
    a template update against it. ``leader_sts`` is the leader StatefulSet (or Deployment),
    ``workers`` the worker StatefulSets, which tell whether the key is rolled out completely.
    ``memo`` keeps the hashing of the templates for the same ``lws`` object
    (``logic.reconcile.memo``)."""
    memo = memo or Memo()
    view = lws_view(lws)
    computed = memo.get("revision_key", (lws,), lambda: revision_key(view))
    sts_key = revision_of(leader_sts)
    if leader_sts is None or not sts_key:
        if revision_for_key(revisions, computed) is not None:
            return RevisionDecision(computed, None, False)
        note = f"Creating revision with key {computed} for a newly created {KIND}"
        return RevisionDecision(computed, controller_revision(view, computed, revisions), False,
                                (_revision_event(note),))
    stored = revision_for_key(revisions, sts_key)
    if stored is None:
        # A leader StatefulSet whose revision is gone (or made by another hash algorithm):
        # record the current templates under its key, as upstream does.
        note = f"Creating missing revision with key {sts_key} for existing {KIND}"
        return RevisionDecision(sts_key, controller_revision(view, sts_key, revisions), False,
                                (_revision_event(note),))
    difference = memo.get("template_difference", (lws, stored),
                          lambda: _template_difference(view, stored))
    if difference is None:
        return RevisionDecision(sts_key, None, False)
    if rolled_out(view, sts_key, leader_sts, workers):
        # The previous controller rolled this very spec out (logic.identity.adoption): the stored
        # revision is another rendering of the live templates. Record them under its key (the
        # highest revision of a key is the one used), so later passes compare exactly.
        note = (f"Creating revision with key {sts_key} for the rolled-out templates of existing "
                f"{KIND} (stored differently at {difference})")
        return RevisionDecision(sts_key, controller_revision(view, sts_key, revisions), False,
                                (_revision_event(note),))
    if revision_for_key(revisions, computed) is not None:
        return RevisionDecision(computed, None, True)  # e.g. back to an earlier template
    note = f"Creating revision with key {computed} for updated LWS"
    return RevisionDecision(computed, controller_revision(view, computed, revisions), True,
                            (_revision_event(note),))
