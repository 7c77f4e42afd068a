"""The lws_* group metric derivations: states, budget, and transitions between snapshots."""

from __future__ import annotations

import itertools
import random
from dataclasses import replace
from typing import Any

import pytest

from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION,
    GROUP_RESTART_COUNTS_ANNOTATION,
    MAX_DISRUPTED_GROUPS_ANNOTATION,
    NAME_LABEL,
    ROLLED_BACK_FROM_ANNOTATION,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.logic.status.group_metrics import (
    GroupView,
    Memory,
    RolloutGauges,
    RolloutView,
    budget_remaining,
    group_views,
    observe,
    rollout_gauges,
    rollout_view,
    state_counts,
)

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
CREATED = "2027-01-15T08:00:00Z"


def lws(replicas: int = 2, size: int = 2, budget: int | None = None,
        counts: str | None = None, updating: bool = False) -> dict[str, Any]:
    template: dict[str, Any] = {"size": size}
    if budget is not None:
        template["maxGroupRestarts"] = budget
    annotations = {GROUP_RESTART_COUNTS_ANNOTATION: counts} if counts else {}
    conditions = [{"type": "UpdateInProgress", "status": "True" if updating else "False"}]
    return {"metadata": {"name": "demo", "namespace": "ns", "annotations": annotations},
            "spec": {"replicas": replicas, "leaderWorkerTemplate": template},
            "status": {"conditions": conditions}}


def pod(group: int, worker: int = 0, *, uid: str | None = None, ready: bool = True,
        phase: str = "Running", restarts: int = 0, deleting: bool = False,
        revision: str = "r1", gated: bool = False, unschedulable: bool = False,
        exhausted: bool = False) -> dict[str, Any]:
    name = f"demo-{group}" + (f"-{worker}" if worker else "")
    meta: dict[str, Any] = {
        "name": name, "namespace": "ns", "uid": uid or f"uid-{name}",
        "creationTimestamp": CREATED,
        "labels": {NAME_LABEL: "demo", GROUP_INDEX_LABEL: str(group),
                   WORKER_INDEX_LABEL: str(worker), TEMPLATE_REVISION_HASH_LABEL: revision},
        "annotations": {GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION: "true"} if exhausted else {}}
    if deleting:
        meta["deletionTimestamp"] = CREATED
    conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    if gated or unschedulable:
        phase = "Pending"
        conditions.append({"type": "PodScheduled", "status": "False",
                           "reason": "SchedulingGated" if gated else "Unschedulable"})
    return {"metadata": meta, "spec": {},
            "status": {"phase": phase, "conditions": conditions,
                       "containerStatuses": [{"restartCount": restarts}]}}


def sts(group: int, ready: bool = True) -> dict[str, Any]:
    status = {"replicas": 1, "readyReplicas": 1 if ready else 0, "currentRevision": "a",
              "updateRevision": "a", "availableReplicas": 1 if ready else 0,
              "updatedReplicas": 1, "observedGeneration": 1}
    return {"metadata": {"name": f"demo-{group}", "generation": 1},
            "spec": {"replicas": 1}, "status": status}


@pytest.mark.parametrize(("pods", "worker_ready", "state"), [
    ([pod(0), pod(0, 1)], True, "ready"),
    ([pod(0), pod(0, 1, ready=False)], False, "progressing"),
    ([pod(0), pod(0, 1, ready=False, phase="Failed")], False, "failed"),
    ([pod(0), pod(0, 1, restarts=2)], False, "failed"),
    ([pod(0), pod(0, 1, restarts=2)], True, "ready"),  # restarted but Ready again: ready
    ([pod(0, ready=False, gated=True)], False, "gated"),
    ([pod(0), pod(0, 1, ready=False, unschedulable=True)], False, "unschedulable"),
    ([pod(0, deleting=True), pod(0, 1)], True, "terminating"),
    ([pod(0, deleting=True, exhausted=True)], True, "exhausted"),
])
def test_group_state(pods: list[dict[str, Any]], worker_ready: bool, state: str) -> None:
    (view,) = group_views(lws(replicas=1), pods, [sts(0, worker_ready)])
    assert view.state == state


def test_size_one_needs_no_worker_statefulset() -> None:
    (view,) = group_views(lws(replicas=1, size=1), [pod(0)], [])
    assert view.state == "ready"


