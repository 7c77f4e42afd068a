"""Step: groups whose pods failed (upstream's handleRestartPolicy (pod_controller.go), the
documented restart budget and backoff).

Recreate a group by deleting its leader, stop an exhausted one while keeping its pods, or defer
a recreation the backoff holds back. A plan that writes anything ends the pass: the watch
events of those writes bring the next one. Otherwise the step's value is when the backoff asks
to look again, which the pass hands to the status step. What the set's ``Memory`` keeps of it,
and the tombstones still needed, go to the controller with the plan (``Remember``).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from lws_operator.api.constants import (
    EVENT_ACTION_DELETE,
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
    GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION,
    REASON_RECREATE_GROUP,
)
from lws_operator.api.view import group_index, is_leader
from lws_operator.logic.failures.facts import exhausted_leaders, failure_triggers
from lws_operator.logic.failures.restart import (
    REASON_GROUP_UNSCHEDULABLE,
    Recreation,
    scan_failures,
)
from lws_operator.logic.failures.restart_budget import (
    CLEANUP_FINALIZER,
    backoff_event,
    exhaustion_events,
    plan_restarts,
    unfinished_exhaustions,
)
from lws_operator.logic.failures.writes import counts_patch, delete_leader
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.logic.reconcile.plan import (
    Action,
    Common,
    Patch,
    Plan,
    Planned,
    Policy,
    Record,
    Then,
    core,
)
from lws_operator.logic.reconcile.snapshot import Observed, Remember

# A member of an exhausted group: gone is fine, changed ends the pass (decide again).
_RETAIN = Policy(not_found=Then.SKIP, conflict=Then.STOP)


def step(obs: Observed) -> Planned[float | None]:
    body = obs.body
    scan = scan_failures(body, obs.pods, obs.statefulsets, obs.tombstones,
                         triggered=failure_triggers(obs))
    memory = obs.memory
    # The live UIDs only bound what is remembered: nothing remembered, nothing to bound.
    live = obs.uids() if (memory.reported or memory.expected_gone
                          or memory.backoff_reported) else frozenset()
    actions: list[Action] = []
    reported = set(memory.reported & live)
    for skip in scan.unschedulable:
        if skip.trigger_uid not in reported:
            reported.add(skip.trigger_uid)
            actions.append(Record(Event(REASON_GROUP_UNSCHEDULABLE, EVENT_TYPE_WARNING,
                                        EVENT_ACTION_DELETE, skip.note)))
    expected_gone = set(memory.expected_gone & live)
    candidates = [r for r in scan.recreations if r.leader_uid not in expected_gone]
    restarts = plan_restarts(body, candidates, obs.clock)
    # Only the leaders it looks for: those marked exhausted.
    exhaust = {r.leader_uid: r for r in [*restarts.exhaust,
                                         *unfinished_exhaustions(exhausted_leaders(obs))]}
    before = memory.backoff_reported & live
    actions += [Record(backoff_event(d)) for d in restarts.deferred
                if d.recreation.leader_uid not in before]
    expected_gone |= {r.leader_uid for r in restarts.recreate}
    backoff_reported = frozenset(d.recreation.leader_uid for d in restarts.deferred)
    if reported == memory.reported and expected_gone == memory.expected_gone \
            and backoff_reported == memory.backoff_reported:
        remembered = memory  # most passes: nothing to remember, or the same
    else:
        remembered = replace(
            memory, reported=frozenset(reported), expected_gone=frozenset(expected_gone),
            backoff_reported=backoff_reported)
    # A deleted worker is seen once: its tombstone stays while its recreation is deferred.
    triggers = {d.recreation.trigger for d in restarts.deferred}
    kept = frozenset(str(meta_of(t).get("uid")) for t in obs.tombstones
                     if name_of(t) in triggers)
    remember = Remember(remembered, kept)
    if not restarts.recreate and not exhaust:
        return Planned(Plan(tuple(actions), carry=remember), restarts.requeue_after)
    if restarts.counts is not None:
        actions.append(counts_patch(obs, restarts.counts, restarts.counted))
    for recreation in restarts.recreate:
        note = Event(REASON_RECREATE_GROUP, EVENT_TYPE_NORMAL, EVENT_ACTION_DELETE,
                     recreation.note)
        actions.append(delete_leader(obs, recreation, (note,), obs.pod(recreation.leader)))
    notes = dict((r.leader_uid, e) for r, e in exhaustion_events(restarts, body))
    for recreation in exhaust.values():
        actions += _retain_group(obs, recreation)
        if recreation.leader_uid in notes:
            actions.append(Record(notes[recreation.leader_uid]))
    return Planned(Plan(tuple(actions), stop=True, requeue_after=restarts.requeue_after,
                        carry=remember), None)


def _retain_group(obs: Observed, recreation: Recreation) -> list[Action]:
    """Stop an exhausted group but keep its pods: our finalizer on every live pod of the
    group (workers first), the exhausted mark on the leader, then the same foreground
    deletion as a recreation. The terminating leader keeps the leader StatefulSet from
    replacing it. A conflict ends the pass (the next one finishes the job)."""
    members = [p for p in obs.pods
               if group_index(p) == recreation.group and not meta_of(p).get("deletionTimestamp")]
    members.sort(key=is_leader)  # the leader last
    actions: list[Action] = []
    for pod in members:
        meta = meta_of(pod)
        leader = meta.get("uid") == recreation.leader_uid
        finalizers = list(meta.get("finalizers") or [])
        marked = (meta.get("annotations") or {}).get(
            GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION) == "true"
        if CLEANUP_FINALIZER in finalizers and (marked or not leader):
            continue
        patch: dict[str, Any] = {"resourceVersion": meta.get("resourceVersion"),
                                 "finalizers": sorted({*finalizers, CLEANUP_FINALIZER})}
        if leader:
            patch["annotations"] = {GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION: "true"}
        actions.append(Patch(core(obs.lws.namespace, "pods", "Pod"), name_of(pod),
                             {"metadata": patch}, common=Common(policy=_RETAIN)))
    actions.append(delete_leader(obs, recreation))
    return actions

