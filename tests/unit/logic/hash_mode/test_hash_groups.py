"""Hash group identity's pure decisions (LWS docs "Group Identity", "Group Replacement"):
the leader Deployment, admission of gated leaders, restart-count transfer, group-ready,
retained-group release and the Hash-mode status."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from e2e.harness.builder import LeaderWorkerSet
from lws_operator.api.constants import PAUSED_ANNOTATION
from lws_operator.logic.failures.restart import scan_failures
from lws_operator.logic.failures.restart_budget import CLEANUP_FINALIZER
from lws_operator.logic.hash_mode.hash_groups import (
    leader_deployment,
    plan_admission,
    readiness_updates,
    release_scaled_down,
    tearing_down,
)
from lws_operator.logic.identity.revision import revision_key
from lws_operator.logic.mutation.pod import mutate_pod
from lws_operator.logic.status.group_metrics import group_views, state_counts
from lws_operator.logic.status.set_status import compute_hash_status
from lws_operator.logic.workloads.statefulsets import worker_statefulset

P = "leaderworkerset.sigs.k8s.io/"
GATE = {"name": P + "group-replacement"}
NOW = "2026-11-29T10:00:00Z"


def lws(replicas: int = 2, size: int = 3, policy: str = "PostTermination",
        **spec: Any) -> dict[str, Any]:
    return (LeaderWorkerSet("s", "ns").meta(uid="lws-uid", generation=2)
            .labels({"team": "a"}).replicas(replicas)
            .spec(groupIdentity="Hash", groupReplacementPolicy=policy)
            .size(size).image("i", name="c").spec(**spec).build())


def leader(key: str, *, rev: str = "r1", created: int = 0, gated: bool = False,
           terminating: bool = False, exhausted: bool = False, ready: bool | None = None,
           gate_condition: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": f"s-abcde-{key}", "namespace": "ns", "uid": f"uid-{key}",
        "creationTimestamp": f"2026-11-29T09:00:{created:02d}Z",
        "labels": {P + "name": "s", P + "worker-index": "0", P + "group-key": key * 40,
                   P + "group-index": key * 8, P + "template-revision-hash": rev}}
    if terminating or exhausted:
        meta["deletionTimestamp"] = "2026-11-29T09:59:00Z"
    if exhausted:
        meta["finalizers"] = [CLEANUP_FINALIZER]
        meta["annotations"] = {P + "group-restart-budget-exhausted": "true"}
    conditions = []
    if ready is not None:
        conditions.append({"type": "Ready", "status": "True" if ready else "False"})
    if gate_condition is not None:
        conditions.append({"type": P + "group-ready", "status": gate_condition})
    return {"metadata": meta,
            "spec": {"hostname": f"s-{key * 8}",
                     "schedulingGates": [GATE] if gated else [],
                     "readinessGates": [{"conditionType": P + "group-ready"}]},
            "status": {"phase": "Running", "conditions": conditions}}


def worker(key: str, index: int = 1, rev: str = "r1") -> dict[str, Any]:
    return {"metadata": {"name": f"s-{key * 8}-{index}", "namespace": "ns",
                         "uid": f"uid-{key}-{index}",
                         "labels": {P + "name": "s", P + "worker-index": str(index),
                                    P + "group-key": key * 40, P + "group-index": key * 8,
                                    P + "template-revision-hash": rev}},
            "spec": {}, "status": {"phase": "Running"}}


def sts(key: str, ready: bool = True, rev: str = "r1") -> dict[str, Any]:
    return {"metadata": {"name": f"s-{key * 8}",
                         "labels": {P + "template-revision-hash": rev}},
            "spec": {"replicas": 2},
            "status": {"replicas": 2, "readyReplicas": 2 if ready else 1,
                       "availableReplicas": 2 if ready else 1, "updatedReplicas": 2,
                       "currentRevision": "a", "updateRevision": "a"}}


def names(pods: list[Any]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


# ------------------------------------------------------------------------------ Deployment


def test_the_leader_deployment_carries_no_bookkeeping_annotations() -> None:
    body = lws()
    body["metadata"]["annotations"] = {"x": "y", P + "group-restart-counts": '{"r1/a":1}',
                                       P + "group-restart-counted-leaders": '{"r1/a":"u"}'}
    assert leader_deployment(body, "r1")["metadata"]["annotations"] == {
        "x": "y", P + "replicas": "2"}


def test_leader_deployment_maps_the_rollout_onto_its_strategy() -> None:
    body = leader_deployment(lws(rolloutStrategy={"type": "RollingUpdate",
                                                   "rollingUpdateConfiguration": {
                                                       "maxUnavailable": "50%",
                                                       "maxSurge": 2}}), "r9")
    spec = body["spec"]
    assert body["kind"] == "Deployment"
    assert body["metadata"]["name"] == "s"
    assert body["metadata"]["labels"] == {"team": "a", P + "name": "s",
                                          P + "template-revision-hash": "r9"}
    assert body["metadata"]["ownerReferences"][0]["uid"] == "lws-uid"
    assert spec["replicas"] == 2
    assert spec["strategy"] == {"type": "RollingUpdate",
                                "rollingUpdate": {"maxUnavailable": "50%", "maxSurge": 2}}
    assert spec["selector"] == {"matchLabels": {P + "name": "s", P + "worker-index": "0"}}
    template = spec["template"]
    assert template["metadata"]["labels"][P + "template-revision-hash"] == "r9"
    assert template["metadata"]["annotations"][P + "group-identity"] == "Hash"
    assert template["metadata"]["annotations"][P + "size"] == "3"
    assert template["spec"]["subdomain"] == "s"


def test_leader_deployment_defaults_the_rollout_like_the_api() -> None:
    strategy = leader_deployment(lws(), "r1")["spec"]["strategy"]["rollingUpdate"]
    assert strategy == {"maxUnavailable": 1, "maxSurge": 0}


@pytest.mark.parametrize(("unavailable", "surge", "expected"), [
    (0, 0, {"maxUnavailable": 1, "maxSurge": 0}),
    ("0%", 0, {"maxUnavailable": 1, "maxSurge": 0}),
    (0, "00%", {"maxUnavailable": 1, "maxSurge": "00%"}),
    (0, 1, {"maxUnavailable": 0, "maxSurge": 1}),
    ("10%", "0%", {"maxUnavailable": "10%", "maxSurge": "0%"}),
])
def test_leader_deployment_never_gets_both_zero(unavailable: Any, surge: Any,
                                                expected: dict[str, Any]) -> None:
    """A set of 0 replicas may have maxUnavailable and maxSurge both 0 (upstream's ValidateCreate),
    a Deployment may not: the apply failed forever (found by the bad-input fuzzing)."""
    body = leader_deployment(lws(replicas=0, rolloutStrategy={
        "type": "RollingUpdate", "rollingUpdateConfiguration": {
            "maxUnavailable": unavailable, "maxSurge": surge}}), "r1")
    assert body["spec"]["strategy"]["rollingUpdate"] == expected


# ------------------------------------------------------------------------------ admission


@pytest.mark.parametrize(("policy", "pods", "admitted"), [
    # scale-up or first creation: nothing tears down, everything gated goes
    ("PostTermination", [leader("a", gated=True, created=1), leader("b", gated=True, created=2)],
     ["s-abcde-a", "s-abcde-b"]),
    # the LWS docs' Hash stage 2: one old group tears down, two new leaders wait; the oldest goes
    ("PostTermination", [leader("o", rev="r1"), leader("t", rev="r1", terminating=True),
                         worker("t"), leader("c", rev="r2", gated=True, created=1),
                         leader("d", rev="r2", gated=True, created=2)], ["s-abcde-c"]),
    # stage 3: the old group's leader is gone but a worker still holds its node
    ("PostTermination", [leader("o", rev="r1"), worker("t"), leader("c", rev="r2"),
                         leader("d", rev="r2", gated=True, created=2)], []),
    # once its last pod is gone, the replacement goes
    ("PostTermination", [leader("o", rev="r1"), leader("c", rev="r2"),
                         leader("d", rev="r2", gated=True, created=2)], ["s-abcde-d"]),
    # Immediate ignores what tears down
    ("Immediate", [leader("t", terminating=True), worker("t"), leader("n", gated=True)],
     ["s-abcde-n"]),
    # an exhausted group holds one replacement back under both policies
    ("Immediate", [leader("x", exhausted=True), worker("x"), leader("n", gated=True)], []),
    ("PostTermination", [leader("x", exhausted=True), leader("n", gated=True, created=1),
                         leader("m", gated=True, created=2)], ["s-abcde-n"]),
    # at most `replicas` groups of one revision ungated: surplus surge stays gated
    ("PostTermination", [leader("a", rev="r2"), leader("b", rev="r2"),
                         leader("c", rev="r2", gated=True)], []),
    ("Immediate", [leader("a", rev="r1"), leader("b", rev="r1"),
                   leader("c", rev="r2", gated=True)], ["s-abcde-c"]),
])
def test_plan_admission(policy: str, pods: list[dict[str, Any]], admitted: list[str]) -> None:
    current = next((p["metadata"]["labels"][P + "template-revision-hash"] for p in pods
                    if p["spec"].get("schedulingGates")), "r1")
    assert names(plan_admission(lws(policy=policy), pods, {}, current).ungate) == admitted


@pytest.mark.parametrize("policy", ["Immediate", "PostTermination"])
def test_outdated_leaders_of_a_combined_update_and_scale_up_stay_gated(policy: str) -> None:
    """The template and replicas (2 -> 4) change together: the Deployment briefly scales the
    old ReplicaSet, whose new leaders are of the old revision r1, before the new ReplicaSet
    (r2) comes up. Fewer than ``replicas`` groups of r1 are ungated, yet its gated leaders
    must never schedule (LWS docs, "Combined Template Update and Scale-Up"); the new
    revision's are admitted as before, and every gated leader held back is counted."""
    pods = [leader("a", rev="r1"), leader("b", rev="r1"),
            leader("c", rev="r1", gated=True, created=1),
            leader("d", rev="r1", gated=True, created=2),
            leader("e", rev="r2", gated=True, created=3)]
    admission = plan_admission(lws(replicas=4, policy=policy), pods, {}, "r2")
    assert names(admission.ungate) == ["s-abcde-e"]
    assert admission.waiting == 2


@pytest.mark.parametrize(("paused", "admitted"), [
    (False, []),  # the template changed: the old revision's new leaders never schedule
    (True, ["s-abcde-c", "s-abcde-d"]),  # paused: the Deployment scales what it has; they go
])
def test_a_paused_set_admits_a_scale_up_on_the_running_revision(
        paused: bool, admitted: list[str]) -> None:
    """Paused (``logic.rollout.pause``), the leader Deployment is paused too: a template change
    creates no ReplicaSet, and a scale (2 -> 4) adds leaders to the old one. They are the
    set's groups until the resume replaces them, so they are admitted."""
    pods = [leader("a", rev="r1"), leader("b", rev="r1"),
            leader("c", rev="r1", gated=True, created=1),
            leader("d", rev="r1", gated=True, created=2)]
    body = lws(replicas=4)
    if paused:
        body["metadata"]["annotations"] = {PAUSED_ANNOTATION: "true"}
    assert names(plan_admission(body, pods, {}, "r2").ungate) == admitted


def test_tearing_down_keys_off_pods_not_the_leader() -> None:
    pods = [leader("a"), worker("a"), leader("b", terminating=True), worker("c")]
    assert tearing_down(pods) == {"b" * 40: "r1", "c" * 40: "r1"}


@pytest.mark.parametrize(("pods", "counts", "expected"), [
    # the recreated group's count moves to the admitted replacement of the same revision
    ([leader("o"), leader("n", gated=True)], {"r1/aaaaaaaa": 2}, {"r1/nnnnnnnn": 2}),
    # other revisions' counts stay while their groups may still come back
    ([leader("o"), leader("t", rev="r0", terminating=True), leader("n", gated=True, created=1),
      leader("m", gated=True, created=2)],
     {"r1/aaaaaaaa": 1, "r0/zzzzzzzz": 3}, {"r1/nnnnnnnn": 1, "r0/zzzzzzzz": 3}),
    # a live group's count is nobody's to take
    ([leader("o"), leader("n", gated=True)], {"r1/oooooooo": 1}, None),
    # an orphan nothing can claim any more (the group was scaled away) is dropped
    ([leader("o")], {"r1/aaaaaaaa": 1, "r1/oooooooo": 2}, {"r1/oooooooo": 2}),
    # while a replacement still waits, the orphan waits with it
    ([leader("t", terminating=True), worker("t"), leader("n", gated=True)],
     {"r1/tttttttt": 1}, None),
])
def test_admission_moves_restart_counts(pods: list[dict[str, Any]], counts: dict[str, int],
                                        expected: dict[str, int] | None) -> None:
    assert plan_admission(lws(), pods, counts, "r1").counts == expected


# ------------------------------------------------------------------------------ group-ready


@pytest.mark.parametrize(("pods", "statefulsets", "expected"), [
    ([leader("a")], [sts("a")], [("s-abcde-a", True)]),
    ([leader("a", gate_condition="True")], [sts("a")], []),
    ([leader("a", gate_condition="True")], [sts("a", ready=False)], [("s-abcde-a", False)]),
    ([leader("a")], [sts("a", ready=False)], []),  # absent already means not ready
    ([leader("a")], [], []),
    ([leader("a", terminating=True)], [sts("a")], []),
])
def test_readiness_updates(pods: list[dict[str, Any]], statefulsets: list[dict[str, Any]],
                           expected: list[tuple[str, bool]]) -> None:
    assert [(u.leader["metadata"]["name"], u.ready)
            for u in readiness_updates(pods, statefulsets)] == expected


# ------------------------------------------------------------------------------ release


@pytest.mark.parametrize(("replicas", "pods", "released"), [
    # just exhausted: the ReplicaSet has not replaced the leader yet
    (2, [leader("x", exhausted=True), leader("o")], set()),
    # the gated replacement is what it holds back
    (2, [leader("x", exhausted=True), leader("o"), leader("n", gated=True)], set()),
    # scale-down removed that replacement
    (1, [leader("x", exhausted=True), leader("o")], {"xxxxxxxx"}),
    # a rollout moved on
    (2, [leader("x", rev="r0", exhausted=True), leader("o"), leader("n")], {"xxxxxxxx"}),
])
def test_release_scaled_down(replicas: int, pods: list[dict[str, Any]],
                             released: set[str]) -> None:
    assert release_scaled_down(lws(replicas=replicas), pods, "r1") == released


# ------------------------------------------------------------------------------ status


@pytest.mark.parametrize(("pods", "statefulsets", "expected", "condition", "done"), [
    ([leader("a", ready=True), leader("b", ready=True)], [sts("a"), sts("b")],
     (2, 2, 2), "Available", True),
    # a waiting replacement counts as a not-ready group
    ([leader("a", ready=True), leader("b", gated=True)], [sts("a")],
     (2, 1, 1), "Progressing", False),
    # a rollout's new group without workers yet is not counted, the old one keeps it going
    ([leader("a", ready=True), leader("b", ready=True, rev="r0"), leader("c")],
     [sts("a"), sts("b", rev="r0")], (3, 2, 1), "UpdateInProgress", False),
    # an old-revision group keeps the update in progress
    ([leader("a", ready=True), leader("b", ready=True), leader("c", rev="r0", ready=True)],
     [sts("a"), sts("b"), sts("c", rev="r0")], (3, 3, 2), "UpdateInProgress", False),
    # terminating leaders are not groups
    ([leader("a", ready=True), leader("b", ready=True), leader("t", terminating=True)],
     [sts("a"), sts("b")], (2, 2, 2), "Available", True),
])
def test_compute_hash_status(pods: list[dict[str, Any]], statefulsets: list[dict[str, Any]],
                             expected: tuple[int, int, int], condition: str,
                             done: bool) -> None:
    decision = compute_hash_status(lws(), "r1", pods, statefulsets, NOW)
    status = decision.status
    assert (status["replicas"], status["readyReplicas"], status["updatedReplicas"]) == expected
    assert next(c["type"] for c in status["conditions"] if c["status"] == "True") == condition
    assert decision.update_done is done


# ------------------------------------------------------------------------------ admission webhook


def admitted_leader(size: int = 3, policy: str | None = None) -> dict[str, Any]:
    template = leader_deployment(lws(size=size, networkConfig={"subdomainPolicy": policy}
                                     if policy else {}), "r1")["spec"]["template"]
    pod = {"metadata": {"generateName": "s-7d9f-", "namespace": "ns", **template["metadata"]},
           "spec": template["spec"]}
    return mutate_pod(pod, random_key=lambda: "0123456789abcdef" * 2 + "01234567")


def test_a_hash_leader_gets_a_random_key_a_host_name_and_both_gates() -> None:
    pod = admitted_leader()
    labels = pod["metadata"]["labels"]
    assert labels[P + "group-key"] == "0123456789abcdef" * 2 + "01234567"
    assert labels[P + "group-index"] == "01234567"
    assert pod["spec"]["hostname"] == "s-01234567"
    assert pod["spec"]["subdomain"] == "s"
    assert pod["spec"]["schedulingGates"] == [GATE]
    assert pod["spec"]["readinessGates"] == [{"conditionType": P + "group-ready"}]
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["LWS_LEADER_ADDRESS"] == "s-01234567.s.ns"
    assert mutate_pod(pod, random_key=lambda: "f" * 40) == pod  # a second pass changes nothing


def test_a_hash_leader_of_one_has_no_readiness_gate() -> None:
    assert not admitted_leader(size=1)["spec"].get("readinessGates")


def test_unique_per_replica_gives_a_hash_leader_its_own_subdomain() -> None:
    assert admitted_leader(policy="UniquePerReplica")["spec"]["subdomain"] == "s-01234567"


def test_the_worker_statefulset_is_named_after_the_host() -> None:
    lead = admitted_leader()
    lead["metadata"]["name"] = "s-7d9f-xk2p9"
    lead["metadata"]["uid"] = "uid-l"
    body = worker_statefulset(lws(), lws(), lead, None)
    assert body["metadata"]["name"] == "s-01234567"
    assert body["spec"]["serviceName"] == "s"
    assert body["spec"]["template"]["metadata"]["annotations"][P + "leader-name"] == \
        "s-7d9f-xk2p9"
    assert body["spec"]["template"]["metadata"]["annotations"][P + "group-identity"] == "Hash"
    assert body["metadata"]["ownerReferences"][0]["uid"] == "uid-l"


def test_a_failed_hash_worker_finds_its_leader_by_host_name() -> None:
    lead = leader("a")
    sts_body = {"metadata": {"name": "s-aaaaaaaa", "uid": "sts-uid", "ownerReferences": [
        {"kind": "Pod", "name": lead["metadata"]["name"], "uid": "uid-a", "controller": True}]}}
    failed = worker("a")
    failed["metadata"]["ownerReferences"] = [{"kind": "StatefulSet", "name": "s-aaaaaaaa",
                                              "uid": "sts-uid", "controller": True}]
    failed["status"]["containerStatuses"] = [{"name": "c", "restartCount": 1}]
    scan = scan_failures(lws(), [lead, failed], [sts_body])
    assert [r.leader for r in scan.recreations] == ["s-abcde-a"]


def test_now_is_a_valid_timestamp() -> None:
    assert dt.datetime.strptime(NOW, "%Y-%m-%dT%H:%M:%SZ")


def test_the_replacement_policy_is_live_not_part_of_the_revision() -> None:
    assert revision_key(lws(policy="PostTermination")) == revision_key(lws(policy="Immediate"))
    assert leader_deployment(lws(policy="PostTermination"), "r1") == leader_deployment(
        lws(policy="Immediate"), "r1")


def test_group_metrics_find_hash_workers_by_host_and_count_the_shortfall() -> None:
    pods = [leader("a", ready=True), leader("b", gated=True)]
    views = group_views(lws(replicas=3), pods, [sts("a")])
    assert {v.group: v.state for v in views} == {"aaaaaaaa": "ready", "bbbbbbbb": "gated"}
    counts = state_counts(lws(replicas=3), views)
    assert (counts["ready"], counts["gated"], counts["missing"]) == (1, 1, 1)


def test_tpu_hosts_of_a_hash_group_use_the_leader_host_name() -> None:
    spec = lws(size=3)
    container = spec["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"google.com/tpu": "4"}}
    template = leader_deployment(spec, "r1")["spec"]["template"]
    pod = mutate_pod({"metadata": {"generateName": "s-7d9f-", "namespace": "ns",
                                   **template["metadata"]}, "spec": template["spec"]},
                     random_key=lambda: "89abcdef" * 5)
    env = {e["name"]: e["value"] for e in pod["spec"]["containers"][0]["env"]}
    assert env["TPU_WORKER_HOSTNAMES"] == "s-89abcdef.s,s-89abcdef-1.s,s-89abcdef-2.s"
    assert env["TPU_NAME"] == "s-89abcdef"
    assert env["TPU_WORKER_ID"] == "0"
