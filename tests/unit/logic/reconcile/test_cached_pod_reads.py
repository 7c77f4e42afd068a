"""Guard: the logic never reads a part of a pod that the watch cache drops.

Every logic function a pass (or the group metrics) calls with cached pods runs here over pods
built the way production builds them (``tests/harness/as_operated.py``), passed through the pod
cache's real store and wrapped in ``Watched``, which records each read of a key the cached pod
lacks and the full pod has, at any depth. Any such read fails the test with its path, e.g.
``sample-0.spec.containers`` (found running upstream's TPU
samples: the TPU check read the leader's containers, which the
cache had dropped). The fix is to add what is read to ``logic.reconcile.observed.POD_SPEC_SHAPE``.

The worlds cover the states that send the readers down their branches: TPU and non-TPU
templates, Ordinal and Hash identity, subgroups with exclusive placement, native gang and
volcano scheduling, restarted, failed, unschedulable, gated, terminating and retained pods.

A table only guards the functions it lists, so ``test_every_logic_call_of_a_pass_is_classified``
reads the controller's source: each logic function it calls must be listed here as a pod reader
or as one that takes no pods. A new call fails until it is classified (and, if it reads pods,
exercised here).
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import lws_operator
from lws_operator.api.view import lws_view
from lws_operator.logic.disruption.budget import disrupted_groups
from lws_operator.logic.failures.restart import (
    Recreation,
    apply_unschedulable,
    failure_trigger,
    scan_failures,
)
from lws_operator.logic.failures.restart_budget import (
    CLEANUP_FINALIZER,
    apply_degraded,
    is_retained,
    plan_release,
    still_pending,
    unfinished_exhaustions,
    without_finalizer,
)
from lws_operator.logic.failures.termination import worker_sets_to_stop
from lws_operator.logic.hash_mode import hash_groups
from lws_operator.logic.identity.revision import apply_revision
from lws_operator.logic.identity.revision_decision import decide_revision
from lws_operator.logic.mutation import recreation, unmutated
from lws_operator.logic.objects.meta import host_name, labels_of, meta_of, name_of
from lws_operator.logic.placement import gang, volcano
from lws_operator.logic.reconcile.observed import POD_CONDITION_TYPES, POD_SPEC_SHAPE
from lws_operator.logic.reconcile.snapshot import PodWebhook
from lws_operator.logic.rollout import deadline, stall
from lws_operator.logic.rollout.pacing import plan_rollout, rollout_snapshot
from lws_operator.logic.rollout.stall import find_stall
from lws_operator.logic.status import group_metrics, readiness
from lws_operator.logic.status.readiness import containers_ready, pod_ready
from lws_operator.logic.status.set_status import compute_hash_status, compute_status, count_groups
from lws_operator.logic.workloads import wakeups
from lws_operator.logic.workloads.services import replica_service
from lws_operator.logic.workloads.statefulsets import leader_statefulset, worker_statefulset
from tests.harness.as_operated import Misses, cached, created_pod, running, stored_lws, watched

P = "leaderworkerset.sigs.k8s.io/"
TPU = {"limits": {"google.com/tpu": 4}}
NOW = "2026-01-01T00:10:00Z"
NODE_LABELS = {"cloud.google.com/gke-nodepool": "tpu-pool", "topology.kubernetes.io/rack": "r0"}


def manifest(size: int = 3, replicas: int = 2, leader: dict[str, Any] | None = None,
             annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    lwt: dict[str, Any] = {"size": size, "workerTemplate": {"spec": {"containers": [
        {"name": "main", "image": "trainer:1", "resources": TPU,
         "env": [{"name": "USER_VAR", "value": "x"}]}]}}}
    for key in ("subGroupPolicy", "restartPolicy", "maxGroupRestarts"):
        if key in spec:
            lwt[key] = spec.pop(key)
    if leader is not None:
        lwt["leaderTemplate"] = {"spec": {"containers": [
            {"name": "leader", "image": "coordinator:1", "resources": leader}]}}
    return {"metadata": {"annotations": annotations or {}},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt, **spec}}


# Pod states, applied to full pods before they are cached.
def restarted(pod: dict[str, Any]) -> None:
    pod["status"]["containerStatuses"][0]["restartCount"] = 1


def failed(pod: dict[str, Any]) -> None:
    pod["status"]["phase"] = "Failed"


def unschedulable(pod: dict[str, Any]) -> None:
    pod["spec"].pop("nodeName", None)
    pod["status"] = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/4 nodes are available", "lastTransitionTime": "2026-01-01T00:00:02Z"}]}


def terminating(pod: dict[str, Any]) -> None:
    pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:09:00Z"


def retained(pod: dict[str, Any]) -> None:
    pod["metadata"]["finalizers"] = [CLEANUP_FINALIZER]
    pod["metadata"]["annotations"][P + "group-restart-budget-exhausted"] = "true"


GATED = "gated"  # a state of its own: the pod is never scheduled


@dataclass
class World:
    """A LeaderWorkerSet, its objects as the cache holds them and its pods in full."""

    lws: dict[str, Any]
    key: str
    leader_owner: dict[str, Any]
    revision_lws: dict[str, Any]
    worker_sets: list[dict[str, Any]]
    pods: list[dict[str, Any]]
    deleted: list[dict[str, Any]] = field(default_factory=list)


def build(body: dict[str, Any], states: dict[str, Any] | None = None,
          provider: str | None = None) -> World:
    """Every group of ``body``, created as production creates it; ``states`` maps pod names
    (``group/worker``, e.g. ``1/2``) to a state function or ``GATED``."""
    states = states or {}
    lws = cached("LeaderWorkerSet", stored_lws(body))
    decision = decide_revision(lws, None, [])
    assert decision.create is not None
    key = decision.current_key
    revision_lws = apply_revision(lws, dict(decision.create["data"]))
    hashed = lws["spec"]["groupIdentity"] == "Hash"
    owner = (hash_groups.leader_deployment(lws, key) if hashed
             else leader_statefulset(lws, key, 0, int(lws["spec"]["replicas"])))
    owner["metadata"]["uid"] = "owner-uid"
    topology = (lws["metadata"].get("annotations") or {}).get(P + "exclusive-topology")
    pods: list[dict[str, Any]] = []
    sets: list[dict[str, Any]] = []
    for group in range(int(lws["spec"]["replicas"])):
        leader = created_pod(
            owner["spec"]["template"],
            f"sample-6f7d9c-{group}x" if hashed else f"sample-{group}", owner=owner,
            service_name=None if hashed else owner["spec"]["serviceName"],
            uid=f"leader-{group}", random_key=f"{group:08x}" + "c" * 32,
            scheduler_provider=provider)
        state = states.get(f"{group}/0")
        if state != GATED:
            leader = running(leader)
        if callable(state):
            state(leader)
        pods.append(leader)
        if state == GATED or int(lws["spec"]["leaderWorkerTemplate"]["size"]) == 1:
            continue
        sts = worker_statefulset(revision_lws, lws, cached("Pod", leader),
                                 NODE_LABELS if topology else None)
        sts["metadata"]["uid"] = f"sts-{group}"
        sts["status"] = {"replicas": sts["spec"]["replicas"],
                         "readyReplicas": sts["spec"]["replicas"],
                         "availableReplicas": sts["spec"]["replicas"],
                         "updatedReplicas": sts["spec"]["replicas"]}
        sets.append(sts)
        for ordinal in range(1, int(sts["spec"]["replicas"]) + 1):
            name = f"{sts['metadata']['name']}-{ordinal}"
            worker = running(created_pod(
                sts["spec"]["template"], name, owner=sts,
                service_name=sts["spec"]["serviceName"], uid=f"worker-{group}-{ordinal}",
                scheduler_provider=provider))
            state = states.get(f"{group}/{ordinal}")
            if callable(state):
                state(worker)
            pods.append(worker)
    leader_owner = {**owner, "status": {"replicas": len(sets), "readyReplicas": len(sets)}}
    return World(lws, key, leader_owner, revision_lws, sets, pods)


WORLDS: dict[str, Callable[[], World]] = {
    "upstream TPU sample, a worker restarted": lambda: build(
        manifest(), {"1/1": restarted}),
    "CPU template, a worker failed": lambda: build(
        manifest(leader={"limits": {"cpu": "1"}}), {"0/2": failed}),
    "subgroups, exclusive placement, after start, unschedulable, Parallel": lambda: build(
        manifest(size=4, subGroupPolicy={"subGroupSize": 2},
                 restartPolicy="RecreateGroupAfterStart", podTerminationPolicy="Parallel",
                 annotations={P + "exclusive-topology": "cloud.google.com/gke-nodepool",
                              P + "subgroup-exclusive-topology": "topology.kubernetes.io/rack"}),
        {"1/3": unschedulable, "1/1": restarted, "0/0": terminating}),
    "LeaderExcluded, CPU leader, UniquePerReplica, LeaderReady": lambda: build(
        manifest(size=5, replicas=1, leader={"limits": {"cpu": "1"}},
                 subGroupPolicy={"subGroupSize": 2, "subGroupPolicyType": "LeaderExcluded"},
                 networkConfig={"subdomainPolicy": "UniquePerReplica"},
                 startupPolicy="LeaderReady")),
    "Hash TPU, a gated leader, a retained group": lambda: build(
        manifest(size=2, replicas=3, groupIdentity="Hash", maxGroupRestarts=1),
        {"0/0": GATED, "1/0": retained, "1/1": retained, "2/1": failed}),
    "native gang scheduling by role": lambda: build(
        manifest(size=2, scheduling={"replica": {"leader": {}, "worker": {}}}),
        {"1/0": GATED}),
    "native gang scheduling of the whole set": lambda: build(
        manifest(size=2, scheduling={"schedulingPolicy": {"gang": {}}})),
    "volcano": lambda: build(manifest(size=2, replicas=1), provider="volcano"),
}


def _leaders(pods: list[Any]) -> list[Any]:
    return [p for p in pods if labels_of(p).get(P + "worker-index") == "0"]


def _workers_of(world: World) -> list[dict[str, Any]]:
    return [cached("StatefulSet", s) for s in world.worker_sets]


def _counting_up(world: World) -> list[dict[str, Any]]:
    """The world's worker StatefulSets before their status counted their pods ready, so what
    judges them by their pods reads every pod (``readiness.ready_by_pods``)."""
    return [{**s, "status": {"replicas": s["spec"]["replicas"], "availableReplicas": 0,
                             "currentRevision": "r", "updateRevision": "r"}}
            for s in _workers_of(world)]


def _worker_sets(w: World, pods: list[Any]) -> None:
    for leader in _leaders(pods):
        if not gang.gated(leader):
            topology = (w.lws["metadata"].get("annotations") or {}).get(P + "exclusive-topology")
            worker_statefulset(w.revision_lws, w.lws, leader, NODE_LABELS if topology else None)


def _gang(w: World, pods: list[Any]) -> None:
    leaders = _leaders(pods)
    gang.desired_workload(w.lws, leaders)
    workload = gang.workload_name(w.lws)
    desired = gang.desired_pod_groups(w.lws, gang.Source(workload), leaders)
    for leader in leaders:
        gang.names_for_leader(w.lws, workload, leader)
    gang.mismatched_groups(w.lws, workload, pods)
    stale = {"apiVersion": gang.SCHEDULING_API_VERSION, "kind": "PodGroup",
             "metadata": {"name": f"{workload}-9-old", "namespace": "ns"}}
    gang.stale_pod_groups([stale, *desired], [name_of(g) for g in desired[:1]], pods)


def _failures(w: World, pods: list[Any]) -> None:
    scan = scan_failures(w.lws, pods, _workers_of(w), w.deleted)
    leader = _leaders(pods)[-1]
    deferred = [Recreation(leader=name_of(leader), leader_uid=str(meta_of(leader).get("uid")),
                           trigger=name_of(leader), group="0")]
    still_pending(deferred, pods, scan.recreations)
    unfinished_exhaustions(pods)


def _release(w: World, pods: list[Any]) -> None:
    plan_release(pods, replicas=1, current_key=w.key, partition=0)
    plan_release(pods, replicas=None, current_key="other", partition=0, deleting=True)
    plan_release(pods, replicas=None, current_key=w.key, partition=2**31 - 1,
                 groups=hash_groups.release_scaled_down(w.lws, pods, w.key))


def _status(w: World, pods: list[Any]) -> None:
    leaders, workers = _leaders(pods), _workers_of(w)
    if w.lws["spec"]["groupIdentity"] == "Hash":
        decision = compute_hash_status(w.lws, w.key, leaders, workers, NOW)
    else:
        decision = compute_status(w.lws, w.key, w.leader_owner, leaders, workers, NOW)
    status = apply_unschedulable(decision.status, w.lws, pods)
    apply_degraded(status, pods, 1, NOW)
    find_stall(pods, w.key, 1_767_226_000.0, 60.0)


def _hash(w: World, pods: list[Any]) -> None:
    hash_groups.plan_admission(w.lws, pods, {"x/0": 1}, w.key)
    hash_groups.readiness_updates(_leaders(pods), _workers_of(w))


Reader = Callable[[World, list[Any]], object]

# Every logic function a pass calls with pods, exercised by the reader that covers it.
READERS: dict[str, Reader] = {
    "statefulsets.worker_statefulset": _worker_sets,
    "services.replica_service": lambda w, pods: [
        replica_service(w.lws, p) for p in _leaders(pods)],
    "volcano.pod_group": lambda w, pods: [volcano.pod_group(w.lws, p) for p in _leaders(pods)],
    "meta.host_name": lambda w, pods: [host_name(p) for p in pods],
    "meta.labels_of": lambda w, pods: [labels_of(p) for p in pods],
    "meta.meta_of": lambda w, pods: [meta_of(p) for p in pods],
    "meta.name_of": lambda w, pods: [name_of(p) for p in pods],
    "readiness.containers_ready": lambda w, pods: [containers_ready(p) for p in pods],
    "readiness.pod_ready": lambda w, pods: [pod_ready(p) for p in pods],
    "readiness.pod_running_and_ready": lambda w, pods: [
        readiness.pod_running_and_ready(p) for p in pods],
    "gang.gated": lambda w, pods: [gang.gated(p) for p in pods],
    "gang.gates_without_ours": lambda w, pods: [gang.gates_without_ours(p) for p in pods],
    "gang.desired_workload": _gang,
    "gang.desired_pod_groups": _gang,
    "gang.names_for_leader": _gang,
    "gang.mismatched_groups": _gang,
    "gang.stale_pod_groups": _gang,
    "restart.scan_failures": _failures,
    "restart_budget.still_pending": _failures,
    "restart_budget.unfinished_exhaustions": _failures,
    "restart_budget.without_finalizer": lambda w, pods: [without_finalizer(p) for p in pods],
    "restart_budget.plan_release": _release,
    "hash_groups.release_scaled_down": _release,
    "hash_groups.plan_admission": _hash,
    "hash_groups.readiness_updates": _hash,
    "set_status.compute_status": _status,
    "set_status.compute_hash_status": _status,
    "restart.apply_unschedulable": _status,
    "restart_budget.apply_degraded": _status,
    "stall.find_stall": _status,
    "set_status.count_groups": lambda w, pods: count_groups(
        str(w.lws["metadata"]["name"]), 2, 2, 0, w.key, _leaders(pods), _workers_of(w)),
    "deadline.groups_ready_since": lambda w, pods: deadline.groups_ready_since(
        str(w.lws["metadata"]["name"]), pods, w.key),
    "pacing.rollout_snapshot": lambda w, pods: plan_rollout(rollout_snapshot(
        w.lws, w.leader_owner, _leaders(pods), _workers_of(w), w.key, False)),
    "termination.worker_sets_to_stop": lambda w, pods: [
        worker_sets_to_stop(w.lws, pods, _workers_of(w), lws_deleting=deleting)
        for deleting in (False, True)],
    "unmutated.split": lambda w, pods: unmutated.split(pods),
    # The per-pod predicates the snapshot selects pods with (``logic.reconcile.memo.Memo.select``).
    "unmutated.missing_labels": lambda w, pods: [unmutated.missing_labels(p) for p in pods],
    "restart.failure_trigger": lambda w, pods: [failure_trigger(p) for p in pods],
    "restart_budget.is_retained": lambda w, pods: [is_retained(p) for p in pods],
    "stall.unschedulable": lambda w, pods: [stall.unschedulable(p) for p in pods],
    "unmutated.apply_unmutated": lambda w, pods: unmutated.apply_unmutated(
        {"conditions": []}, None, "ns", pods, NOW),
    "group_metrics.group_views": lambda w, pods: group_metrics.budget_remaining(
        w.lws, group_metrics.group_views(w.lws, pods, _workers_of(w))),
    # Called with the watch event's pod, not the cached one; what it reads is kept regardless.
    "wakeups.can_wait": lambda w, pods: [wakeups.can_wait(p) for p in pods],
    "wakeups.controller_name": lambda w, pods: [wakeups.controller_name(p) for p in pods],
    "wakeups.torn_down": lambda w, pods: [
        wakeups.torn_down(p, event, sts) for p in pods for event in ("MODIFIED", "DELETED")
        for sts in (None, *_workers_of(w))],
    "readiness.confirmed_by_pods": lambda w, pods: readiness.confirmed_by_pods(
        _counting_up(w), pods),
    "wakeups.completes_workers": lambda w, pods: [
        wakeups.completes_workers(sts, {name_of(q): q for q in pods}.get)
        for sts in (None, *_counting_up(w))],
    # Every pod as if unmutated, with a webhook that serves them: the decision reads the
    # owners, labels, names and UIDs of the pods of the group it deletes.
    "recreation.decide": lambda w, pods: recreation.decide(
        "ns", str(w.lws["metadata"]["name"]), pods, pods,
        [w.leader_owner, *_workers_of(w)],
        PodWebhook({"name": "mpod.kb.io", "rules": [{
            "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
            "resources": ["pods"]}]}, 0.0), None, 0, 100.0),
    "budget.disrupted_groups": lambda w, pods: disrupted_groups(
        pods, lws_view(w.lws).replicas, lws_view(w.lws).size, lws_view(w.lws).hashed),
}

# The logic functions a pass calls that never see a pod (their inputs are the LeaderWorkerSet,
# other kinds, or values derived from pods by a reader above).
TAKE_NO_PODS = frozenset({
    "events.Event", "events.failed_create", "gang.Source", "gang.apply_condition",
    "gang.find_parent_workload",
    "gang.level_of", "gang.min_count_of", "gang.scheduling_condition", "gang.workload_name",
    "gang.workload_update", "hash_groups.group_ready_condition", "hash_groups.leader_deployment",
    "memo.Memo", "snapshot.PodWebhook",
    "relisting.deleted", "relisting.stale",  # (key, uid, resourceVersion) only
    "pacing.in_progress",  # a stored status only
    "revision_decision.decide_revision", "difference.first_difference", "owners.owned_by",
    "revision_decision.revision_for_key", "restart.Recreation", "restart.recreating",
    "history.current_revision_patch", "history.fully_ready", "history.fully_ready_patch",
    "history.history_limit", "history.revision_for_key", "history.to_prune",
    "restart_budget.Release", "restart_budget.backoff_event", "restart_budget.counted_for",
    "restart_budget.exhaustion_events", "restart_budget.plan_restarts",
    "restart_budget.read_counted", "restart_budget.read_counts", "restart_budget.render_counts",
    "restart_budget.settled_counts", "revision.apply_revision", "pacing.plan_rollout",
    "services.shared_service", "services.wants_replica_service",
    "services.wants_shared_service", "stall.apply_stall", "stall.unstall_view",
    "statefulsets.exclusive_topology_key", "statefulsets.hashed",
    "statefulsets.leader_statefulset", "statefulsets.spec_replicas", "pacing.pace",
    "group_metrics.budget_remaining", "group_metrics.observe", "group_metrics.rollout_gauges",
    "group_metrics.rollout_view",
    "deadline.Deadline", "deadline.apply_deadline", "deadline.deadline_seconds",
    "deadline.exceeded_on",
    "deadline.decide", "deadline.exceeded_event", "deadline.hold", "deadline.rollback_body",
    "deadline.rollback_enabled", "deadline.rollback_target", "deadline.rollback_choice",
    "deadline.revision_born",
    "deadline.rolled_back_event",
    "deadline.rollout_started", "meta.epoch_seconds", "termination.parallel",
    "group_metrics.state_counts", "wakeups.statefulset_can_wait",
    "pause.apply_pause", "pause.hold", "pause.paused", "pause.resumed_at",
})

# The modules that hand cached pods to the logic: the controller's shell, and the steps, shared
# writes, snapshot facts and scheduler providers of a pass (pure themselves, they call the
# policy modules with the pods of the snapshot the shell built from the cache).
_PACKAGE = Path(lws_operator.__file__).parent
CALLERS = ("controllers/leaderworkerset.py", "kube/group_metrics.py", "controllers/runtime.py",
           "kube/watch.py", "kube/executor.py", "logic/reconcile/snapshot.py",
           "logic/leaderworkerset/pipeline.py",
           *(str(p.relative_to(_PACKAGE)) for p in sorted(_PACKAGE.glob("logic/*/*_step.py"))),
           *(str(p.relative_to(_PACKAGE)) for p in sorted(_PACKAGE.glob("logic/*/writes.py"))),
           *(str(p.relative_to(_PACKAGE)) for p in sorted(_PACKAGE.glob("logic/*/facts.py"))),
           *(str(p.relative_to(_PACKAGE)) for p in
             sorted(_PACKAGE.glob("logic/providers/*.py"))))

# The pass's own modules, scanned as callers above: a call into one of them is not a call
# into the policy the tables classify.
PASS_MODULES = ("lws_operator.logic.leaderworkerset.pipeline",
                "lws_operator.logic.leaderworkerset.finish_step",
                "lws_operator.logic.providers",
                "lws_operator.logic.reconcile.plan", "lws_operator.logic.reconcile.snapshot")


def _is_step(module: str) -> bool:
    """A step module of a feature package (``logic.<feature>.<name>_step``), the plan actions
    its steps share (``logic.<feature>.writes``) or the facts it derives from a snapshot
    (``logic.<feature>.facts``): part of the pass."""
    last = module.rsplit(".", 1)[-1]
    return last.endswith("_step") or last in ("writes", "facts")


# Each reader once (several functions share one), named after the first function it covers.
_UNIQUE: dict[int, tuple[str, Reader]] = {}
for _name, _reader in READERS.items():
    _UNIQUE.setdefault(id(_reader), (_name, _reader))


@pytest.mark.parametrize("world", WORLDS)
@pytest.mark.parametrize("reader", [r for _, r in _UNIQUE.values()],
                         ids=[n for n, _ in _UNIQUE.values()])
def test_logic_reads_only_what_the_cache_keeps(world: str, reader: Reader) -> None:
    w = WORLDS[world]()
    misses = Misses()
    pods = [watched("Pod", p, misses) for p in w.pods]
    w.deleted = [watched("Pod", copy.deepcopy(w.pods[-1]), misses, "tombstone")]
    reader(w, pods)
    assert not misses.paths, (
        f"the logic read {sorted(misses.paths)} of pods the cache keeps without it: add it to "
        "logic.reconcile.observed.POD_SPEC_SHAPE (or POD_STATUS_SHAPE)")


def test_the_cache_keeps_nothing_no_decision_reads() -> None:
    """The converse: every part of the spec the cache keeps is read by some decision (dead
    entries in ``POD_SPEC_SHAPE`` only cost memory on every cached pod)."""
    read: set[str] = set()
    for make in WORLDS.values():
        for _, reader in _UNIQUE.values():
            w = make()
            misses = Misses()
            reader(w, [watched("Pod", p, misses, "pod") for p in w.pods])
            read |= {path.split(".")[2] for path in misses.reads
                     if path.startswith("pod.spec.")}
    # The worker StatefulSet step reads the leader's nodeName itself (the node to read for
    # exclusive placement, logic.workloads.workers_step).
    assert set(POD_SPEC_SHAPE) - read - {"nodeName"} == set()


class ConditionType(str):
    """A cached condition's ``type`` that records every string it is compared with: the
    condition types a reader looks for (``==``, ``!=``, ``in`` over a list or tuple; a reader
    that looked a type up in a set or dict would go unseen, and none does)."""

    sought: set[str]

    def __new__(cls, value: str, sought: set[str]) -> ConditionType:
        out = super().__new__(cls, value)
        out.sought = sought
        return out

    def __eq__(self, other: object) -> bool:
        if isinstance(other, str):
            self.sought.add(str(other))
        return str.__eq__(self, other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = str.__hash__


def _sought_condition_types(world: World, reader: Reader) -> set[str]:
    """The condition types ``reader`` compares the cached pods' condition types with."""
    sought: set[str] = set()
    misses = Misses()
    pods = [watched("Pod", p, misses) for p in world.pods]
    for pod in pods:
        # The cached dicts under the wrapper, changed in place so the wrapper records nothing.
        status = dict.get(pod, "status") or {}
        for condition in status.get("conditions") or []:
            condition["type"] = ConditionType(condition["type"], sought)
    reader(world, pods)
    return sought