def test_the_live_leader_speaks_for_a_group_being_replaced() -> None:
    old = pod(0, uid="old", deleting=True)
    new = pod(0, uid="new", ready=False)
    (view,) = group_views(lws(replicas=1), [old, new], [])
    assert (view.leader_uid, view.state) == ("new", "progressing")


def test_state_counts_cover_every_state_and_missing_groups() -> None:
    views = group_views(lws(replicas=3), [pod(0), pod(0, 1)], [sts(0)])
    counts = state_counts(lws(replicas=3), views)
    assert counts["ready"] == 1
    assert counts["missing"] == 2
    assert counts["failed"] == 0
    assert set(counts) == {"ready", "progressing", "failed", "gated", "unschedulable",
                           "terminating", "exhausted", "missing"}
    assert sum(counts.values()) == 3


@pytest.mark.parametrize(("budget", "counts", "exhausted", "expected"), [
    (None, None, False, {}),
    (3, None, False, {"0": 3, "1": 3}),
    (3, '{"r1/0":2}', False, {"0": 1, "1": 3}),
    (3, '{"r0/0":2}', False, {"0": 3, "1": 3}),  # another revision's count: a fresh budget
    (1, '{"r1/1":5}', False, {"0": 1, "1": 0}),
    (2, None, True, {"0": 0, "1": 2}),
])
def test_budget_remaining(budget: int | None, counts: str | None, exhausted: bool,
                          expected: dict[str, int]) -> None:
    spec = lws(budget=budget, counts=counts)
    pods = [pod(0, deleting=exhausted, exhausted=exhausted), pod(1)]
    assert budget_remaining(spec, group_views(spec, pods, [])) == expected


def view(group: str = "0", uid: str = "u1", state: str = "progressing", revision: str = "r1",
         failure: bool = False, created: float = T0) -> GroupView:
    return GroupView(group, uid, created, revision, state, failure)


@pytest.mark.parametrize(("before", "after", "reasons"), [
    (view(uid="u1"), view(uid="u2"), ("pod-deleted",)),
    (view(uid="u1", failure=True), view(uid="u2"), ("pod-failure",)),
    (view(uid="u1", revision="r1"), view(uid="u2", revision="r2"), ("rollout",)),
    (view(uid="u1", state="exhausted"), view(uid="u2"), ("recovered",)),
    (view(uid="u1"), view(uid="u1", state="ready"), ()),
])
def test_recreation_reasons(before: GroupView, after: GroupView,
                            reasons: tuple[str, ...]) -> None:
    memory, _ = observe(None, lws(), [before], RolloutView(False), T0)
    _, seen = observe(memory, lws(), [after], RolloutView(False), T0 + 5)
    assert seen.recreations == reasons


def test_a_failure_seen_earlier_in_an_incarnation_is_its_reason() -> None:
    memory, _ = observe(None, lws(), [view()], RolloutView(False), T0)
    memory, _ = observe(memory, lws(), [view(failure=True, state="failed")], RolloutView(False),
                        T0 + 1)
    memory, _ = observe(memory, lws(), [view(state="terminating")], RolloutView(False), T0 + 2)
    memory, _ = observe(memory, lws(), [], RolloutView(False), T0 + 3)  # between incarnations
    _, seen = observe(memory, lws(), [view(uid="u2")], RolloutView(False), T0 + 4)
    assert seen.recreations == ("pod-failure",)


@pytest.mark.parametrize(("failure", "revision", "reasons"), [
    (True, "r1", ("pod-failure",)),
    (False, "r0", ("rollout",)),   # an older revision than the newest leader's
    (False, "r1", ()),             # scale-down: not a recreation
])
def test_hash_recreations_show_as_a_group_starting_to_terminate(
        failure: bool, revision: str, reasons: tuple[str, ...]) -> None:
    spec = {**lws(), "spec": {**lws()["spec"], "groupIdentity": "Hash"}}
    newest = view(group="bbbbbbbb", uid="ub", revision="r1", created=T0 + 1)
    before = view(group="aaaaaaaa", revision=revision, state="ready", failure=failure)
    memory, _ = observe(None, spec, [before, newest], RolloutView(False), T0 + 2)
    _, seen = observe(memory, spec, [replace(before, state="terminating"), newest],
                      RolloutView(False), T0 + 3)
    assert seen.recreations == reasons


