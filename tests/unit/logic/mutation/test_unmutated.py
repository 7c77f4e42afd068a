"""Pods the pod webhook never saw: which they are, and what the LeaderWorkerSet says about them
(``Progressing=False``/``PodsNotMutated``, one Warning Event, no write on a pass that changes
nothing)."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.constants import REASON_ROLLOUT_STALLED
from lws_operator.logic.mutation.unmutated import (
    REASON_PODS_NOT_MUTATED,
    apply_unmutated,
    missing_labels,
    not_mutated_message,
    split,
)
from lws_operator.logic.objects.events import Event
from lws_operator.logic.rollout.stall import (
    apply_stall,
    find_stall,
    unstall_view,
)
from lws_operator.logic.status.set_status import StatusError, compute_status

P = "leaderworkerset.sigs.k8s.io/"
NAME, GROUP, KEY, WORKER = P + "name", P + "group-index", P + "group-key", P + "worker-index"


def pod(name: str, labels: dict[str, str], deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "lws-system",
                            "labels": {P + "template-revision-hash": "k1", **labels}}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T10:00:00Z"
    return {"metadata": meta, "status": {}}


# As the leader StatefulSet's template makes them, before and after the pod webhook.
RAW_LEADER = {NAME: "a", WORKER: "0"}
LEADER = {**RAW_LEADER, GROUP: "0", KEY: "f00"}
# As the worker StatefulSet's template makes them (group labels from the leader).
RAW_WORKER = {NAME: "a", GROUP: "0", KEY: "f00"}
WORKER_POD = {**RAW_WORKER, WORKER: "1"}


@pytest.mark.parametrize(
    ("labels", "missing"),
    [
        (RAW_LEADER, (GROUP, KEY)),
        ({**RAW_LEADER, GROUP: "0"}, (KEY,)),
        (LEADER, ()),
        (RAW_WORKER, (WORKER,)),
        (WORKER_POD, ()),
        ({"app": "web"}, ()),  # not a LeaderWorkerSet's pod at all
    ],
)
def test_missing_labels(labels: dict[str, str], missing: tuple[str, ...]) -> None:
    assert missing_labels(pod("a-0", labels)) == missing


def test_split_keeps_the_objects_and_their_order() -> None:
    pods = [pod("a-0", LEADER), pod("a-1", RAW_LEADER), pod("a-0-1", WORKER_POD),
            pod("a-0-2", RAW_WORKER)]
    admitted, unmutated = split(pods)
    assert admitted == [pods[0], pods[2]]
    assert admitted[0] is pods[0]
    assert unmutated == [pods[1], pods[3]]


def test_message_names_the_webhook_the_namespace_and_the_remedy() -> None:
    message = not_mutated_message("lws-system", [
        pod("a-1", RAW_LEADER), pod("a-0", RAW_LEADER), pod("a-0-1", WORKER_POD),
        pod("a-2", RAW_LEADER, deleting=True)])
    assert message is not None
    assert message.startswith(f"2 pods of this LeaderWorkerSet (e.g. a-0, without label {GROUP})")
    assert "pod webhook mpod.kb.io" in message
    assert "does not serve namespace lws-system" in message
    assert "then delete these pods" in message


@pytest.mark.parametrize("pods", [[], [pod("a-0", LEADER)], [pod("a-0", RAW_LEADER,
                                                                   deleting=True)]])
def test_no_message_without_live_unmutated_pods(pods: list[dict[str, Any]]) -> None:
    assert not_mutated_message("ns", pods) is None


LWS: dict[str, Any] = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
       "metadata": {"name": "a", "namespace": "lws-system", "generation": 1},
       "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2}}}
LEADER_STS: dict[str, Any] = {"metadata": {"name": "a"}, "status": {"replicas": 2}}


def a_pass(observed: dict[str, Any], pods: list[dict[str, Any]], now: str,
           stall_events: tuple[Event, ...] = ()) -> tuple[dict[str, Any], tuple[Event, ...]]:
    """The status part of a controller pass (``_finish``), over the pods it decides on."""
    admitted, _ = split(pods)
    leaders = [p for p in admitted if p["metadata"]["labels"].get(WORKER) == "0"]
    decision = compute_status({**LWS, "status": unstall_view(observed)}, "k1", LEADER_STS,
                              leaders, [], now)
    desired, events = apply_unmutated(decision.status, observed, "lws-system", pods, now,
                                      stall_events)
    return desired, (*decision.events, *events)


def progressing(status: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in status["conditions"] if c["type"] == "Progressing")


def test_unmutated_leaders_fail_the_status_without_the_split() -> None:
    """What used to happen on every pass: the status computation raised."""
    with pytest.raises(StatusError):
        compute_status({**LWS, "status": {}}, "k1", LEADER_STS,
                       [pod("a-0", RAW_LEADER), pod("a-1", RAW_LEADER)], [], "t1")


def test_condition_and_one_warning_then_passes_that_change_nothing() -> None:
    pods = [pod("a-0", RAW_LEADER), pod("a-1", RAW_LEADER)]
    first, events = a_pass({}, pods, "t1")
    cond = progressing(first)
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"],
            cond["observedGeneration"]) == ("False", REASON_PODS_NOT_MUTATED, "t1", 1)
    assert "2 pods of this LeaderWorkerSet" in cond["message"]
    warnings = [e for e in events if e.type == "Warning"]
    assert [(e.reason, e.note) for e in warnings] == [(REASON_PODS_NOT_MUTATED, cond["message"])]
    # Every later pass over the same pods: the same status (no write) and no Event at all.
    again, events = a_pass(first, pods, "t2")
    assert again == first
    assert events == ()


def test_more_pods_update_the_message_without_another_event() -> None:
    first, _ = a_pass({}, [pod("a-0", RAW_LEADER)], "t1")
    later, events = a_pass(first, [pod("a-0", RAW_LEADER), pod("a-1", RAW_LEADER)], "t2")
    assert "2 pods" in progressing(later)["message"]
    assert progressing(later)["lastTransitionTime"] == "t1"
    assert events == ()


def test_once_the_pods_are_gone_progressing_is_spec_3_7s_again() -> None:
    stuck, _ = a_pass({}, [pod("a-0", RAW_LEADER)], "t1")
    healed, events = a_pass(stuck, [pod("a-0", LEADER)], "t2")
    cond = progressing(healed)
    assert (cond["status"], cond["reason"], cond["lastTransitionTime"]) == (
        "True", "GroupsProgressing", "t2")
    assert events == ()


def test_an_available_set_with_a_stray_unmutated_pod_says_so() -> None:
    """Progressing absent (Available was chosen first): the overlay adds it."""
    desired: dict[str, Any] = {"observedGeneration": 3, "conditions": [
        {"type": "Available", "status": "True", "reason": "AllGroupsReady",
         "message": "All replicas are ready", "lastTransitionTime": "t0",
         "observedGeneration": 3}]}
    out, events = apply_unmutated(desired, desired, "ns", [pod("a-0-1", RAW_WORKER)], "t1")
    assert out["conditions"][0] == desired["conditions"][0]
    assert {k: v for k, v in out["conditions"][1].items() if k != "message"} == {
        "type": "Progressing", "status": "False", "reason": REASON_PODS_NOT_MUTATED,
        "lastTransitionTime": "t1", "observedGeneration": 3}
    assert f"without label {WORKER}" in out["conditions"][1]["message"]
    assert [e.reason for e in events] == [REASON_PODS_NOT_MUTATED]


def test_a_stall_neither_hides_the_condition_nor_repeats_its_warning() -> None:
    """Both overlays want Progressing: ours shows, and the stall's Event, which would come
    again on every pass while its condition never shows, is dropped."""
    stall_warning = Event(REASON_ROLLOUT_STALLED, "Warning", "Update", "stalled")
    first, events = a_pass({}, [pod("a-0", RAW_LEADER)], "t1", (stall_warning,))
    assert progressing(first)["reason"] == REASON_PODS_NOT_MUTATED
    assert [e.reason for e in events if e.type == "Warning"] == [REASON_PODS_NOT_MUTATED]
    _, events = a_pass(first, [pod("a-0", RAW_LEADER)], "t2", (stall_warning,))
    assert events == ()
    # Without unmutated pods the stall's Events pass through.
    _, events = apply_unmutated({"conditions": []}, {}, "ns", [], "t3", (stall_warning,))
    assert events == (stall_warning,)


def test_the_stall_overlay_starts_fresh_after_ours() -> None:
    """A rollout that stalls once the unmutated pods are gone gets its own Warning."""
    stuck, _ = a_pass({}, [pod("a-0", RAW_LEADER)], "t1")
    updating = {**stuck, "conditions": [
        *stuck["conditions"], {"type": "UpdateInProgress", "status": "True",
                               "reason": "GroupsUpdating", "message": "m",
                               "lastTransitionTime": "t1", "observedGeneration": 1}]}
    unschedulable = {"metadata": {"name": "a-0", "labels": {P + "template-revision-hash": "k1"}},
                     "status": {"conditions": [{"type": "PodScheduled", "status": "False",
                                                "reason": "Unschedulable", "message": "full",
                                                "lastTransitionTime": "2026-12-01T10:00:00Z"}]}}
    view = unstall_view(updating)
    assert progressing(view)["status"] == "True"
    stall = find_stall([unschedulable], "k1", 1e12, grace=60)
    desired, events = apply_stall(view, updating, stall, "t2")
    assert progressing(desired)["reason"] == REASON_ROLLOUT_STALLED
    assert [e.reason for e in events] == [REASON_ROLLOUT_STALLED]
