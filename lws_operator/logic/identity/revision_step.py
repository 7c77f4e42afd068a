"""Step: the current revision (upstream's Reconcile (leaderworkerset_controller.go)) in both
identity modes: the revision the leader StatefulSet or Deployment carries, created when missing,
with its Events, and brought up to date when it exists (renumbered when it became current again,
the set's change cause: ``logic.identity.history``). Its value (``Revision``) is what the later
steps of the pass are handed: the key, whether this pass is a template update, and the set's
revisions (the new one included, even when its create found it existing before the cache
did)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.logic.identity.history import current_revision_patch, revision_for_key
from lws_operator.logic.identity.revision_decision import decide_revision
from lws_operator.logic.identity.writes import revision_update
from lws_operator.logic.reconcile.plan import (
    CREATE_IF_ABSENT,
    Action,
    Common,
    Create,
    Plan,
    Planned,
    Record,
    apps,
)
from lws_operator.logic.reconcile.snapshot import Obj, Observed


@dataclass(frozen=True)
class Revision:
    """The current revision key, whether this pass is a template update (the rollout's
    ``lws_updated``), and the set's revisions."""

    key: str
    updated: bool
    revisions: tuple[Mapping[str, Any], ...]


def first(create: Mapping[str, Any] | None, live: Obj | None) -> bool:
    """Whether the revision to create is a new set's first: its leader StatefulSet (or
    Deployment) does not exist yet. The pass then does not wait for the revision's answer
    before applying the leader owner (``logic.reconcile.plan.Plan.overlap``): the first pod of
    a new set waits on that StatefulSet, and under load the revision's round trip and the other
    passes the operator ran meanwhile were a tenth to a third of a second of it
    (docs/performance.md, "The first pod"). Upstream writes the revision first; nothing reads
    it before the pass ends (later steps get it as the step's value, the worker StatefulSets
    are built from it), and a revision whose create fails fails the pass as before, the next
    pass creating it if absent. A template update keeps the order: its revision is written
    before the rollout moves anything."""
    return create is not None and live is None


def step(obs: Observed, hashed: bool) -> Planned[Revision]:
    """``hashed``: the leaders' owner is the Hash leader Deployment, else the Ordinal leader
    StatefulSet (whose key a revision must exist for, and whose workers tell whether a stored
    revision is rolled out)."""
    live: Obj | None = obs.leader_deployment if hashed else obs.leader_statefulset
    workers = list(obs.statefulsets) if hashed else obs.worker_statefulsets
    revisions = obs.own_revisions
    decision = decide_revision(obs.body, live, revisions, workers, obs.memo)
    actions: list[Action] = []
    target = apps(obs.lws.namespace, "controllerrevisions", "ControllerRevision")
    if decision.create is not None:
        actions.append(Create(target, decision.create, common=Common(policy=CREATE_IF_ABSENT)))
        revisions.append(decision.create)
    else:
        patch = current_revision_patch(obs.body, revisions, decision.current_key)
        current = revision_for_key(revisions, decision.current_key)
        if patch is not None and current is not None:
            actions.append(revision_update(obs.lws.namespace, current, patch))
    actions += [Record(event) for event in decision.events]
    # A set's first revision goes out beside its leader owner, not before it (``first``).
    return Planned(Plan(tuple(actions), overlap=first(decision.create, live)),
                   Revision(decision.current_key, decision.updated, tuple(revisions)))