def test_time_to_ready_is_observed_once_per_incarnation() -> None:
    memory, seen = observe(None, lws(), [view()], RolloutView(False), T0 + 1)
    assert seen.ready_seconds == ()
    memory, seen = observe(memory, lws(), [view(state="ready")], RolloutView(False), T0 + 30)
    assert seen.ready_seconds == (30.0,)
    memory, seen = observe(memory, lws(), [view(state="failed")], RolloutView(False), T0 + 40)
    memory, seen = observe(memory, lws(), [view(state="ready")], RolloutView(False), T0 + 50)
    assert seen.ready_seconds == ()


def test_the_first_snapshot_only_seeds() -> None:
    """After an operator restart, groups found Ready and rollouts under way have no start this
    process saw: nothing is observed for them, and nothing counted as recreated."""
    memory, seen = observe(None, lws(updating=True), [view(state="ready")],
                           RolloutView(True, 1, 2), T0 + 100)
    assert seen == type(seen)()
    memory, seen = observe(memory, lws(updating=True), [view(state="ready")],
                           RolloutView(True, 0, 2), T0 + 110)
    assert seen.ready_seconds == ()
    assert seen.step_seconds == ()  # its start was not seen
    memory, seen = observe(memory, lws(), [view(state="ready")], RolloutView(False), T0 + 130)
    assert seen.step_seconds == (20.0,)
    assert seen.rollout_seconds == ()  # began before we watched


def test_rollout_steps_and_duration() -> None:
    memory, _ = observe(None, lws(), [], RolloutView(False), T0)
    steps = [(T0 + 10, RolloutView(True, 2, 3)), (T0 + 25, RolloutView(True, 1, 3)),
             (T0 + 27, RolloutView(True, 1, 3)), (T0 + 45, RolloutView(True, 0, 3)),
             (T0 + 50, RolloutView(False))]
    observed: list[float] = []
    total: list[float] = []
    for now, rollout in steps:
        memory, seen = observe(memory, lws(), [], rollout, now)
        observed += seen.step_seconds
        total += seen.rollout_seconds
    assert observed == [15.0, 20.0, 5.0]
    assert total == [40.0]
    assert memory == Memory(rollout=RolloutView(False))


def test_groups_scaled_away_are_forgotten_and_gaps_remembered() -> None:
    memory, _ = observe(None, lws(replicas=2), [view("0"), view("1", uid="b")],
                        RolloutView(False), T0)
    memory, _ = observe(memory, lws(replicas=1), [view("0")], RolloutView(False), T0 + 1)
    assert set(memory.groups) == {"0"}
    memory, _ = observe(memory, lws(replicas=1), [], RolloutView(False), T0 + 2)
    assert set(memory.groups) == {"0"}


@pytest.mark.parametrize(("status", "sts_spec", "expected"), [
    ({}, None, RolloutView(False)),
    ({"conditions": [{"type": "UpdateInProgress", "status": "True"}]},
     {"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 2}}},
     RolloutView(True, 2, 3)),
    ({"conditions": [{"type": "UpdateInProgress", "status": "False"}]},
     {"replicas": 3, "updateStrategy": {"rollingUpdate": {"partition": 2}}},
     RolloutView(False)),
])
def test_rollout_view(status: dict[str, Any], sts_spec: dict[str, Any] | None,
                      expected: RolloutView) -> None:
    leader = None if sts_spec is None else {"spec": sts_spec}
    assert rollout_view({"status": status}, leader) == expected


@pytest.mark.parametrize(("status", "expected"), [
    ({}, RolloutGauges(False, False, 3, 0)),
    ({"updatedReplicas": 1, "conditions": [
        {"type": "UpdateInProgress", "status": "True"},
        {"type": "Progressing", "status": "True", "reason": "GroupsProgressing"}]},
     RolloutGauges(True, False, 3, 1)),
    ({"updatedReplicas": 2, "conditions": [
        {"type": "UpdateInProgress", "status": "True"},
        {"type": "Progressing", "status": "False", "reason": "RolloutStalled"}]},
     RolloutGauges(True, True, 3, 2)),
    # Progressing=False for another reason (pods not mutated) is no stall.
    ({"updatedReplicas": 3, "conditions": [
        {"type": "UpdateInProgress", "status": "False"},
        {"type": "Progressing", "status": "False", "reason": "PodsNotMutated"}]},
     RolloutGauges(False, False, 3, 3)),
])
def test_rollout_gauges(status: dict[str, Any], expected: RolloutGauges) -> None:
    body = lws(replicas=3)
    body["status"] = status
    assert rollout_gauges(body) == expected


def _series(registry: Any, prefix: str = "lws_") -> dict[tuple[str, tuple[tuple[str, str], ...]],
                                                        float]:
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in registry.collect() for s in family.samples
            if s.name.startswith(prefix)}


