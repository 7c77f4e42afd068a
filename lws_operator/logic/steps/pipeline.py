"""One pass over a LeaderWorkerSet, both group identities, as an ordered list of steps.

The order of upstream's Reconcile (leaderworkerset_controller.go), with the pod controller's work
folded in (docs/architecture.md: every child event wakes the
owning set): failures first (a recreation ends the pass), Parallel termination, the revision,
the leader owner's rollout or admission (``logic.steps.leader``: a StatefulSet for Ordinal
groups, a Deployment for Hash groups), the scheduler provider (``logic.providers``), the leader
owner itself, retained pods released, Hash admission, Services, worker StatefulSets, Hash
group readiness, then restart counts and status. The controller's runner builds the snapshot
before each step, carries out its plan (``kube.executor``) and stops where a plan says so.
"""

from __future__ import annotations

from collections.abc import Callable

from lws_operator.logic import providers
from lws_operator.logic.plan import EMPTY, Plan
from lws_operator.logic.snapshot import Observed
from lws_operator.logic.steps import (
    failures,
    finish,
    hash_groups,
    revision,
    services,
    termination,
    workers,
)
from lws_operator.logic.steps.leader import owner_of
from lws_operator.logic.steps.release import release_plan

Step = Callable[[Observed], Plan]


def guard(obs: Observed) -> Plan:
    return owner_of(obs).guard(obs)


def prepare(obs: Observed) -> Plan:
    return owner_of(obs).prepare(obs)


def leader_owner(obs: Observed) -> Plan:
    return owner_of(obs).apply(obs)


def release(obs: Observed) -> Plan:
    plan = owner_of(obs).release(obs)
    return release_plan(obs, plan) if plan.pods else EMPTY


STEPS: tuple[Step, ...] = (
    guard,
    failures.step,
    termination.step,
    revision.step,
    prepare,
    providers.prepare,
    providers.groups,
    providers.admit,
    leader_owner,
    release,
    hash_groups.admit,
    services.step,
    workers.step,
    hash_groups.readiness,
    finish.counts,
    finish.status,
)