@pytest.mark.parametrize("world", WORLDS)
def test_logic_looks_only_for_condition_types_the_cache_keeps(world: str) -> None:
    """A pod's conditions are cached only of the types in ``POD_CONDITION_TYPES``: a reader
    looking for another type would never find it in the cache (where the full pod, with every
    condition a kubelet reports, has it)."""
    for _, reader in _UNIQUE.values():
        sought = _sought_condition_types(WORLDS[world](), reader)
        assert sought <= POD_CONDITION_TYPES, (
            f"the logic looks for pod conditions {sorted(sought - POD_CONDITION_TYPES)}, which "
            "the cache drops: add them to logic.reconcile.observed.POD_CONDITION_TYPES")


def test_the_cache_keeps_no_condition_type_no_decision_reads() -> None:
    """The converse: every condition type the cache keeps is looked for by some decision."""
    sought: set[str] = set()
    for make in WORLDS.values():
        for _, reader in _UNIQUE.values():
            sought |= _sought_condition_types(make(), reader)
    assert sought == POD_CONDITION_TYPES


def test_the_guard_sees_a_dropped_key() -> None:
    """The wrapper itself: a read of a dropped key at any depth is recorded, kept keys are not."""
    w = WORLDS["upstream TPU sample, a worker restarted"]()
    misses = Misses()
    pod = watched("Pod", w.pods[0], misses)
    assert pod["spec"]["containers"][0]["resources"]["limits"]["google.com/tpu"] == 4
    assert pod.get("status", {}).get("phase") == "Running"
    assert not misses.paths
    assert pod["spec"].get("volumes") is None
    assert [c.get("image") for c in pod["spec"]["containers"]] == [None]
    assert "dnsPolicy" not in pod["spec"]
    assert misses.paths == {"sample-0.spec.volumes", "sample-0.spec.containers[0].image",
                            "sample-0.spec.dnsPolicy"}
    # Of the conditions, only some types are kept, and of those not the probe time: each kept
    # condition is checked against the full pod's condition of its type.
    conditions = pod["status"]["conditions"]
    assert [c["type"] for c in conditions] == ["Ready", "ContainersReady", "PodScheduled"]
    assert [c.get("lastTransitionTime") for c in conditions] == ["2026-01-01T00:00:05Z"] * 3
    assert conditions[2].get("lastProbeTime") is None
    assert "sample-0.status.conditions[2].lastProbeTime" in misses.paths


