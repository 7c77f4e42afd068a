"""Which unmutated pods a pass deletes so their StatefulSet recreates them through the pod
webhook (``logic.mutation.recreation``), and the step that plans it
(``logic.mutation.recreate_step``): never while the webhook does not serve them, after a settle
time, one group at a time per set, a global bound, at most three attempts per group, Events and
the condition's message."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lws_operator.logic.leaderworkerset import finish_step as finish
from lws_operator.logic.mutation import recreate_step as recreate
from lws_operator.logic.mutation import recreation
from lws_operator.logic.mutation.recreation import (
    MAX_ATTEMPTS,
    MAX_IN_FLIGHT,
    REASON_NOT_RECREATED,
    REASON_RECREATING,
    SETTLE,
    decide,
    groups_of,
)
from lws_operator.logic.reconcile.plan import EMPTY, Delete, Plan, Planned, Record
from lws_operator.logic.reconcile.snapshot import (
    Memory,
    Observed,
    Options,
    PodWebhook,
    Recreation,
    Remember,
)
from lws_operator.logic.rollout.deadline import OFF
from lws_operator.logic.rollout.leader_step import ORDINAL

P = "leaderworkerset.sigs.k8s.io/"
NS = "team-a"
RULE = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
        "resources": ["pods"]}
HOOK = {"name": "mpod.kb.io", "rules": [RULE],
        "objectSelector": {"matchExpressions": [{"key": P + "name", "operator": "Exists"}]}}
SERVING = PodWebhook(HOOK, since=1000.0)
NO_MEMORY = Memory()
LATER = 1000.0 + SETTLE  # the settle time after the webhook began serving has passed
ELSEWHERE = PodWebhook({**HOOK, "namespaceSelector": {"matchExpressions": [
    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["team-b"]}]}},
    since=1000.0)


def sts(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": NS, "uid": f"uid-{name}",
                         "ownerReferences": [{"kind": "LeaderWorkerSet", "name": "a",
                                              "uid": "uid-lws", "controller": True}]},
            "spec": {"replicas": 2}, "status": {}}


LEADERS = sts("a")
WORKERS_0 = sts("a-0")
STATEFULSETS = (LEADERS, WORKERS_0)


def pod(name: str, owner: dict[str, Any] | None, uid: str | None = None,
        deleting: bool = False, labels: dict[str, str] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid or f"uid-{name}",
                            "labels": {P + "name": "a", **(labels or {})}}
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "StatefulSet", "name": owner["metadata"]["name"],
                                    "uid": owner["metadata"]["uid"], "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    return {"metadata": meta, "status": {}}


def leader(index: int, uid: str | None = None, deleting: bool = False) -> dict[str, Any]:
    """A leader as the leader StatefulSet creates it, unmutated."""
    return pod(f"a-{index}", LEADERS, uid, deleting, labels={P + "worker-index": "0"})


def worker(group: int, index: int) -> dict[str, Any]:
    """A worker as its worker StatefulSet creates it, unmutated (no worker-index)."""
    return pod(f"a-{group}-{index}", WORKERS_0, labels={P + "group-index": str(group)})


def run(pods: list[dict[str, Any]], webhook: PodWebhook | None = SERVING,
        state: Recreation | None = None, others: int = 0, clock: float = LATER,
        all_pods: list[dict[str, Any]] | None = None) -> recreation.Decision:
    return decide(NS, "a", pods, pods if all_pods is None else all_pods, STATEFULSETS,
                  webhook, state, others, clock)


def test_groups_are_named_after_leaders_and_worker_statefulsets() -> None:
    pods = [leader(1), leader(0), worker(0, 1), worker(0, 2),
            pod("stray", None), leader(2, deleting=True),
            pod("a-9", sts("not-ours"), labels={P + "worker-index": "0"})]
    groups = groups_of(pods, STATEFULSETS, "a")
    assert {g: [p["metadata"]["name"] for p in ps] for g, ps in groups.items()} == {
        "a-1": ["a-1"], "a-0": ["a-0", "a-0-1", "a-0-2"]}


@pytest.mark.parametrize(
    ("webhook", "clock", "others"),
    [
        (None, LATER, 0),  # not registered, or not answering
        (ELSEWHERE, LATER, 0),  # registered, but not for this namespace
        (SERVING, 1000.0 + SETTLE - 1, 0),  # serving since less than the settle time
        (SERVING, LATER, MAX_IN_FLIGHT),  # the global bound is reached
    ],
    ids=["no-webhook", "namespace-not-served", "settling", "global-bound"],
)
def test_nothing_is_deleted(webhook: PodWebhook | None, clock: float, others: int) -> None:
    decision = run([leader(0), leader(1)], webhook=webhook, clock=clock, others=others)
    assert decision.delete == ()
    assert not any(e.reason == REASON_RECREATING for e in decision.events)
    assert decision.state is None or not decision.state.in_flight


def test_one_group_at_a_time_lowest_first() -> None:
    pods = [leader(10), leader(2), worker(0, 1), worker(0, 2)]
    decision = run(pods)
    assert decision.group == "a-0"
    assert [p["metadata"]["name"] for p in decision.delete] == ["a-0-1", "a-0-2"]
    assert decision.state is not None
    assert decision.state.in_flight
    assert decision.state.deleted == {"uid-a-0-1", "uid-a-0-2"}
    assert decision.state.attempts == (("a-0", 1),)
    assert decision.requeue_after == SETTLE
    [event] = decision.events
    assert (event.reason, event.type) == (REASON_RECREATING, "Normal")
    assert "Deleting 2 pods of group a-0 (a-0-1, a-0-2)" in event.note
    assert "attempt 1 of 3" in event.note
    assert decision.state.note is not None
    assert "recreating group a-0 (attempt 1 of 3)" in decision.state.note


def test_in_flight_waits_for_the_deleted_pods_and_the_settle_time() -> None:
    first = run([leader(0), leader(1)])
    assert first.group == "a-0"
    state = first.state
    # The deleted pod is still there (terminating): wait, even after the settle time.
    terminating = leader(0, deleting=True)
    waiting = run([leader(1)], state=state, clock=LATER + 2 * SETTLE,
                  all_pods=[terminating, leader(1)])
    assert waiting.delete == ()
    assert waiting.state == state
    # Gone, but not settled yet: wait.
    assert run([leader(1)], state=state, clock=LATER + 1).delete == ()
    # Gone and settled: the next group.
    nxt = run([leader(1)], state=state, clock=LATER + SETTLE)
    assert nxt.group == "a-1"
    assert nxt.state is not None
    assert dict(nxt.state.attempts) == {"a-0": 1, "a-1": 1}


def test_a_group_that_comes_back_unmutated_is_tried_three_times_then_given_up() -> None:
    state: Recreation | None = None
    clock = LATER
    deleted = []
    for attempt in range(1, MAX_ATTEMPTS + 1):
        decision = run([leader(0, uid=f"u{attempt}")], state=state, clock=clock)
        assert decision.group == "a-0"
        assert f"attempt {attempt} of 3" in decision.events[0].note
        deleted.append(decision.delete)
        state, clock = decision.state, clock + SETTLE
    decision = run([leader(0, uid="u4")], state=state, clock=clock)
    assert decision.delete == ()
    [event] = decision.events
    assert (event.reason, event.type) == (REASON_NOT_RECREATED, "Warning")
    assert "group a-0" in event.note
    assert decision.state is not None
    assert decision.state.given_up == {"a-0"}
    assert "gave up recreating group a-0 after 3 attempts" in (decision.state.note or "")
    # Never again, and the Warning once: the passes after decide nothing new.
    again = run([leader(0, uid="u4")], state=decision.state, clock=clock + 100)
    assert (again.delete, again.events, again.state) == ((), (), decision.state)


def test_a_new_webhook_view_starts_the_attempts_again() -> None:
    given_up = Recreation(since=1000.0, attempts=(("a-0", MAX_ATTEMPTS),),
                          given_up=frozenset({"a-0"}))
    changed = PodWebhook(HOOK, since=2000.0)
    assert run([leader(0)], webhook=changed, state=given_up, clock=2000.0).delete == ()
    decision = run([leader(0)], webhook=changed, state=given_up, clock=2000.0 + SETTLE)
    assert decision.group == "a-0"
    assert decision.state is not None
    assert decision.state.attempts == (("a-0", 1),)


def test_the_webhook_going_away_ends_the_flight() -> None:
    flying = run([leader(0), leader(1)]).state
    assert flying is not None
    decision = run([leader(1)], webhook=None, state=flying)
    assert decision.delete == ()
    assert decision.state is not None
    assert not decision.state.in_flight
    assert decision.state.attempts == flying.attempts
    assert decision.state.note is None


def test_pods_of_no_statefulset_of_ours_are_left_alone() -> None:
    # A Hash leader (a ReplicaSet's) and a pod of someone else's StatefulSet.
    replica_set_pod = pod("a-abcde", None, labels={P + "worker-index": "0"})
    replica_set_pod["metadata"]["ownerReferences"] = [
        {"kind": "ReplicaSet", "name": "a-x", "uid": "uid-rs", "controller": True}]
    foreign = pod("a-7", sts("other"), labels={P + "worker-index": "0"})
    decision = run([replica_set_pod, foreign])
    assert decision.delete == ()
    assert decision.events == ()


# ---------------------------------------------------------------------------- the step


def observed(pods: list[dict[str, Any]], memory: Memory = NO_MEMORY,
             webhook: PodWebhook | None = SERVING, clock: float = LATER,
             recreating: frozenset[tuple[str, str]] = frozenset()) -> Observed:
    body = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
            "metadata": {"name": "a", "namespace": NS, "uid": "uid-lws", "generation": 1},
            "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 1}},
            "status": {}}
    return Observed(body, (), tuple(pods), STATEFULSETS, (), {}, (), (), {}, {}, (),
                    "2026-12-06T10:00:00Z", clock,
                    Options(60.0, pod_webhook=webhook, recreating=recreating), memory)


def test_the_step_deletes_with_uid_preconditions_and_remembers() -> None:
    plan = recreate.step(observed([leader(0), leader(1)]))
    deletes = [a for a in plan.plan.actions if isinstance(a, Delete)]
    assert [(d.target.collection, d.name, d.uid) for d in deletes] == [
        (f"/api/v1/namespaces/{NS}/pods", "a-0", "uid-a-0")]
    assert [e.reason for e in deletes[0].common.events] == [REASON_RECREATING]
    assert isinstance(plan.plan.carry, Remember)  # kept by the controller
    assert plan.plan.carry.memory.recreation == plan.value.state
    assert plan.value.state is not None
    assert plan.value.state.group == "a-0"
    assert plan.value.requeue == SETTLE  # handed to the status step


def test_the_step_counts_other_sets_in_flight_only() -> None:
    ours = {(NS, "a")}
    others = {(NS, f"b{i}") for i in range(MAX_IN_FLIGHT)}
    full = recreate.step(observed([leader(0)], recreating=frozenset(others)))
    assert not [a for a in full.plan.actions if isinstance(a, Delete)]
    mine = frozenset(ours | set(list(others)[:MAX_IN_FLIGHT - 1]))
    assert [a for a in recreate.step(observed([leader(0)], recreating=mine)).plan.actions
            if isinstance(a, Delete)]


def test_the_step_plans_nothing_without_unmutated_pods_or_memory() -> None:
    assert recreate.step(observed([])) == Planned(EMPTY, recreate.NOTHING)


def test_a_warning_without_a_deletion_is_recorded() -> None:
    given = Recreation(since=1000.0, attempts=(("a-0", MAX_ATTEMPTS),))
    plan = recreate.step(observed([leader(0)], Memory(recreation=given)))
    assert [a.event.reason for a in plan.plan.actions if isinstance(a, Record)] == [
        REASON_NOT_RECREATED]


def _status(obs: Observed, recreating: Recreation | None) -> Plan:
    """The status step, handed the recreation as the pass hands it over."""
    return finish.status(obs, ORDINAL, "", (), deadline=OFF, scheduling=None,
                         recreating=recreating, requeue=None)


def test_the_condition_message_says_what_is_done() -> None:
    state = run([leader(0), leader(1)]).state
    obs = observed([leader(0), leader(1)], Memory(recreation=state))
    plan = _status(obs, state)
    body = next(a.body for a in plan.actions if hasattr(a, "body"))
    [cond] = [c for c in body["status"]["conditions"] if c["type"] == "Progressing"]
    assert cond["reason"] == "PodsNotMutated"
    assert cond["message"].startswith("2 pods of this LeaderWorkerSet")
    assert cond["message"].endswith(
        "the operator is recreating group a-0 (attempt 1 of 3), one group at a time.")
    without = _status(replace(obs, memory=Memory()), None)
    body = next(a.body for a in without.actions if hasattr(a, "body"))
    [cond] = [c for c in body["status"]["conditions"] if c["type"] == "Progressing"]
    assert cond["message"].endswith("recreates them through it.")


# ---------------------------------------------------------------------------- the controller


def test_the_controller_counts_sets_in_flight_and_hands_the_view_to_passes() -> None:
    from typing import cast

    from lws_operator.controllers.leaderworkerset import LeaderWorkerSetReconciler
    from lws_operator.kube.cache import ClusterCache

    reconciler = LeaderWorkerSetReconciler(cast(Any, None), ClusterCache(), cast(Any, None))
    flying = run([leader(0)]).state
    assert flying is not None
    reconciler._remember((NS, "a"), Memory(recreation=flying))
    reconciler.pod_webhook = SERVING
    options = reconciler._options()
    assert (options.pod_webhook, options.recreating) == (SERVING, {(NS, "a")})
    assert reconciler._options() is options  # unchanged: the same options
    assert reconciler.with_unmutated_pods() == [(NS, "a")]
    reconciler._remember((NS, "a"), Memory(recreation=replace(flying, group=None)))
    assert reconciler._options().recreating == frozenset()
    reconciler._remember((NS, "a"), Memory())
    assert reconciler.with_unmutated_pods() == []
