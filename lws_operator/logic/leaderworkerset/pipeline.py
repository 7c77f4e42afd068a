"""One pass over a LeaderWorkerSet, both group identities, as one function read top to bottom.

The order of upstream's Reconcile (leaderworkerset_controller.go), with the pod controller's work
folded in (docs/architecture.md: every child event wakes the owning set): failures first (a
recreation ends the pass), Parallel termination, the revision, the leader owner's rollout or
admission (``logic.rollout.leader_step``: a StatefulSet for Ordinal groups, a Deployment for Hash
groups), the scheduler provider (``logic.providers``), the leader owner itself,
retained pods released, Hash admission, Services, worker StatefulSets, Hash group readiness, the
recreation of pods the pod webhook never saw (``logic.mutation.recreate_step``), then restart
counts and status.

``reconcile`` awaits ``run(step, *values)`` for each step (``controllers.passes``): the runner
builds the step's snapshot, carries out its plan, and hands back what the step decided for the
later ones, which ``reconcile`` passes to them as arguments; where a plan ends the pass, ``run``
does not return. A step that plans nothing for a whole class of sets, known from the set's spec
and the operator's options alone (``Configuration``), is not run at all, snapshot and all (building
a snapshot for a step to return early was a visible part of a pass): the ``if`` in front of it
says when. ``tests/unit/logic/leaderworkerset/test_step_skips.py`` runs those steps anyway over sets
of every configuration and fails if one skipped would have planned anything.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.api.view import lws_view
from lws_operator.logic import providers
from lws_operator.logic.failures import failures_step as failures
from lws_operator.logic.failures import termination_step as termination
from lws_operator.logic.failures.termination import parallel
from lws_operator.logic.hash_mode import hash_groups_step as hash_groups
from lws_operator.logic.hash_mode.hash_groups import Admission
from lws_operator.logic.identity import revision_step as revision
from lws_operator.logic.leaderworkerset import finish_step as finish
from lws_operator.logic.mutation import recreate_step as recreate
from lws_operator.logic.reconcile.plan import Run, earliest
from lws_operator.logic.reconcile.snapshot import Observed, Options
from lws_operator.logic.rollout.deadline import OFF
from lws_operator.logic.rollout.leader_step import HASH, ORDINAL, Rollout
from lws_operator.logic.workloads import services_step as services
from lws_operator.logic.workloads import workers_step as workers


@dataclass(frozen=True)
class Configuration:
    """What decides which steps a pass over the set runs: the group identity, Parallel
    termination, and the scheduler provider (None: the default scheduler, which plans nothing).
    Read from the set's spec (fields the webhook keeps immutable: ``groupIdentity``,
    ``podTerminationPolicy``, whether ``spec.scheduling`` is there) and the operator's options
    (fixed at its start), so the controller reads it once per pass, at its start."""

    hashed: bool
    parallel: bool
    provider: providers.Provider | None


def configuration(body: Mapping[str, Any], options: Options) -> Configuration:
    return Configuration(lws_view(body).hashed, parallel(body),
                         providers.scheduled(body, options))


async def reconcile(run: Run[Observed], config: Configuration,
                    may_recreate: Callable[[], bool]) -> None:
    """One pass over a set of ``config`` (module docstring). ``may_recreate``: whether the set
    has pods the webhook never saw or remembers a recreation of them (nearly never; asked where
    the recreation step stands, without a snapshot)."""
    if not config.hashed:
        await run(ORDINAL.guard)  # a leader StatefulSet being deleted: ends the pass
    backoff = await run(failures.step)  # a recreation or an exhausted group ends the pass
    if config.parallel:
        await run(termination.step)
    current = await run(revision.step, config.hashed)  # the key, update or not, the revisions
    key = current.key

    # What the leaders' owner decides before anything is scheduled.
    rollout: Rollout | None = None
    admission: Admission | None = None
    if config.hashed:
        admission = await run(HASH.prepare, key)  # the gated leaders that may go
    else:
        rollout = await run(ORDINAL.prepare, current)  # partition, replicas, deadline

    # The scheduler provider: each step may end the pass (the pods must wait).
    scheduling = None
    if config.provider is not None:
        await run(config.provider.prepare)
        await run(config.provider.groups)
        scheduling = await run(config.provider.admit, admission)  # the condition's facts

    # The leaders' owner, then the retained pods it lets go (which ends the pass).
    if rollout is not None:
        await run(ORDINAL.apply, key, rollout)
        await run(ORDINAL.release, key, rollout)
    if admission is not None:
        await run(HASH.apply, key)
        await run(HASH.release, key)
        await run(hash_groups.admit, admission)

    await run(services.step)
    missing = await run(workers.step, current.revisions)  # a revision not cached yet: requeue
    if config.hashed:
        await run(hash_groups.readiness)
    recreating = recreate.NOTHING
    if may_recreate():
        recreating = await run(recreate.step)

    if not config.hashed:  # Hash sets move their counts as they admit leaders
        await run(finish.counts, key)
    await run(finish.status, HASH if config.hashed else ORDINAL, key, current.revisions,
              deadline=rollout.deadline if rollout is not None else OFF,
              scheduling=scheduling, recreating=recreating.state,
              requeue=earliest(backoff, recreating.requeue, missing))
