"""Native gang scheduling: names, pod admission, Workload and PodGroup builders, minCount,
cleanup and the condition (LWS docs "Gang Scheduling")."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from e2e.harness.builder import LeaderWorkerSet
from lws_operator.api.defaults import apply_defaults
from lws_operator.api.validation import validate
from lws_operator.logic.mutation.pod import mutate_pod
from lws_operator.logic.placement import gang
from lws_operator.logic.workloads.statefulsets import leader_statefulset, worker_statefulset

P = "leaderworkerset.sigs.k8s.io/"
UID = "5c66068f-90af-46ad-9208-b447df8e1843"
# Computed with Go: fnv32a over k8s.io/utils/dump.ForHash(types.UID(UID)), then
# k8s.io/apimachinery's rand.SafeEncodeString, outside the code under test.
UID_HASH = "66cf484d49"
WL = f"inference-{UID_HASH}"
GATE = {"name": P + "group-replacement"}


def make_lws(scheduling: Any = None, replicas: int = 2, size: int = 4,
             annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    body = (LeaderWorkerSet("inference", "ns").meta(uid=UID).annotations(annotations or {})
            .replicas(replicas).size(size).image("x", name="w").spec(**spec))
    if scheduling is not None:
        body.spec(scheduling=scheduling)
    return apply_defaults(body.build())


def leader(index: int = 0, revision: str = "rev1", size: int = 4, incarnation: str | None = "abcde",
           uid: str = "leader-uid", deleting: bool = False) -> dict[str, Any]:
    annotations = {P + "size": str(size)}
    if incarnation:
        annotations[P + "group-incarnation"] = incarnation
    meta: dict[str, Any] = {"name": f"inference-{index}", "namespace": "ns", "uid": uid,
                            "labels": {P + "name": "inference", P + "worker-index": "0",
                                       P + "group-index": str(index),
                                       P + "template-revision-hash": revision},
                            "annotations": annotations}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta, "spec": {}}


def test_names() -> None:
    lws = make_lws({})
    assert gang.uid_hash(UID) == UID_HASH
    assert gang.uid_hash("0b6a5bcb-4ef1-4f5c-a3b3-8a1a2d0c1f00") == "6588c7bb46"  # Go, as above
    assert gang.workload_name(lws) == WL
    assert gang.whole_set_pod_group_name(WL) == f"{WL}-lws"
    assert gang.group_pod_group_name(WL, "abcde", "1", "rev") == f"{WL}.abcde-1-rev"
    assert gang.group_pod_group_name(WL, "abcde", "1", "rev", "worker") == (
        f"{WL}.abcde-1-worker-rev")
    assert gang.group_pod_group_name(WL, None, "1", "rev") == f"{WL}-1-rev"
    inc = gang.new_incarnation()
    assert len(inc) == 5
    assert set(inc) <= set("bcdfghjklmnpqrstvwxz2456789")


@pytest.mark.parametrize(("scheduling", "level"), [
    (None, None),
    ({}, "replica"),
    ({"replica": {}}, "replica"),
    ({"schedulingPolicy": {"gang": {}}}, "lws"),
    ({"disruptionMode": {"all": {}}}, "lws"),
    ({"replica": {"worker": {}}}, "role"),
    ({"replica": {"leader": {}, "worker": {}}}, "role"),
])
def test_levels(scheduling: Any, level: str | None) -> None:
    assert gang.level_of(make_lws(scheduling)) == level


def _pod(worker_index: str, template_annotations: dict[str, str], name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns",
                         "labels": {P + "name": "inference", P + "worker-index": worker_index,
                                    P + "template-revision-hash": "rev1",
                                    **({P + "group-index": "1"} if worker_index != "0" else {})},
                         "annotations": {P + "size": "4", **template_annotations}},
            "spec": {"containers": [{"name": "c", "image": "x"}]}}


@pytest.mark.parametrize(("scheduling", "leader_group", "worker_group", "gated"), [
    ({}, f"{WL}.bcdfg-1-rev1", f"{WL}.bcdfg-1-rev1", True),
    ({"replica": {"leader": {}, "worker": {}}}, f"{WL}.bcdfg-1-leader-rev1",
     f"{WL}.bcdfg-1-worker-rev1", True),
    ({"schedulingPolicy": {"gang": {}}}, f"{WL}-lws", f"{WL}-lws", False),
])
def test_admission_names_every_pod_group(scheduling: Any, leader_group: str, worker_group: str,
                                         gated: bool) -> None:
    """The leader gets an incarnation and the gate (replica/role), workers inherit the
    incarnation through the worker StatefulSet template; both name their PodGroup."""
    lws = make_lws(scheduling)
    sts = leader_statefulset(lws, "rev1", 0, 2)
    template_annotations = sts["spec"]["template"]["metadata"]["annotations"]
    admitted = mutate_pod(_pod("0", template_annotations, "inference-1"),
                          incarnation=lambda: "bcdfg")
    assert admitted["spec"]["schedulingGroup"] == {"podGroupName": leader_group}
    assert (GATE in admitted["spec"].get("schedulingGates", [])) is gated
    assert mutate_pod(admitted, incarnation=lambda: "zzzzz") == admitted  # idempotent
    admitted["metadata"]["uid"] = "leader-uid"
    worker_sts = worker_statefulset(lws, lws, admitted, None)
    worker_annotations = worker_sts["spec"]["template"]["metadata"]["annotations"]
    worker = mutate_pod(_pod("", worker_annotations, "inference-1-2"))
    assert worker["spec"]["schedulingGroup"] == {"podGroupName": worker_group}
    assert "schedulingGates" not in worker["spec"]


def test_admission_leaves_other_pods_alone() -> None:
    lws = make_lws(None)
    annotations = leader_statefulset(lws, "rev1", 0, 2)["spec"]["template"]["metadata"][
        "annotations"]
    admitted = mutate_pod(_pod("0", annotations, "inference-1"), scheduler_provider="volcano")
    assert "schedulingGroup" not in admitted["spec"]
    assert "schedulingGates" not in admitted["spec"]
    assert admitted["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == (
        "inference-1-rev1")
    # With spec.scheduling the native PodGroup wins over a configured volcano provider.
    native = leader_statefulset(make_lws({}), "rev1", 0, 2)["spec"]["template"]["metadata"][
        "annotations"]
    admitted = mutate_pod(_pod("0", native, "inference-1"), scheduler_provider="volcano")
    assert "scheduling.k8s.io/group-name" not in admitted["metadata"]["annotations"]


def test_replica_level_workload_and_pod_groups() -> None:
    lws = make_lws({})
    lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["priorityClassName"] = "high"
    workload = gang.desired_workload(lws, [])
    assert workload is not None
    assert workload["metadata"]["name"] == WL
    assert workload["metadata"]["labels"] == {P + "name": "inference"}
    assert workload["metadata"]["ownerReferences"][0]["uid"] == UID
    assert workload["spec"] == {
        "controllerRef": {"apiGroup": "leaderworkerset.x-k8s.io", "kind": "LeaderWorkerSet",
                          "name": "inference"},
        "podGroupTemplates": [{"name": "replica", "schedulingPolicy": {"gang": {"minCount": 4}},
                               "priorityClassName": "high"}]}
    source = gang.Source(WL)
    # Leader 0 still on the previous revision of size 2; leader 1 new; a terminating leader
    # gets nothing.
    groups = gang.desired_pod_groups(lws, source, [
        leader(0, "old", 2, "aaaaa", "u0"), leader(1, "rev1", 4, "bbbbb", "u1"),
        leader(2, "rev1", 4, "ccccc", "u2", deleting=True)])
    assert [(g["metadata"]["name"], gang.min_count_of(g)) for g in groups] == [
        (f"{WL}.aaaaa-0-old", 2), (f"{WL}.bbbbb-1-rev1", 4)]
    group = groups[1]
    assert group["metadata"]["labels"] == {
        P + "name": "inference", P + "group-index": "1", P + "template-revision-hash": "rev1",
        P + "scheduling-level": "replica"}
    assert group["metadata"]["ownerReferences"] == [{
        "apiVersion": "v1", "kind": "Pod", "name": "inference-1", "uid": "u1",
        "controller": True, "blockOwnerDeletion": False}]
    assert group["spec"] == {"workloadRef": {"workloadName": WL, "templateName": "replica"},
                             "schedulingPolicy": {"gang": {"minCount": 4}},
                             "priorityClassName": "high"}


def test_role_level() -> None:
    lws = make_lws({"replica": {"worker": {"disruptionMode": {"all": {}}}}})
    workload = gang.desired_workload(lws, [])
    assert workload is not None
    assert workload["spec"]["podGroupTemplates"] == [
        {"name": "leader", "schedulingPolicy": {"basic": {}}},  # the role left unset
        {"name": "worker", "schedulingPolicy": {"gang": {"minCount": 3}},
         "disruptionMode": {"all": {}}}]
    groups = gang.desired_pod_groups(lws, gang.Source(WL), [leader(1), leader(0, size=1)])
    assert [(g["metadata"]["name"], g["spec"]["schedulingPolicy"],
             g["metadata"]["labels"].get(P + "role")) for g in groups] == [
        (f"{WL}.abcde-1-leader-rev1", {"basic": {}}, "leader"),
        (f"{WL}.abcde-1-worker-rev1", {"gang": {"minCount": 3}}, "worker"),
        (f"{WL}.abcde-0-leader-rev1", {"basic": {}}, "leader")]  # size 1: no worker group
    assert gang.names_for_leader(lws, WL, leader(1)) == [
        f"{WL}.abcde-1-leader-rev1", f"{WL}.abcde-1-worker-rev1"]


@pytest.mark.parametrize(("replicas", "leaders", "expected"), [
    (2, [], 8),                                             # before any leader exists
    (2, [leader(0, "rev2", 4), leader(1, "rev1", 2)], 6),   # replica 1 not replaced yet
    (3, [leader(0, "rev1", 2), leader(3, "rev2", 4)], 2 + 4 + 4),  # surge index 3 not counted
    (2, [leader(0, "rev1", 2, deleting=True)], 8),          # a replaced leader: the new size
])
def test_whole_set_min_count(replicas: int, leaders: list[dict[str, Any]],
                             expected: int) -> None:
    lws = make_lws({"schedulingPolicy": {"gang": {}}}, replicas=replicas, size=4)
    assert gang.whole_set_min_count(lws, leaders) == expected
    groups = gang.desired_pod_groups(lws, gang.Source(WL), leaders)
    assert [(g["metadata"]["name"], gang.min_count_of(g)) for g in groups] == [
        (f"{WL}-lws", expected)]
    assert groups[0]["metadata"]["ownerReferences"][0]["uid"] == UID


def test_whole_set_group_absent_at_zero_replicas() -> None:
    lws = make_lws({"schedulingPolicy": {"gang": {}}}, replicas=0)
    assert gang.desired_pod_groups(lws, gang.Source(WL), []) == []


def test_parent_owned_workload() -> None:
    """The parent's template sets the policy; LWS creates no Workload of its own."""
    lws = make_lws({}, annotations={"scheduling.k8s.io/group-template-name": "decode"})
    lws["metadata"]["ownerReferences"] = [{"apiVersion": "example.io/v1", "kind": "Parent",
                                           "name": "p", "uid": "pu", "controller": True}]
    assert gang.desired_workload(lws, []) is None
    parent: dict[str, Any] = {"metadata": {"name": "p-wl", "namespace": "ns"},
              "spec": {"controllerRef": {"apiGroup": "example.io", "kind": "Parent", "name": "p"},
                       "podGroupTemplates": [{"name": "decode",
                                              "schedulingPolicy": {"gang": {"minCount": 2}}}]}}
    other = copy.deepcopy(parent)
    other["spec"]["controllerRef"]["name"] = "q"
    assert gang.find_parent_workload(lws, [other])[0] is None
    source, why = gang.find_parent_workload(lws, [other, parent])
    assert source is not None
    assert why == ""
    groups = gang.desired_pod_groups(lws, source, [leader(0)])
    assert groups[0]["metadata"]["name"] == f"{WL}.abcde-0-rev1"  # named after the LWS
    assert groups[0]["spec"] == {"workloadRef": {"workloadName": "p-wl", "templateName": "decode"},
                                 "schedulingPolicy": {"gang": {"minCount": 2}}}
    missing = copy.deepcopy(lws)
    missing["metadata"]["annotations"]["scheduling.k8s.io/group-template-name"] = "prefill"
    assert "no PodGroup template 'prefill'" in gang.find_parent_workload(missing, [parent])[1]


