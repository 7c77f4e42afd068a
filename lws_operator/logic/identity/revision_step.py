"""Step: the current revision (upstream's Reconcile (leaderworkerset_controller.go)) in both
identity modes: the revision the
leader StatefulSet or Deployment carries, created when missing, with its Events. The key, whether
this pass is a template update, and the set's revisions (the new one included, even when its
create found it existing before the cache did) go to the later steps."""

from __future__ import annotations

from dataclasses import replace

from lws_operator.logic.reconcile.decisions import decide_revision
from lws_operator.logic.reconcile.plan import (
    CREATE_IF_ABSENT,
    Action,
    Common,
    Create,
    Plan,
    Record,
    apps,
)
from lws_operator.logic.reconcile.snapshot import Observed
from lws_operator.logic.rollout.leader_step import owner_of


def step(obs: Observed) -> Plan:
    owner = owner_of(obs)
    revisions = obs.own_revisions
    decision = decide_revision(obs.body, owner.live(obs), revisions, owner.workers(obs),
                               obs.memo)
    actions: list[Action] = []
    if decision.create is not None:
        actions.append(Create(apps(obs.lws.namespace, "controllerrevisions", "ControllerRevision"),
                              decision.create, common=Common(policy=CREATE_IF_ABSENT)))
        revisions.append(decision.create)
    actions += [Record(event) for event in decision.events]
    return Plan(tuple(actions), carry=replace(obs.decided, key=decision.current_key,
                                              updated=decision.updated,
                                              revisions=tuple(revisions)))