def _logic_calls(path: Path) -> set[str]:
    """``module.function`` of every call into ``lws_operator.logic`` in a source file."""
    tree = ast.parse(path.read_text())
    names: dict[str, str] = {}
    modules: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "lws_operator.logic"):
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if full.startswith(PASS_MODULES) or _is_step(full) or _is_step(str(node.module)):
                    continue
                if (_PACKAGE.parent / (full.replace(".", "/") + ".py")).exists():
                    modules[alias.asname or alias.name] = alias.name
                else:
                    module = str(node.module).rsplit(".", 1)[1]
                    names[alias.asname or alias.name] = f"{module}.{alias.name}"
    calls: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Name) and func.id in names:
            calls.add(names[func.id])
        elif (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
              and func.value.id in modules):
            calls.add(f"{modules[func.value.id]}.{func.attr}")
    return calls


def test_every_logic_call_of_a_pass_is_classified() -> None:
    root = Path(lws_operator.__file__).parent
    called = set().union(*(_logic_calls(root / path) for path in CALLERS))
    assert "statefulsets.worker_statefulset" in called  # the scan works
    assert "gang.gates_without_ours" in called  # and reaches the shared writes (ungate)
    unclassified = called - set(READERS) - TAKE_NO_PODS
    assert not unclassified, (
        f"{sorted(unclassified)}: called by a pass but not classified here; if it reads cached "
        "pods, add it to READERS (and a world that reaches its reads), else to TAKE_NO_PODS")