def test_stale_pod_groups() -> None:
    def group(name: str, deleting: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {"name": name, "labels": {P + "scheduling-level": "replica"}}
        if deleting:
            meta["deletionTimestamp"] = "now"
        return {"metadata": meta}

    referencing = {"metadata": {"name": "w"}, "spec": {"schedulingGroup": {
        "podGroupName": "still-used"}}}
    stale = gang.stale_pod_groups(
        [group("wanted"), group("still-used"), group(f"{WL}-0-rev1"), group("going", True)],
        ["wanted"], [referencing])
    assert [g["metadata"]["name"] for g in stale] == [f"{WL}-0-rev1"]


def test_workload_update_touches_only_min_count() -> None:
    lws = make_lws({}, size=4)
    desired = gang.desired_workload(lws, [])
    assert desired is not None
    live = copy.deepcopy(desired)
    live["metadata"]["resourceVersion"] = "7"
    assert gang.workload_update(desired, live) is None
    live["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] = 2
    live["spec"]["podGroupTemplates"][0]["disruptionMode"] = {"single": {}}  # server default
    patch = gang.workload_update(desired, live)
    assert patch == {"metadata": {"resourceVersion": "7"}, "spec": {"podGroupTemplates": [
        {"name": "replica", "schedulingPolicy": {"gang": {"minCount": 4}},
         "disruptionMode": {"single": {}}}]}}


def test_mismatched_groups_recreated_only_before_scheduling() -> None:
    lws = make_lws({})
    lead = leader(0)

    def worker(group: str, node: str | None = None) -> dict[str, Any]:
        return {"metadata": {"name": "inference-0-1", "labels": {
            P + "worker-index": "1", P + "template-revision-hash": "rev1"},
            "annotations": {P + "leader-name": "inference-0"}},
            "spec": {"schedulingGroup": {"podGroupName": group},
                     **({"nodeName": node} if node else {})}}

    assert gang.mismatched_groups(lws, WL, [lead, worker(f"{WL}.abcde-0-rev1")]) == []
    assert gang.mismatched_groups(lws, WL, [lead, worker(f"{WL}-0-rev1")]) == [lead]
    assert gang.mismatched_groups(lws, WL, [lead, worker(f"{WL}-0-rev1", "n1")]) == []


def test_condition_keeps_its_transition_time() -> None:
    first = gang.scheduling_condition([], True, gang.REASON_CREATED, "m", 1, "t1")
    assert first["lastTransitionTime"] == "t1"
    assert first["status"] == "True"
    again = gang.scheduling_condition([first], True, gang.REASON_CREATED, "m", 2, "t2")
    assert again["lastTransitionTime"] == "t1"
    failed = gang.scheduling_condition([again], False, gang.REASON_API_NOT_AVAILABLE, "x", 2, "t3")
    assert failed["lastTransitionTime"] == "t3"
    status = gang.apply_condition({"conditions": [first, {"type": "Available"}]}, failed)
    assert [c["type"] for c in status["conditions"]] == ["Available", "WorkloadSchedulingCreated"]


@pytest.mark.parametrize(("scheduling", "path"), [
    ({"replica": {"schedulingPolicy": {"basic": {}, "gang": {}}}},
     "spec.scheduling.replica.schedulingPolicy"),
    ({"schedulingPolicy": {"gang": {"minCount": 0}}},
     "spec.scheduling.schedulingPolicy.gang.minCount"),
    ({"replica": {"resourceClaims": [{"name": f"c{i}", "resourceClaimName": "x"}
                                     for i in range(5)]}},
     "spec.scheduling.replica.resourceClaims"),
    ({"schedulingPolicy": {"gang": {}}, "replica": {}}, "spec.scheduling"),
])
def test_bad_gang_settings_name_the_field(scheduling: Any, path: str) -> None:
    errors = validate(make_lws(scheduling), None)
    assert [e.path for e in errors] == [path]
