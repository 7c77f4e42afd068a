"""The end of a pass in both identity modes.

* ``counts``: once an update is done, the restart counts of revisions that are gone are
  pruned (Ordinal only: Hash moves and drops its counts as it admits leaders).
* ``status``: the computed status with the pause, stall, unschedulable, unmutated-pods, Degraded
  and scheduling conditions over it, one write if it differs (with its Events), at once or, when
  only the group counters differ, once that is due (``logic.status.pacing``); then, once the
  update is done, the current revision is recorded as fully Ready and the revisions beyond the
  history limit are deleted (``logic.identity.history``). Its requeue is the pass's: the
  earliest of what earlier steps asked for, the stall's next check, the progress deadline
  (``logic.rollout.deadline``, which outranks the stall while exceeded) and a deferred write's
  due time. What earlier steps decided comes in as arguments (the revision, the deadline, the
  scheduling facts, the recreation, their requeues).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from lws_operator.api import disaggregated
from lws_operator.logic.failures.facts import exhausted_leaders
from lws_operator.logic.failures.restart import apply_unschedulable
from lws_operator.logic.failures.restart_budget import apply_degraded, read_counts, settled_counts
from lws_operator.logic.failures.writes import counts_patch
from lws_operator.logic.identity import history
from lws_operator.logic.identity.writes import revision_update
from lws_operator.logic.mutation import unmutated
from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.logic.placement import gang
from lws_operator.logic.reconcile.plan import (
    EMPTY,
    GONE_OR_CHANGED_SKIP,
    Action,
    Common,
    Delete,
    Plan,
    apps,
    earliest,
)
from lws_operator.logic.reconcile.snapshot import Observed, Recreation, Remember
from lws_operator.logic.rollout import deadline as progress_deadline
from lws_operator.logic.rollout import pause
from lws_operator.logic.rollout.facts import unschedulable_pods
from lws_operator.logic.rollout.leader_step import ORDINAL, HashLeader, OrdinalLeader
from lws_operator.logic.rollout.stall import NO_STALL, apply_stall, find_stall
from lws_operator.logic.status.pacing import pace
from lws_operator.logic.status.writes import status_patch
from lws_operator.logic.workloads.statefulsets import spec_replicas


def counts(obs: Observed, key: str) -> Plan:
    """Ordinal sets: the counts of the revisions other than ``key``, once it is rolled out."""
    if not ORDINAL.status(obs, key).update_done:
        return EMPTY
    pruned = settled_counts(read_counts(obs.body), key, spec_replicas(obs.body))
    return EMPTY if pruned is None else Plan((counts_patch(obs, pruned),))


def status(obs: Observed, owner: OrdinalLeader | HashLeader, key: str,
           revisions: tuple[Mapping[str, Any], ...], *, deadline: progress_deadline.Deadline,
           scheduling: Mapping[str, Any] | None, recreating: Recreation | None,
           requeue: float | None) -> Plan:
    """The status of revision ``key`` as ``owner`` computes it, with the conditions over it
    (module docstring); once it is rolled out, the history is kept to its limit (``_history``).
    ``scheduling``: the facts of the scheduling condition (``logic.providers``), None
    without a provider that reports them; ``recreating``: the recreation of unmutated pods;
    ``requeue``: the earliest requeue earlier steps asked for."""
    decision = owner.status(obs, key)
    observed: dict[str, Any] = obs.body.get("status") or {}
    pods = list(obs.pods)
    # A paused rollout says so, and is not judged stalled; the stall and the deadline, which
    # outranks it (both would set Progressing), replace a resumed one's condition.
    paused = pause.paused(obs.body)
    desired, pause_events = pause.apply_pause(
        apply_unschedulable(decision.status, obs.body, pods), observed, paused, obs.lws.name,
        obs.now)
    # Only the pods it reads: those the scheduler could not place.
    stall = NO_STALL if deadline.exceeded or paused else find_stall(
        unschedulable_pods(obs), key, obs.clock, obs.options.stall_grace)
    desired, stall_events = apply_stall(desired, observed, stall, obs.now)
    desired, deadline_events = progress_deadline.apply_deadline(
        desired, observed, deadline, key, obs.now)
    # Only the pods it reads: those the webhook never saw, and the leaders. The message ends
    # with what the recreation of those pods is doing (``logic.mutation.recreation``).
    desired, progressing_events = unmutated.apply_unmutated(
        desired, observed, obs.lws.namespace, obs.unmutated_pods, obs.now,
        (*pause_events, *stall_events, *deadline_events),
        note=recreating.note if recreating is not None else None)
    # Only the leaders it reads: those marked exhausted.
    desired = apply_degraded(desired, exhausted_leaders(obs), obs.lws.generation, obs.now)
    if scheduling is not None:
        desired = gang.apply_condition(desired, gang.scheduling_condition(
            observed.get("conditions") or [], now=obs.now, generation=obs.lws.generation,
            **scheduling))
    actions: list[Action] = []
    memory = obs.memory
    events = (*decision.events, *progressing_events)
    pacing = pace(desired, observed, obs.clock, memory.status_deferral, events=bool(events),
                  serving_read=disaggregated.controlled_by_a_set(obs.body),
                  under_way=obs.options.under_way)
    if pacing.write:
        actions.append(status_patch(obs, desired, events))
    actions += _history(obs, key, revisions, decision.update_done)
    requeue = earliest(requeue, stall.recheck_after, deadline.recheck_after,
                       pacing.recheck_after)
    if pacing.deferral == memory.status_deferral:
        return Plan(tuple(actions), requeue_after=requeue)
    remembered = replace(memory, status_deferral=pacing.deferral)
    return Plan(tuple(actions), requeue_after=requeue, carry=Remember(remembered))


def _history(obs: Observed, key: str, revisions: tuple[Mapping[str, Any], ...],
             update_done: bool) -> list[Action]:
    """Once the update to ``key`` is done: the current revision recorded as fully Ready (with a
    group at least), and the revisions beyond the set's history limit deleted, oldest first
    (``logic.identity.history``). Nothing while an update is in progress: its groups may run on
    any older revision."""
    if not update_done:
        return []
    target = apps(obs.lws.namespace, "controllerrevisions", "ControllerRevision")
    actions: list[Action] = []
    # The cached revision as it is now (this pass's revision step may have updated it).
    current = history.revision_for_key(obs.own_revisions, key)
    mark = history.fully_ready_patch(current, obs.now) \
        if history.fully_ready(update_done, obs.lws.replicas) else None
    if current is not None and mark is not None:
        actions.append(revision_update(obs.lws.namespace, current, mark))
    actions += [Delete(target, name_of(revision), str(meta_of(revision).get("uid")),
                       forget=revision, common=Common(policy=GONE_OR_CHANGED_SKIP))
                for revision in history.to_prune(revisions, key, history.history_limit(obs.body))]
    return actions
