"""The progress deadline in a pass (``logic.rollout.deadline``), Ordinal groups: decided in the
leader owner's ``prepare`` (``logic.rollout.leader_step``), before the rollout's partition is
applied, so an exceeded deadline holds the partition and surge this very pass; the status step
overlays its condition and requeues the pass at the deadline. With the rollback opt-in, an exceeded
deadline writes the templates of the last fully Ready revision instead, and ends the pass: the next
one, which the plan asks for at once (``RESUME_NOW``), starts the rollout back. Without such a
revision the rollout stays held, and the condition says why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from lws_operator.logic.objects.meta import epoch_seconds
from lws_operator.logic.reconcile.plan import (
    CONFLICT_STOPS,
    Common,
    Patch,
    Plan,
    lws_target,
)
from lws_operator.logic.reconcile.snapshot import Observed
from lws_operator.logic.rollout import deadline as dl
from lws_operator.logic.rollout import pause
from lws_operator.logic.rollout.pacing import RolloutDecision, RolloutSnapshot
from lws_operator.logic.status.facts import confirmed_workers
from lws_operator.logic.status.set_status import count_groups

# When to look again after a rollback: at once. The rollback's answer is cached before its own
# watch event arrives, and an event of the set that brings nothing new to the cache wakes no
# pass (docs/architecture.md, "Watching and caching"): nothing else would ever start the rollout
# back, since the pods of a bad revision that never becomes Ready send no events either. The
# cache already holds the rolled-back set, so the next pass decides on it straight away.
RESUME_NOW = 0.0


def decide(obs: Observed, snapshot: RolloutSnapshot, key: str,
           revisions: tuple[Mapping[str, Any], ...]) -> dl.Deadline:
    """The deadline of this pass, for the revision ``key`` among the set's ``revisions``; a
    pass that starts a new revision decides it too (its requeue at the deadline), though the
    rollout's own rule for it stands (``acts``). A paused rollout has no deadline, and the
    resume is progress (``logic.rollout.pause``)."""
    seconds = dl.deadline_seconds(obs.body)
    if seconds is None or snapshot.leader_sts is None or pause.paused(obs.body):
        return dl.OFF if seconds is None else dl.Deadline(seconds)
    lws = obs.lws
    counts = count_groups(lws.name, lws.replicas, lws.size, lws.rolling_update.partition, key,
                          obs.leaders, obs.worker_statefulsets, confirmed_workers(obs))
    started = dl.rollout_started(obs.body, counts, obs.now)
    since: float | None = None
    if started is not None:
        since = _epoch(started, obs.clock)
        born = dl.revision_born(revisions, key)
        if born is not None:
            since = max(since, _epoch(born, obs.clock))
        resumed = pause.resumed_at(lws.status, obs.clock)
        if resumed is not None:
            since = max(since, resumed)
    deadline = dl.decide(seconds, since, snapshot.groups,
                         dl.groups_ready_since(lws.name, obs.pods, key), obs.clock,
                         stuck=dl.exceeded_on(lws.status) == key,
                         released_from=snapshot.leader_sts.partition)
    if not deadline.exceeded or not dl.rollback_enabled(obs.body):
        return deadline
    # Opted in to the rollback: when there is none to make, the condition says why.
    choice = dl.rollback_choice(obs.body, revisions, key)
    return deadline if choice.target is not None else replace(deadline,
                                                              withheld=choice.withheld)


def _epoch(stamp: str, clock: float) -> float:
    value = epoch_seconds(stamp)
    return clock if value is None else value


def acts(deadline: dl.Deadline, snapshot: RolloutSnapshot) -> bool:
    """Whether an exceeded deadline holds (or rolls back) this pass: never the pass that
    starts a new revision (its partition is upstream's reset, which takes no group down)."""
    return deadline.exceeded and not snapshot.lws_updated


def held(rollout: RolloutDecision, snapshot: RolloutSnapshot) -> RolloutDecision:
    """The rollout with its partition and replicas held (``logic.rollout.deadline.hold``); the
    Events of the moves it no longer makes are dropped."""
    sts = snapshot.leader_sts
    assert sts is not None, "decide() only exceeds with a leader StatefulSet"
    scaled = sts.replicas_annotation != str(snapshot.replicas)
    partition, replicas = dl.hold((rollout.partition, rollout.replicas),
                                  (sts.partition, sts.replicas), scaled)
    if (partition, replicas) == (rollout.partition, rollout.replicas):
        return rollout
    return replace(rollout, partition=partition, replicas=replicas, events=(),
                   events_after_apply=())


def rollback(obs: Observed, deadline: dl.Deadline, key: str,
             revisions: tuple[Mapping[str, Any], ...]) -> Plan | None:
    """The rollback write when the set opted in and has a fully Ready revision to go back to
    (``logic.rollout.deadline.rollback_choice``), with the deadline's Warning and the rollback's
    Event once it succeeded. The write ends the pass (its later steps would act on the revision
    rolled back from) and asks for the next pass at once (``RESUME_NOW``), which starts the rollout
    back to the restored revision; a 409 ends the pass too (decided again on the newer object,
    where the rollback either landed or is decided anew)."""
    if not deadline.exceeded or not dl.rollback_enabled(obs.body):
        return None
    target = dl.rollback_target(obs.body, revisions, key)
    if target is None:
        return None
    patch = Patch(lws_target(obs.lws.namespace), obs.lws.name,
                  dl.rollback_body(obs.body, target, key),
                  common=Common(events=(dl.exceeded_event(deadline, key),
                                        dl.rolled_back_event(obs.body, key, target, deadline)),
                                policy=CONFLICT_STOPS,
                                log=f"rolling {obs.lws.namespace}/{obs.lws.name} back from "
                                    f"revision {key}"))
    return Plan((patch,), stop=True, requeue_after=RESUME_NOW)