def test_exporter_reports_groups_and_forgets_a_deleted_leaderworkerset() -> None:
    from prometheus_client import CollectorRegistry

    from lws_operator.kube.cache import ClusterCache
    from lws_operator.kube.group_metrics import GroupMetrics

    registry = CollectorRegistry()
    clock = iter([T0 + 10, T0 + 20, T0 + 30, T0 + 40])
    metrics = GroupMetrics(registry, clock=lambda: next(clock))
    cache = ClusterCache()
    for store in cache.stores.values():
        store.synced = True
    cache["LeaderWorkerSet"].upsert(lws(replicas=2, size=1, budget=2))
    cache["Pod"].upsert(pod(0, ready=False))
    metrics.observe(("ns", "demo"), cache)
    cache["Pod"].upsert(pod(0))
    metrics.observe(("ns", "demo"), cache)
    series = _series(registry)
    labels = (("name", "demo"), ("namespace", "ns"))
    assert series[("lws_groups", (*labels, ("state", "ready")))] == 1
    assert series[("lws_groups", (*labels, ("state", "missing")))] == 1
    assert series[("lws_group_ready_seconds_count", labels)] == 1
    assert series[("lws_group_ready_seconds_sum", labels)] == 20.0
    assert series[("lws_group_restart_budget_remaining",
                   (("group", "0"), *labels))] == 2
    assert series[("lws_group_recreations_total", (*labels, ("reason", "pod-deleted")))] == 0
    assert series[("lws_rollout_in_progress", labels)] == 0
    assert series[("lws_rollout_stalled", labels)] == 0
    assert series[("lws_rollout_groups", (*labels, ("state", "desired")))] == 2
    assert series[("lws_rollout_groups", (*labels, ("state", "updated")))] == 0
    # Another set's series stay when this one's go.
    other = lws(replicas=1, size=1, budget=1)
    other = {**other, "metadata": {**other["metadata"], "name": "other", "uid": "uid-other"}}
    cache["LeaderWorkerSet"].upsert(other)
    metrics.observe(("ns", "other"), cache)
    kept = {k: v for k, v in _series(registry).items() if ("name", "other") in k[1]}
    assert kept[("lws_rollout_groups",
                 (("name", "other"), ("namespace", "ns"), ("state", "desired")))] == 1
    cache["LeaderWorkerSet"].delete(lws())
    metrics.observe(("ns", "demo"), cache)
    assert _series(registry) == kept
    cache["LeaderWorkerSet"].delete(other)
    metrics.observe(("ns", "other"), cache)
    assert _series(registry) == {}


def _counting_exporter() -> tuple[Any, Any, Any, list[float]]:
    """A registry, an exporter on it whose clock records each read (one per export), and a
    synced cache; the reads tell how many exports happened."""
    from prometheus_client import CollectorRegistry

    from lws_operator.kube.cache import ClusterCache
    from lws_operator.kube.group_metrics import GroupMetrics

    registry = CollectorRegistry()
    reads: list[float] = []

    def clock() -> float:
        reads.append(T0 + 10 * len(reads))
        return reads[-1]

    cache = ClusterCache()
    for store in cache.stores.values():
        store.synced = True
    return registry, GroupMetrics(registry, clock=clock), cache, reads


def test_exporter_reads_again_only_what_changed() -> None:
    """A pass that changed nothing the metrics read exports nothing again; any change of the
    set's pods, StatefulSets or the set itself does."""
    registry, metrics, cache, reads = _counting_exporter()
    cache["LeaderWorkerSet"].upsert(lws(replicas=2, size=1))
    cache["Pod"].upsert(pod(0, ready=False))
    key = ("ns", "demo")
    metrics.observe(key, cache)
    before = _series(registry)
    metrics.observe(key, cache)
    assert len(reads) == 1
    assert _series(registry) == before
    cache["Pod"].upsert(pod(0))
    metrics.observe(key, cache)
    assert len(reads) == 2
    labels = (("name", "demo"), ("namespace", "ns"))
    assert _series(registry)[("lws_groups", (*labels, ("state", "ready")))] == 1
    cache["LeaderWorkerSet"].upsert(lws(replicas=1, size=1))
    metrics.observe(key, cache)
    assert len(reads) == 3
    assert _series(registry)[("lws_groups", (*labels, ("state", "missing")))] == 0


