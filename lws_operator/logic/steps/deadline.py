"""The progress deadline in a pass (``logic.deadline``), Ordinal groups: decided in the leader
owner's ``prepare``, before the rollout's partition is applied, so an exceeded deadline holds the
partition and surge this very pass; the status step overlays its condition and requeues the
pass at the deadline. With the rollback opt-in, an exceeded deadline writes the templates of the
last fully Ready revision instead, and ends the pass: the next one starts the rollout back."""

from __future__ import annotations

from dataclasses import replace

from lws_operator.api.view import deleting, revision_of
from lws_operator.logic import deadline as dl
from lws_operator.logic.objects import epoch_seconds, name_of
from lws_operator.logic.plan import (
    CONFLICT_STOPS,
    GONE_OR_CHANGED_SKIP,
    Common,
    Delete,
    Patch,
    Plan,
    core,
    lws_target,
)
from lws_operator.logic.readiness import pod_running_and_ready
from lws_operator.logic.rollout import RolloutDecision, RolloutSnapshot
from lws_operator.logic.snapshot import Observed
from lws_operator.logic.status import count_groups


def decide(obs: Observed, snapshot: RolloutSnapshot) -> dl.Deadline:
    """The deadline of this pass; a pass that starts a new revision decides it too (its requeue
    at the deadline), though the rollout's own rule for it stands (``acts``)."""
    seconds = dl.deadline_seconds(obs.body)
    if seconds is None or snapshot.leader_sts is None:
        return dl.OFF if seconds is None else dl.Deadline(seconds)
    lws, key = obs.lws, obs.decided.key
    counts = count_groups(lws.name, lws.replicas, lws.size, lws.rolling_update.partition, key,
                          obs.leaders, obs.worker_statefulsets)
    started = dl.rollout_started(obs.body, counts, obs.now)
    return dl.decide(seconds, None if started is None else _epoch(started, obs.clock),
                     snapshot.groups, dl.groups_ready_since(lws.name, obs.pods, key), obs.clock,
                     stuck=dl.exceeded_on(lws.status) == key)


def _epoch(stamp: str, clock: float) -> float:
    value = epoch_seconds(stamp)
    return clock if value is None else value


def acts(deadline: dl.Deadline, snapshot: RolloutSnapshot) -> bool:
    """Whether an exceeded deadline holds (or rolls back) this pass: never the pass that
    starts a new revision (its partition is upstream's reset, which takes no group down)."""
    return deadline.exceeded and not snapshot.lws_updated


def held(rollout: RolloutDecision, snapshot: RolloutSnapshot) -> RolloutDecision:
    """The rollout with its partition and replicas held (``logic.deadline.hold``); the Events
    of the moves it no longer makes are dropped."""
    sts = snapshot.leader_sts
    assert sts is not None, "decide() only exceeds with a leader StatefulSet"
    scaled = sts.replicas_annotation != str(snapshot.replicas)
    partition, replicas = dl.hold((rollout.partition, rollout.replicas),
                                  (sts.partition, sts.replicas), scaled)
    if (partition, replicas) == (rollout.partition, rollout.replicas):
        return rollout
    return replace(rollout, partition=partition, replicas=replicas, events=(),
                   events_after_apply=())


def rollback(obs: Observed, deadline: dl.Deadline) -> Plan | None:
    """The rollback write when the set opted in and has a revision to go back to, with the
    deadline's Warning and the rollback's Event once it succeeded; a 409 ends the pass (decided
    again on the newer object, where the rollback either landed or is decided anew)."""
    if not deadline.exceeded or not dl.rollback_enabled(obs.body):
        return None
    key = obs.decided.key
    target = dl.rollback_target(obs.body, obs.decided.revisions, key)
    if target is None:
        return None
    patch = Patch(lws_target(obs.lws.namespace), obs.lws.name,
                  dl.rollback_body(obs.body, target, key),
                  common=Common(events=(dl.exceeded_event(deadline, key),
                                        dl.rolled_back_event(obs.body, key, target, deadline)),
                                policy=CONFLICT_STOPS,
                                log=f"rolling {obs.lws.namespace}/{obs.lws.name} back from "
                                    f"revision {key}"))
    return Plan((patch,), stop=True)


def unstick(obs: Observed, snapshot: RolloutSnapshot) -> tuple[Delete, ...]:
    """Delete the leaders of groups the live leader StatefulSet already releases (ordinal at or
    above its partition) that are still on another revision and not Ready, for a set with a
    deadline.

    The StatefulSet's own ``maxUnavailable`` (on by default) counts those not-Ready pods as
    unavailable and then deletes none, so after a bad rollout, whose never-Ready groups are as
    many as its maxUnavailable, a fix or a rollback would wait forever. Deleting a pod that is
    not Ready loses no capacity; the StatefulSet recreates it on its update revision, which is
    the current one (never in the pass that applies a new revision, whose StatefulSet does not
    carry it yet)."""
    sts = snapshot.leader_sts
    if dl.deadline_seconds(obs.body) is None or sts is None or snapshot.lws_updated:
        return ()
    name, key = obs.lws.name, obs.decided.key
    by_name = {name_of(pod): pod for pod in obs.leaders}
    out: list[Delete] = []
    for index in range(sts.partition, sts.replicas):
        leader = by_name.get(f"{name}-{index}")
        if (leader is None or deleting(leader) or revision_of(leader) in ("", key)
                or pod_running_and_ready(leader)):
            continue
        out.append(Delete(core(obs.lws.namespace, "pods", "Pod"), name_of(leader),
                          str(leader.get("metadata", {}).get("uid")),
                          common=Common(policy=GONE_OR_CHANGED_SKIP, group=str(index),
                                        log=f"deleting leader {obs.lws.namespace}/"
                                            f"{name_of(leader)}: not Ready on revision "
                                            f"{revision_of(leader)}, released for {key}")))
    return tuple(out)
