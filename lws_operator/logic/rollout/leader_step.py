"""The object that owns a set's leader pods, one strategy per group identity.

Ordinal groups (the default) have a leader StatefulSet whose partition and replicas pace the
rollout (``logic.rollout.pacing``, upstream's rollingUpdateParameters
(leaderworkerset_controller.go)); Hash groups have a leader Deployment and admit gated
leaders as groups are torn down (``logic.hash_mode.hash_groups``). Everything else in a pass is the
same for both, so the pass (``logic.leaderworkerset.pipeline.reconcile``) asks each only these
questions: what to decide before scheduling (``prepare``: the Ordinal rollout and progress
deadline, ``Rollout``; the Hash admission), the owner to apply, which retained pods to release,
and the status. What ``prepare`` decides is handed back to ``apply`` and ``release`` by the pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from lws_operator.api.constants import (
    EVENT_ACTION_CREATE,
    EVENT_ACTION_UPDATE,
    EVENT_TYPE_WARNING,
    MAX_INT32,
    REASON_FAILED_CREATE,
    REASON_FAILED_UPDATE,
)
from lws_operator.logic.failures.facts import retained_pods
from lws_operator.logic.failures.release_step import release_plan
from lws_operator.logic.failures.restart_budget import Release, plan_release, read_counts
from lws_operator.logic.hash_mode import hash_groups
from lws_operator.logic.hash_mode.hash_groups import Admission
from lws_operator.logic.identity.revision_step import Revision
from lws_operator.logic.objects.difference import first_difference
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import meta_of
from lws_operator.logic.reconcile.plan import (
    EMPTY,
    Apply,
    Common,
    Plan,
    Planned,
    Policy,
    Record,
    apps,
)
from lws_operator.logic.reconcile.snapshot import Obj, Observed
from lws_operator.logic.rollout import deadline_step as progress_deadline
from lws_operator.logic.rollout import pause
from lws_operator.logic.rollout.deadline import Deadline
from lws_operator.logic.rollout.pacing import RolloutDecision, plan_rollout, rollout_snapshot
from lws_operator.logic.rollout.stall import unstall_view
from lws_operator.logic.status.facts import confirmed_workers
from lws_operator.logic.status.set_status import StatusDecision, compute_hash_status, compute_status
from lws_operator.logic.workloads.statefulsets import leader_statefulset

STS_DELETING_REQUEUE = 5.0


@dataclass(frozen=True)
class Rollout:
    """What the Ordinal ``prepare`` decides for the rest of the pass: the rollout's partition
    and replicas (held while the progress deadline is exceeded) and the deadline itself, whose
    condition and requeue the status step writes."""

    decision: RolloutDecision
    deadline: Deadline


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

    def guard(self, obs: Observed) -> Plan:
        """A leader StatefulSet being deleted: wait until it is gone."""
        sts = obs.leader_statefulset
        if sts is not None and meta_of(sts).get("deletionTimestamp"):
            return Plan(stop=True, requeue_after=STS_DELETING_REQUEUE)
        return EMPTY

    def prepare(self, obs: Observed, revision: Revision) -> Planned[Rollout]:
        """The rollout of ``revision`` (``logic.rollout.pacing``) and the progress deadline,
        which holds it or, opted in, rolls the set back and ends the pass; a paused set's
        rollout held where it stands (``logic.rollout.pause``; no deadline runs then)."""
        key, updated = revision.key, revision.updated
        # Read: the set, its StatefulSets, its leader pods and the worker StatefulSets its pods
        # show ready (a worker pod's change keeps it unless it completes a group).
        confirmed = confirmed_workers(obs)
        snapshot = obs.memo.get(
            "rollout snapshot",
            (obs.body, obs.statefulsets, obs.leader_pods, key, updated, confirmed),
            lambda: rollout_snapshot(obs.body, obs.leader_statefulset, obs.leaders,
                                     obs.worker_statefulsets, key, updated, confirmed))
        rollout = obs.memo.get("rollout", (snapshot,), lambda: plan_rollout(snapshot))
        # The progress deadline (opt-in): roll back, or hold the partition and surge.
        deadline = progress_deadline.decide(obs, snapshot, key, revision.revisions)
        if progress_deadline.acts(deadline, snapshot):
            rollback = progress_deadline.rollback(obs, deadline, key, revision.revisions)
            if rollback is not None:
                return Planned(rollback, Rollout(rollout, deadline))  # the pass ends there
            rollout = progress_deadline.held(rollout, snapshot)
        if pause.paused(obs.body):
            rollout = pause.hold(rollout, snapshot)
        # The deadline's recheck, planned here as well as by the status step: a pass that ends
        # before its status (the release of retained pods) still looks again at the deadline.
        return Planned(Plan(tuple(Record(e) for e in rollout.events),
                            requeue_after=deadline.recheck_after), Rollout(rollout, deadline))

    def apply(self, obs: Observed, key: str, rollout: Rollout) -> Plan:
        """The leader StatefulSet at the rollout's partition and replicas."""
        partition, replicas = rollout.decision.partition, rollout.decision.replicas
        desired = obs.memo.get("leader statefulset", (obs.body, key, partition, replicas),
                               lambda: leader_statefulset(obs.body, key, partition, replicas))
        return _apply(obs, "statefulsets", "StatefulSet", "leader statefulset", desired,
                      obs.leader_statefulset, rollout.decision.events_after_apply)

    def release(self, obs: Observed, key: str, rollout: Rollout) -> Plan:
        """The retained pods to let go (``logic.failures.release_step``); ends the pass when
        there are any."""
        if not retained_pods(obs):
            return EMPTY  # what ``plan_release`` answers without retained pods
        return _released(obs, plan_release(list(obs.pods), replicas=rollout.decision.replicas,
                                           current_key=key,
                                           partition=rollout.decision.partition))

    def status(self, obs: Observed, key: str) -> StatusDecision:
        sts = obs.leader_statefulset
        if sts is None:
            raise LookupError("the leader StatefulSet is applied before the status")
        # Asked by the counts step and the status step of a pass, over the same objects.
        confirmed = confirmed_workers(obs)
        return obs.memo.get(
            "status", (obs.body, key, obs.statefulsets, obs.leader_pods, obs.now, confirmed),
            lambda: compute_status(_status_view(obs), key, sts, obs.leaders,
                                   obs.worker_statefulsets, obs.now, confirmed))