def test_group_views_derive_again_only_groups_whose_objects_changed() -> None:
    spec = lws(replicas=2)
    pods = [pod(0), pod(0, 1), pod(1), pod(1, 1)]
    statefulsets = [sts(0), sts(1)]
    known: dict[str, Any] = {}
    first = group_views(spec, pods, statefulsets, known)
    assert first == group_views(spec, pods, statefulsets)
    again = group_views(spec, pods, statefulsets, known)
    assert all(a is b for a, b in zip(first, again, strict=True))  # nothing derived again
    pods[2] = pod(1, ready=False)  # a new object for group 1's leader
    changed = group_views(spec, pods, statefulsets, known)
    assert changed == group_views(spec, pods, statefulsets)
    assert changed[0] is first[0]
    assert changed[1].state == "progressing"
    assert group_views(spec, pods[:2], statefulsets, known) == [first[0]]
    assert set(known) == {"0"}  # groups gone are forgotten


def test_exporter_reports_the_progress_deadline_and_counts_rollbacks() -> None:
    """The deadline gauge follows the condition; the rollback counter counts each change of
    the rolled-back-from annotation this process saw (not the value it found at start)."""
    from prometheus_client import CollectorRegistry

    from lws_operator.kube.cache import ClusterCache
    from lws_operator.kube.group_metrics import GroupMetrics

    registry = CollectorRegistry()
    metrics = GroupMetrics(registry, clock=lambda: T0)
    cache = ClusterCache()
    for store in cache.stores.values():
        store.synced = True
    labels = (("name", "demo"), ("namespace", "ns"))

    def observe(exceeded: bool, rolled_back_from: str | None) -> dict[Any, float]:
        obj = lws(updating=True)
        if exceeded:
            obj["status"]["conditions"].append({"type": "Progressing", "status": "False",
                                                "reason": "ProgressDeadlineExceeded"})
        if rolled_back_from is not None:
            obj["metadata"]["annotations"][ROLLED_BACK_FROM_ANNOTATION] = rolled_back_from
        cache["LeaderWorkerSet"].upsert(obj)
        metrics.observe(("ns", "demo"), cache)
        series = _series(registry)
        return {name: series[(name, labels)] for name in (
            "lws_rollout_deadline_exceeded", "lws_rollout_rollbacks_total")}

    assert observe(False, "old") == {"lws_rollout_deadline_exceeded": 0,
                                     "lws_rollout_rollbacks_total": 0}
    assert observe(True, "old") == {"lws_rollout_deadline_exceeded": 1,
                                    "lws_rollout_rollbacks_total": 0}
    assert observe(False, "bad") == {"lws_rollout_deadline_exceeded": 0,
                                     "lws_rollout_rollbacks_total": 1}
    assert observe(False, "bad") == {"lws_rollout_deadline_exceeded": 0,
                                     "lws_rollout_rollbacks_total": 1}


@pytest.mark.parametrize("budget", [None, "1"])
def test_exporter_reports_the_disruption_budget_from_the_start(budget: str | None) -> None:
    """With a group disruption budget, the disrupted gauge and both eviction decisions' series
    (at 0, so the dashboard's increase() counts the first eviction); without one, none."""
    from prometheus_client import CollectorRegistry

    from lws_operator.kube.cache import ClusterCache
    from lws_operator.kube.group_metrics import GroupMetrics

    registry = CollectorRegistry()
    metrics = GroupMetrics(registry, clock=lambda: T0)
    cache = ClusterCache()
    for store in cache.stores.values():
        store.synced = True
    obj = lws(replicas=2, size=1)
    if budget is not None:
        obj["metadata"]["annotations"][MAX_DISRUPTED_GROUPS_ANNOTATION] = budget
    cache["LeaderWorkerSet"].upsert(obj)
    cache["Pod"].upsert(pod(0))
    metrics.observe(("ns", "demo"), cache)
    labels = (("name", "demo"), ("namespace", "ns"))
    found = {key: value for key, value in _series(registry).items()
             if key[0] in ("lws_disrupted_groups", "lws_evictions_total")}
    if budget is None:
        assert found == {}
    else:
        assert found == {
            ("lws_disrupted_groups", labels): 1,  # group 1 has no pod
            ("lws_evictions_total", (("decision", "allowed"), *labels)): 0,
            ("lws_evictions_total", (("decision", "refused"), *labels)): 0}


