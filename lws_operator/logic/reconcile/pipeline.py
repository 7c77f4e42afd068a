"""One pass over a LeaderWorkerSet, both group identities, as an ordered list of steps.

The order of upstream's Reconcile (leaderworkerset_controller.go), with the pod controller's work
folded in (docs/architecture.md: every child event wakes the
owning set): failures first (a recreation ends the pass), Parallel termination, the revision,
the leader owner's rollout or admission (``logic.rollout.leader_step``: a StatefulSet for Ordinal
groups, a Deployment for Hash groups), the scheduler provider (``logic.placement.providers``), the
leader owner itself, retained pods released, Hash admission, Services, worker StatefulSets, Hash
group readiness, the recreation of pods the pod webhook never saw (``logic.mutation.recreation``),
then restart counts and status. The controller's runner builds the snapshot
before each step, carries out its plan (``kube.executor``) and stops where a plan says so.

Some steps plan nothing for a whole class of sets, known from the set's spec and the operator's
options alone: the scheduler provider's hooks without a provider, the Hash-only steps for an
Ordinal set, Parallel termination for a Sequential one. ``NEEDED`` says which, and the runner
skips such a step, snapshot and all, where ``needed`` says so (a fifth of an Ordinal pass
without a provider was those steps' snapshots and their early returns).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from lws_operator.api.view import lws_view
from lws_operator.logic.failures import failures_step as failures
from lws_operator.logic.failures import termination_step as termination
from lws_operator.logic.failures.release_step import release_plan
from lws_operator.logic.failures.termination import parallel
from lws_operator.logic.identity import hash_groups_step as hash_groups
from lws_operator.logic.identity import revision_step as revision
from lws_operator.logic.mutation import recreate_step as recreate
from lws_operator.logic.placement import providers
from lws_operator.logic.reconcile import finish_step as finish
from lws_operator.logic.reconcile.plan import EMPTY, Plan
from lws_operator.logic.reconcile.snapshot import Observed, Options
from lws_operator.logic.rollout.leader_step import owner_of
from lws_operator.logic.workloads import services_step as services
from lws_operator.logic.workloads import workers_step as workers

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
    recreate.step,
    finish.counts,
    finish.status,
)


def _hashed(body: Mapping[str, Any], _options: Options) -> bool:
    return lws_view(body).hashed


def _parallel(body: Mapping[str, Any], _options: Options) -> bool:
    return parallel(body)


# Per step that can be skipped: whether a set of this spec, under these options, needs it. Each
# is the step's own first test, so a set it answers False for gets an empty plan from the step
# whatever else is observed (``tests/unit/test_step_skips.py`` runs every step of passes over
# sets of every configuration and fails if one skipped would have planned anything).
NEEDED: Final[Mapping[Step, Callable[[Mapping[str, Any], Options], bool]]] = {
    termination.step: _parallel,  # ``termination.worker_sets_to_stop``: [] unless Parallel
    providers.prepare: providers.scheduled,  # the ``none`` provider plans nothing
    providers.groups: providers.scheduled,
    providers.admit: providers.scheduled,
    hash_groups.admit: _hashed,  # "empty plans for Ordinal sets"
    hash_groups.readiness: _hashed,
}


def needed(step: Step, body: Mapping[str, Any] | None, options: Options) -> bool:
    """Whether ``step`` may plan anything for the set ``body`` (its spec, as the step's
    snapshot will hold it) under ``options``; None (the set gone) decides nothing here."""
    when = NEEDED.get(step)
    return when is None or body is None or when(body, options)


def skipped(body: Mapping[str, Any], options: Options) -> frozenset[Step]:
    """The steps ``needed`` answers False for, for the set ``body`` under ``options`` (the
    controller keeps the answer while the set object and the options are the same)."""
    return frozenset(step for step, when in NEEDED.items() if not when(body, options))