class HashLeader:
    """A leader Deployment named after the set; gated leaders are admitted as groups go."""

    def prepare(self, obs: Observed, key: str) -> Planned[Admission]:
        """Which gated leaders may schedule now, and the restart counts that move to them."""
        return Planned(EMPTY, hash_groups.plan_admission(obs.body, list(obs.pods),
                                                         read_counts(obs.body), key))

    def apply(self, obs: Observed, key: str) -> Plan:
        desired = obs.memo.get("leader deployment", (obs.body, key),
                               lambda: hash_groups.leader_deployment(obs.body, key))
        return _apply(obs, "deployments", "Deployment", "leader deployment", desired,
                      obs.leader_deployment)

    def release(self, obs: Observed, key: str) -> Plan:
        if not retained_pods(obs):
            return EMPTY  # what ``plan_release`` answers without retained pods
        pods = list(obs.pods)
        return _released(obs, plan_release(
            pods, replicas=None, current_key=key, partition=MAX_INT32,
            groups=hash_groups.release_scaled_down(obs.body, pods, key)))

    def status(self, obs: Observed, key: str) -> StatusDecision:
        confirmed = confirmed_workers(obs)
        return obs.memo.get(
            "status", (obs.body, key, obs.statefulsets, obs.leader_pods, obs.now, confirmed),
            lambda: compute_hash_status(_status_view(obs), key, obs.leaders,
                                        list(obs.statefulsets), obs.now, confirmed))


def _released(obs: Observed, release: Release) -> Plan:
    return release_plan(obs, release) if release.pods else EMPTY


ORDINAL = OrdinalLeader()
HASH = HashLeader()