def _worker_sts(group: int, ready: bool = True, version: int = 1) -> dict[str, Any]:
    """``sts`` as the cache holds it: labelled with its set, at resourceVersion ``version``."""
    out = sts(group, ready=ready)
    out["metadata"].update(labels={NAME_LABEL: "demo"}, namespace="ns", uid=f"uid-sts-{group}",
                           resourceVersion=str(version))
    return out


@pytest.mark.parametrize(("budget", "change", "exports", "disrupted"), [
    # A worker pod's new state that moves no group's view: nothing derived again.
    (None, "worker resourceVersion", 1, None),
    # Ready still (its StatefulSet is), but a failure is seen now: derived again.
    (None, "worker restarted", 2, None),
    # With a disruption budget the disrupted gauge reads the pods themselves: exported.
    ("1", "worker resourceVersion", 2, 0),
    ("1", "worker deleting", 2, 1),
])
def test_exporter_skips_an_export_that_would_repeat_itself(
        budget: str | None, change: str, exports: int, disrupted: int | None) -> None:
    registry, metrics, cache, reads = _counting_exporter()
    obj = lws(replicas=1, size=2)
    if budget is not None:
        obj["metadata"]["annotations"][MAX_DISRUPTED_GROUPS_ANNOTATION] = budget
    cache["LeaderWorkerSet"].upsert(obj)
    cache["StatefulSet"].upsert(_worker_sts(0))
    cache["Pod"].upsert(pod(0))
    cache["Pod"].upsert(pod(0, 1))
    key = ("ns", "demo")
    metrics.observe(key, cache)
    before = _series(registry)
    worker = pod(0, 1, restarts=1 if change == "worker restarted" else 0,
                 deleting=change == "worker deleting")
    worker["metadata"]["resourceVersion"] = "7"
    cache["Pod"].upsert(worker)
    metrics.observe(key, cache)
    assert len(reads) == exports
    labels = (("name", "demo"), ("namespace", "ns"))
    after = _series(registry)
    if disrupted is None:
        assert after == before
    else:
        assert after[("lws_disrupted_groups", labels)] == disrupted


@pytest.mark.parametrize("seed", range(200))
def test_every_group_that_turns_ready_is_timed_once(seed: int) -> None:
    """Whatever the order of the groups' steps (leader, worker StatefulSet, worker, then the
    leader, the worker and the StatefulSet turning Ready in any order), our own status writes
    between them, and which of the changes a pass follows: once every group is Ready and a
    pass has exported it, each group's time to Ready was observed exactly once. The
    exporter's shortcuts (``_unchanged``, ``_repeats``, the views kept per group) must never
    hide a transition. (A live run once counted 1 of 2 groups.)"""
    rng = random.Random(seed)
    groups = rng.randint(1, 4)
    registry, metrics, cache, _ = _counting_exporter()
    key, versions = ("ns", "demo"), itertools.count(10)
    obj = lws(replicas=groups, size=2)
    obj["metadata"].update(uid="uid-demo", resourceVersion=str(next(versions)))
    cache["LeaderWorkerSet"].upsert(obj)
    metrics.observe(key, cache)  # the set's first pass: no pod yet
    todo = {}
    for group in range(groups):
        readiness = ["leader_ready", "worker_ready", "sts_ready"]
        rng.shuffle(readiness)
        todo[group] = ["leader", "sts", "worker", *readiness]
    while any(todo.values()):
        group = rng.choice([g for g, steps in todo.items() if steps])
        step = todo[group].pop(0)  # one event: the one object the step changed
        if step.startswith("sts"):
            cache["StatefulSet"].upsert(_worker_sts(group, step == "sts_ready", next(versions)))
        else:
            member = pod(group, int(step.startswith("worker")), ready=step.endswith("_ready"))
            member["metadata"]["resourceVersion"] = str(next(versions))
            cache["Pod"].upsert(member)
        if rng.random() < 0.3:  # a status write of ours: a new object of the set
            obj = {**obj, "metadata": {**obj["metadata"],
                                       "resourceVersion": str(next(versions))}}
            cache["LeaderWorkerSet"].upsert(obj)
        if rng.random() < 0.5:
            metrics.observe(key, cache)
    metrics.observe(key, cache)
    labels = (("name", "demo"), ("namespace", "ns"))
    series = _series(registry)
    assert series[("lws_groups", (*labels, ("state", "ready")))] == groups
    assert series[("lws_group_ready_seconds_count", labels)] == groups
