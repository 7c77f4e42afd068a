"""The object that owns a set's leader pods, one strategy per group identity.

Ordinal groups (the default) have a leader StatefulSet whose partition and replicas pace the
rollout (``logic.rollout.pacing``, upstream's rollingUpdateParameters
(leaderworkerset_controller.go)); Hash groups have a leader Deployment and admit gated
leaders as groups are torn down (``logic.identity.hash_groups``). Everything else in a pass is the
same for both, so the pipeline (``logic.reconcile.pipeline``) asks the strategy only these
questions: which object is the owner, what to decide before scheduling (``prepare``), the owner to
apply, which retained pods to release, and the status.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

from lws_operator.api.constants import (
    EVENT_ACTION_CREATE,
    EVENT_ACTION_UPDATE,
    EVENT_TYPE_WARNING,
    MAX_INT32,
    REASON_FAILED_CREATE,
    REASON_FAILED_UPDATE,
)
from lws_operator.logic.failures.restart_budget import Release, plan_release, read_counts
from lws_operator.logic.identity import hash_groups
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import meta_of
from lws_operator.logic.reconcile.decisions import first_difference
from lws_operator.logic.reconcile.plan import EMPTY, Apply, Common, Plan, Policy, Record, apps
from lws_operator.logic.reconcile.snapshot import Obj, Observed
from lws_operator.logic.rollout import deadline_step as progress_deadline
from lws_operator.logic.rollout.pacing import RolloutDecision, plan_rollout, rollout_snapshot
from lws_operator.logic.rollout.stall import unstall_view
from lws_operator.logic.status.set_status import StatusDecision, compute_hash_status, compute_status
from lws_operator.logic.workloads.statefulsets import leader_statefulset

STS_DELETING_REQUEUE = 5.0


class LeaderOwner(Protocol):
    """The questions a pass asks of the object owning the leaders (module docstring)."""

    prunes_counts: bool  # whether settled restart counts are pruned once an update is done

    def live(self, obs: Observed) -> Obj | None: ...
    def workers(self, obs: Observed) -> list[Obj]: ...
    def guard(self, obs: Observed) -> Plan: ...
    def prepare(self, obs: Observed) -> Plan: ...
    def apply(self, obs: Observed) -> Plan: ...
    def release(self, obs: Observed) -> Release: ...
    def status(self, obs: Observed) -> StatusDecision: ...


def _apply(obs: Observed, plural: str, kind: str, noun: str, desired: dict[str, Any],
           live: Obj | None, events: tuple[Event, ...] = ()) -> Plan:
    """Server-side apply ``desired`` when the cached owner differs; a failure records
    FailedCreate (no owner yet) or FailedUpdate and fails the pass."""
    difference = "." if live is None else obs.memo.get(
        f"{kind} difference", (desired, live), lambda: first_difference(desired, live))
    if difference is None:
        return EMPTY
    first = live is None
    name = obs.lws.name
    failure = Event(REASON_FAILED_CREATE if first else REASON_FAILED_UPDATE, EVENT_TYPE_WARNING,
                    EVENT_ACTION_CREATE if first else EVENT_ACTION_UPDATE,
                    f"Failed to {'create' if first else 'update'} {noun} {name}: {{reason}}")
    log = None if first else f"applying {noun} {obs.lws.namespace}/{name}: {difference} differs"
    return Plan((Apply(apps(obs.lws.namespace, plural, kind), desired,
                       common=Common(events=events, policy=Policy(failure=failure), log=log)),))


def _status_view(obs: Observed) -> dict[str, Any]:
    return {**obs.body, "status": unstall_view(obs.lws.status)}


class OrdinalLeader:
    """A leader StatefulSet named after the set; the rollout moves its partition."""

    prunes_counts = True

    def live(self, obs: Observed) -> Obj | None:
        return obs.leader_statefulset

    def workers(self, obs: Observed) -> list[Obj]:
        return obs.worker_statefulsets

    def guard(self, obs: Observed) -> Plan:
        """A leader StatefulSet being deleted: wait until it is gone."""
        sts = obs.leader_statefulset
        if sts is not None and meta_of(sts).get("deletionTimestamp"):
            return Plan(stop=True, requeue_after=STS_DELETING_REQUEUE)
        return EMPTY

    def prepare(self, obs: Observed) -> Plan:
        key, updated = obs.decided.key, obs.decided.updated
        # Read: the set, its StatefulSets, its leader pods and the worker StatefulSets its pods
        # show ready (a worker pod's change keeps it unless it completes a group).
        confirmed = obs.confirmed_workers
        snapshot = obs.memo.get(
            "rollout snapshot",
            (obs.body, obs.statefulsets, obs.leader_pods, key, updated, confirmed),
            lambda: rollout_snapshot(obs.body, obs.leader_statefulset, obs.leaders,
                                     obs.worker_statefulsets, key, updated, confirmed))
        rollout = obs.memo.get("rollout", (snapshot,), lambda: plan_rollout(snapshot))
        # The progress deadline (opt-in): roll back, or hold the partition and surge.
        deadline = progress_deadline.decide(obs, snapshot)
        if progress_deadline.acts(deadline, snapshot):
            rollback = progress_deadline.rollback(obs, deadline)
            if rollback is not None:
                return rollback
            rollout = progress_deadline.held(rollout, snapshot)
        return Plan(tuple(Record(e) for e in rollout.events),
                    carry=replace(obs.decided, rollout=rollout, deadline=deadline))

    def _rollout(self, obs: Observed) -> RolloutDecision:
        assert obs.decided.rollout is not None, "prepare runs first"
        return obs.decided.rollout

    def apply(self, obs: Observed) -> Plan:
        rollout = self._rollout(obs)
        key, partition, replicas = obs.decided.key, rollout.partition, rollout.replicas
        desired = obs.memo.get("leader statefulset", (obs.body, key, partition, replicas),
                               lambda: leader_statefulset(obs.body, key, partition, replicas))
        return _apply(obs, "statefulsets", "StatefulSet", "leader statefulset", desired,
                      obs.leader_statefulset, rollout.events_after_apply)

    def release(self, obs: Observed) -> Release:
        rollout = self._rollout(obs)
        if not obs.retained_pods:
            return Release()  # what ``plan_release`` answers without retained pods
        return plan_release(list(obs.pods), replicas=rollout.replicas,
                            current_key=obs.decided.key, partition=rollout.partition)

    def status(self, obs: Observed) -> StatusDecision:
        sts = obs.leader_statefulset
        assert sts is not None, "applied by an earlier step"
        # Asked by the counts step and the status step of a pass, over the same objects.
        confirmed = obs.confirmed_workers
        return obs.memo.get(
            "status", (obs.body, obs.decided.key, obs.statefulsets, obs.leader_pods, obs.now,
                       confirmed),
            lambda: compute_status(_status_view(obs), obs.decided.key, sts, obs.leaders,
                                   obs.worker_statefulsets, obs.now, confirmed))


class HashLeader:
    """A leader Deployment named after the set; gated leaders are admitted as groups go."""

    prunes_counts = False  # Hash mode moves and drops its counts as it admits leaders

    def live(self, obs: Observed) -> Obj | None:
        return obs.leader_deployment

    def workers(self, obs: Observed) -> list[Obj]:
        return list(obs.statefulsets)

    def guard(self, obs: Observed) -> Plan:
        return EMPTY

    def prepare(self, obs: Observed) -> Plan:
        admission = hash_groups.plan_admission(obs.body, list(obs.pods), read_counts(obs.body),
                                                 obs.decided.key)
        return Plan(carry=replace(obs.decided, admission=admission))

    def apply(self, obs: Observed) -> Plan:
        key = obs.decided.key
        desired = obs.memo.get("leader deployment", (obs.body, key),
                               lambda: hash_groups.leader_deployment(obs.body, key))
        return _apply(obs, "deployments", "Deployment", "leader deployment", desired,
                      obs.leader_deployment)

    def release(self, obs: Observed) -> Release:
        if not obs.retained_pods:
            return Release()  # what ``plan_release`` answers without retained pods
        pods = list(obs.pods)
        return plan_release(pods, replicas=None, current_key=obs.decided.key,
                            partition=MAX_INT32,
                            groups=hash_groups.release_scaled_down(obs.body, pods,
                                                                   obs.decided.key))

    def status(self, obs: Observed) -> StatusDecision:
        confirmed = obs.confirmed_workers
        return obs.memo.get(
            "status", (obs.body, obs.decided.key, obs.statefulsets, obs.leader_pods, obs.now,
                       confirmed),
            lambda: compute_hash_status(_status_view(obs), obs.decided.key, obs.leaders,
                                        list(obs.statefulsets), obs.now, confirmed))


ORDINAL = OrdinalLeader()
HASH = HashLeader()


def owner_of(obs: Observed) -> LeaderOwner:
    return HASH if obs.lws.hashed else ORDINAL


