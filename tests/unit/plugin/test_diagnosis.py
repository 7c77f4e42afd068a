"""``kubectl lws why``'s diagnosis (``lws_operator.plugin.analysis.diagnosis``): one row per cause,
one per precedence rule, over plain objects shaped as the API returns them."""

from __future__ import annotations

import copy
import io
from collections.abc import Callable
from typing import Any

import pytest

from lws_operator.plugin.analysis.diagnosis import (
    RANK,
    Scene,
    diagnose,
    event_fact,
    selector_matches,
    webhook_services,
)
from lws_operator.plugin.why import render

P = "leaderworkerset.sigs.k8s.io/"
NS = "ns"
T0 = "2026-12-01T10:00:00Z"
NOW = 1796119200.0 + 120  # T0 + 2 minutes
NEW, OLD = "new1234", "old5678"
GANG_MSG = "0/20 nodes are available: 20 Insufficient cpu."


def lws(name: str = "demo", replicas: int = 1, size: int = 2, *, hashed: bool = False,
        template: dict[str, Any] | None = None, conditions: list[dict[str, Any]] | None = None,
        generation: int = 1, observed: int = 1, ready: int | None = None,
        updated: int | None = None, **spec: Any) -> dict[str, Any]:
    lwt: dict[str, Any] = {"size": size, "workerTemplate": {"spec": {"containers": [
        {"name": "engine", "image": "engine:v1"}]}}, **(template or {})}
    body: dict[str, Any] = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
        "metadata": {"name": name, "namespace": NS, "uid": "u-1", "generation": generation},
        "spec": {"replicas": replicas, "leaderWorkerTemplate": lwt, **spec},
        "status": {"observedGeneration": observed,
                   "readyReplicas": replicas if ready is None else ready,
                   "updatedReplicas": replicas if updated is None else updated,
                   "conditions": conditions if conditions is not None else [available()]}}
    if hashed:
        body["spec"]["groupIdentity"] = "Hash"
    return body


def cond(kind: str, status: str = "True", reason: str = "", message: str = "",
         since: str = T0) -> dict[str, Any]:
    return {"type": kind, "status": status, "reason": reason, "message": message,
            "lastTransitionTime": since}


def available() -> dict[str, Any]:
    return cond("Available", reason="AllGroupsReady", message="All replicas are ready")


def updating() -> list[dict[str, Any]]:
    return [cond("UpdateInProgress", reason="GroupsUpdating"),
            cond("Progressing", reason="GroupsProgressing"), cond("Available", "False")]


def pod(name: str, group: str = "0", worker: int = 0, *, revision: str = NEW,
        node: str | None = "node-1", ready: bool = True, scheduled: str | None = None,
        message: str = "", gates: list[str] | None = None, deleting: bool = False,
        annotations: dict[str, str] | None = None, spec: dict[str, Any] | None = None,
        conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A pod of set ``demo``; ``scheduled`` is a PodScheduled=False reason (then no node)."""
    labels = {P + "name": "demo", P + "group-index": group, P + "worker-index": str(worker),
              P + "template-revision-hash": revision, P + "group-key": f"key{group}" * 5}
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": f"uid-{name}",
                            "labels": labels, "annotations": dict(annotations or {}),
                            "creationTimestamp": T0}
    if deleting:
        meta["deletionTimestamp"] = T0
    body_spec: dict[str, Any] = {"containers": [{"name": "engine", "image": "engine:v1"}],
                                 **(spec or {})}
    status: dict[str, Any] = {"phase": "Running" if ready else "Pending", "conditions": []}
    if scheduled:
        node = None
        status["conditions"].append(cond("PodScheduled", "False", scheduled, message))
    elif node:
        status["conditions"].append(cond("PodScheduled"))
    if node:
        body_spec["nodeName"] = node
        status["conditions"].append(cond("Ready", "True" if ready else "False"))
    if ready:
        status["containerStatuses"] = [{"name": "engine", "ready": True, "restartCount": 0,
                                        "state": {"running": {"startedAt": T0}}}]
    if gates:
        body_spec["schedulingGates"] = [{"name": g} for g in gates]
    status["conditions"] += conditions or []
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body_spec,
            "status": status}


def group(index: str = "0", size: int = 2, **kw: Any) -> list[dict[str, Any]]:
    """A whole Ordinal group: leader ``demo-<i>`` and workers ``demo-<i>-<w>``, alike."""
    return [pod(f"demo-{index}" if w == 0 else f"demo-{index}-{w}", index, w, **kw)
            for w in range(size)]


def leader_sts(revision: str = NEW, partition: int = 0) -> dict[str, Any]:
    return {"metadata": {"name": "demo", "labels": {P + "name": "demo"}},
            "spec": {"replicas": 1, "template": {"metadata": {"labels": {
                P + "template-revision-hash": revision}}},
                "updateStrategy": {"rollingUpdate": {"partition": partition}}},
            "status": {"replicas": 1}}


def event(kind: str, name: str, reason: str, message: str, type_: str = "Warning",
          when: str = "2026-12-01T10:01:30Z") -> dict[str, Any]:
    return {"involvedObject": {"kind": kind, "name": name}, "reason": reason,
            "message": message, "type": type_, "lastTimestamp": when, "count": 3}


def pod_webhook(service: str = "lws-system/lws-webhook-service", policy: str = "Fail",
                namespaces: list[str] | None = None) -> dict[str, Any]:
    ns, name = service.split("/")
    hook: dict[str, Any] = {
        "name": "mpod.kb.io", "failurePolicy": policy,
        "clientConfig": {"service": {"namespace": ns, "name": name, "path": "/mutate--v1-pod"}},
        "objectSelector": {"matchExpressions": [{"key": P + "name", "operator": "Exists"}]}}
    if namespaces is not None:
        hook["namespaceSelector"] = {"matchExpressions": [{
            "key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}]}
    return {"kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "lws-mutating-webhook-configuration"}, "webhooks": [hook]}


def scene(set_: dict[str, Any] | None = None, pods: list[dict[str, Any]] | None = None,
          **kw: Any) -> Scene:
    fields: dict[str, Any] = {"statefulsets": [leader_sts()], "now": NOW,
                              "namespace_labels": {"kubernetes.io/metadata.name": NS}}
    fields.update(kw)
    return Scene(lws=set_ or lws(), pods=pods if pods is not None else group(), **fields)


# ------------------------------------------------------------------------------ the cause rows

BUDGET = "lws-operator.dev/max-disrupted-groups"
ROLLED_BACK_NOTE = ("Rolled back from revision bad9999 to revision new1234 (demo-new1234-1): the "
                    "rollout made no progress for 600s")


def with_budget(body: dict[str, Any], budget: str) -> dict[str, Any]:
    body["metadata"]["annotations"] = {BUDGET: budget}
    return body


SERVING = {"lws-system/lws-webhook-service": [{"endpoints": [
    {"addresses": ["10.0.0.1"], "conditions": {"ready": True}}]}]}
NO_ENDPOINTS = {"lws-system/lws-webhook-service": [{"endpoints": [
    {"addresses": ["10.0.0.1"], "conditions": {"ready": False}}]}]}
WEBHOOK_FAILED = event("StatefulSet", "demo", "FailedCreate",
                       'create Pod demo-0 in StatefulSet demo failed error: Internal error '
                       'occurred: failed calling webhook "mpod.kb.io": no endpoints available')
NATIVE_PG = {"metadata": {"name": "pg-0"}, "spec": {"schedulingPolicy": {"gang": {
    "minCount": 2}}}}
VOLCANO_PG = {"metadata": {"name": "demo-0-new1234"}, "spec": {"minMember": 2},
              "status": {"phase": "Pending", "conditions": [{
                  "type": "Unschedulable", "reason": "NotEnoughResources",
                  "message": "2/2 tasks in gang unschedulable"}]}}
GROUP_READY = P + "group-ready"


def hash_leader(ready_gate: str | None, containers: bool = True) -> dict[str, Any]:
    conditions = [cond("ContainersReady", "True" if containers else "False")]
    if ready_gate is not None:
        conditions.append(cond(GROUP_READY, ready_gate, "WorkersNotReady"))
    leader = pod("demo-7f3a-x1", "7f3a9c2e", 0, ready=False, conditions=conditions,
                 spec={"readinessGates": [{"conditionType": GROUP_READY}],
                       "hostname": "demo-7f3a9c2e"})
    leader["status"]["phase"] = "Running"
    leader["status"]["containerStatuses"] = [{"name": "engine", "ready": True,
                                              "state": {"running": {}}}]
    return leader


def paused(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its rollout paused (``lws-operator.dev/paused: "true"``)."""
    body["metadata"]["annotations"] = {"lws-operator.dev/paused": "true"}
    return body


CASES: list[tuple[str, Scene, str, str]] = [
    # (id, scene, first cause, its summary)
    ("ready", scene(), "", ""),
    ("not observed", scene(lws(generation=3, observed=2)), "NotObserved",
     "the controller has not processed generation 3 yet (status is of generation 2)"),
    ("webhook without endpoints, calls failing",
     scene(lws(conditions=[cond("Available", "False")], ready=0), pods=[],
           webhook_configurations=[pod_webhook()], endpoint_slices=NO_ENDPOINTS,
           events=[WEBHOOK_FAILED]),
     "WebhookUnreachable",
     "webhook mpod.kb.io (MutatingWebhookConfiguration lws-mutating-webhook-configuration) "
     "calls Service lws-system/lws-webhook-service, which has no ready endpoints: pods of this "
     "set cannot be created"),
    ("webhook Service missing",
     scene(lws(conditions=[cond("Available", "False")], ready=0), pods=[],
           webhook_configurations=[pod_webhook()],
           endpoint_slices={"lws-system/lws-webhook-service": None}),
     "WebhookUnreachable",
     "webhook mpod.kb.io (MutatingWebhookConfiguration lws-mutating-webhook-configuration) "
     "calls Service lws-system/lws-webhook-service, which does not exist: pods of this set "
     "cannot be created"),
    ("webhook call failing by URL (no Service to check)",
     scene(lws(conditions=[cond("Available", "False")], ready=0), pods=[],
           events=[WEBHOOK_FAILED]),
     "WebhookUnreachable", "admission webhook calls fail: pods of this set cannot be created"),
    ("pods not mutated",
     scene(lws(conditions=[cond("Progressing", "False", "PodsNotMutated", "2 pods of ...")])),
     "PodsNotMutated", "pods were created without the pod webhook"),
    ("failed create (quota)",
     scene(lws(conditions=[cond("Available", "False")], ready=0), pods=[],
           statefulsets=[{**leader_sts(), "status": {"replicas": 0}}],
           events=[event("StatefulSet", "demo", "FailedCreate",
                         'pods "demo-0" is forbidden: exceeded quota: compute')]),
     "FailedCreate", "objects of demo cannot be created"),
    ("restart budget exhausted",
     scene(lws(template={"maxGroupRestarts": 2}, ready=0,
               conditions=[cond("Degraded", reason="ReplicaRestartBudgetExceeded")]),
           pods=group(deleting=True, ready=False, annotations={
               P + "group-restart-budget-exhausted": "true"})),
     "RestartBudgetExhausted",
     "group 0 exhausted its restart budget: its pods are stopped and kept, and nothing "
     "restarts it until it is recovered"),
    ("gate from the template",
     scene(lws(size=1, template={"workerTemplate": {"spec": {
         "schedulingGates": [{"name": "example.com/hold"}],
         "containers": [{"name": "engine", "image": "engine:v1"}]}}}, ready=0),
         pods=[pod("demo-0", scheduled="SchedulingGated", gates=["example.com/hold"],
                   ready=False)]),
     "SchedulingGated", "group 0 is held by the scheduling gate example.com/hold, which the "
     "pod template sets: nothing lifts it"),
    ("gate from another admission controller",
     scene(lws(size=1, ready=0), pods=[pod("demo-0", scheduled="SchedulingGated",
                                           gates=["kueue.x-k8s.io/admission"], ready=False)]),
     "SchedulingGated", "group 0 is held by the scheduling gate kueue.x-k8s.io/admission, "
     "added by another admission controller"),
    ("our group-replacement gate, gang PodGroups missing",
     scene(lws(size=1, ready=0, scheduling={"replica": {}}, conditions=[cond(
         "WorkloadSchedulingCreated", "False", "PodGroupCreateFailed", "quota")]),
         pods=[pod("demo-0", scheduled="SchedulingGated", gates=[P + "group-replacement"],
                   ready=False)]),
     "SchedulingGated", "group 0 is held by the leaderworkerset.sigs.k8s.io/group-replacement "
     "scheduling gate: the scheduler does not try to place it yet"),
    ("native PodGroup minCount not met",
     scene(lws(ready=0), pods=group(scheduled="Unschedulable", message=GANG_MSG, ready=False,
                                    spec={"schedulingGroup": {"podGroupName": "pg-0"}}),
           pod_groups=[NATIVE_PG]),
     "PodGroupIncomplete", "group 0: PodGroup pg-0 needs 2 pods placed together and has 0: "
     "the scheduler places none until all fit"),
    ("native PodGroup missing",
     scene(lws(ready=0), pods=group(scheduled="Unschedulable", ready=False,
                                    spec={"schedulingGroup": {"podGroupName": "pg-0"}})),
     "PodGroupIncomplete", "group 0: PodGroup pg-0 does not exist: the scheduler holds its "
     "pods until it does"),
    ("volcano PodGroup minMember not met",
     scene(lws(ready=0), pods=group(
         node=None, ready=False, spec={"schedulerName": "volcano"},
         annotations={"scheduling.k8s.io/group-name": "demo-0-new1234"}),
         volcano_groups=[VOLCANO_PG]),
     "PodGroupIncomplete", "group 0: volcano PodGroup demo-0-new1234 needs 2 pods placed "
     "together and has 0: the scheduler places none until all fit"),
    ("rollout paused (before the new revision's pods not Ready)",
     scene(paused(lws(conditions=[cond("UpdateInProgress"), cond(
         "Progressing", "Unknown", "RolloutPaused", "Rollout paused ...")], replicas=2)),
         pods=[*group("0", revision=OLD), *group("1", ready=False)],
         statefulsets=[leader_sts(partition=1)]),
     "RolloutPaused", "the rollout is paused: no further group is replaced or surged until it "
     "is resumed"),
    ("progress deadline exceeded (our condition)",
     scene(lws(conditions=[cond("UpdateInProgress"), cond(
         "Progressing", "False", "ProgressDeadlineExceeded", "Rollout made no progress ...")],
         replicas=2),
         pods=[*group("0", revision=OLD), *group("1", ready=False)],
         statefulsets=[leader_sts(partition=1)]),
     "ProgressDeadlineExceeded", "the rollout passed its progress deadline and is held: no "
     "group of the new revision became Ready in time, and no further group is taken down"),
    ("rollout stalled (our condition)",
     scene(lws(conditions=[cond("UpdateInProgress"), cond(
         "Progressing", "False", "RolloutStalled", "Rollout stalled: 1 pod ...")]),
         pods=group(scheduled="Unschedulable", message=GANG_MSG, ready=False)),
     "RolloutStalled", "the rollout is stalled: pods of the new revision cannot be scheduled "
     "while the groups not yet replaced hold the capacity"),
    ("rollout stalled, found here (upstream's controller)",
     scene(lws(conditions=updating()), pods=group(scheduled="Unschedulable", message=GANG_MSG,
                                                  ready=False)),
     "RolloutStalled", "the rollout is stalled: pods of the new revision cannot be scheduled "
     "(found by kubectl lws; the controller reports no stall)"),
    ("unschedulable",
     scene(lws(ready=0, conditions=[cond("Available", "False")]),
           pods=group(scheduled="Unschedulable", message=GANG_MSG, ready=False)),
     "Unschedulable", "group 0: 2 pods cannot be scheduled"),
    ("unschedulable, message only in a FailedScheduling Event",
     scene(lws(ready=0, conditions=[cond("Available", "False")]),
           pods=[pod("demo-0", node=None, ready=False), pod("demo-0-1", worker=1)],
           events=[event("Pod", "demo-0", "FailedScheduling", GANG_MSG)]),
     "Unschedulable", "group 0: 1 pod cannot be scheduled"),
    ("group-ready gate",
     scene(lws(hashed=True, ready=0), pods=[hash_leader("False"), pod(
         "demo-7f3a9c2e-1", "7f3a9c2e", 1, ready=False)], statefulsets=[]),
     "GroupReadyGate", "group 7f3a9c2e: leader demo-7f3a-x1 is not Ready because its "
     "leaderworkerset.sigs.k8s.io/group-ready readiness gate waits for the whole group"),
    ("pods not ready, new revision holds the rollout",
     scene(lws(conditions=updating(), replicas=2),
           pods=[*group("0", revision=OLD), *group("1", ready=False)],
           statefulsets=[leader_sts(partition=1)]),
     "PodsNotReady", "group 1: 2 pods scheduled but not Ready; the rollout to revision "
     "new1234 replaces the next group only once this one is Ready"),
    ("pods not ready",
     scene(lws(ready=0, conditions=[cond("Available", "False")]), pods=group(ready=False)),
     "PodsNotReady", "group 0: 2 pods scheduled but not Ready"),
    ("workers missing",
     scene(lws(ready=0, conditions=[cond("Available", "False")]), pods=group(size=1)),
     "GroupIncomplete", "group 0 has 1 of its 2 pods"),
    ("no leader pod at all",
     scene(lws(ready=0, conditions=[cond("Available", "False")]), pods=[]),
     "GroupIncomplete", "1 of 1 groups have no leader pod yet"),
    # Precedence: the row's first cause wins over the other one present.
    ("the controller not running before a webhook down",
     scene(lws(generation=3, observed=2, ready=0, conditions=[cond("Available", "False")]),
           pods=[], webhook_configurations=[pod_webhook()], endpoint_slices=NO_ENDPOINTS),
     "NotObserved",
     "the controller has not processed generation 3 yet (status is of generation 2)"),
    ("in one group, the exhausted budget before a gate",
     scene(lws(template={"maxGroupRestarts": 0}, ready=0,
               conditions=[cond("Available", "False")]),
           pods=[pod("demo-0", deleting=True, ready=False, annotations={
               P + "group-restart-budget-exhausted": "true"}),
               pod("demo-0-1", worker=1, scheduled="SchedulingGated", gates=["example.com/x"],
                   ready=False)]),
     "RestartBudgetExhausted",
     "group 0 exhausted its restart budget: its pods are stopped and kept, and nothing "
     "restarts it until it is recovered"),
    ("one group's unschedulable pods before another's group-ready gate",
     scene(lws(hashed=True, replicas=2, ready=0), pods=[
         hash_leader("False"), pod("demo-7f3a9c2e-1", "7f3a9c2e", 1, ready=False),
         *[pod(f"demo-zz{w}", "zz", w, scheduled="Unschedulable", ready=False)
           for w in range(2)]], statefulsets=[]),
     "Unschedulable", "group zz: 2 pods cannot be scheduled"),
    ("webhook before an unschedulable group",
     scene(lws(ready=0, conditions=[cond("Available", "False")]),
           pods=group(scheduled="Unschedulable", ready=False),
           webhook_configurations=[pod_webhook()], endpoint_slices=NO_ENDPOINTS),
     "WebhookUnreachable",
     "webhook mpod.kb.io (MutatingWebhookConfiguration lws-mutating-webhook-configuration) "
     "calls Service lws-system/lws-webhook-service, which has no ready endpoints: pods of this "
     "set cannot be created"),
    ("an exhausted group before another group's unschedulable pods",
     scene(lws(replicas=2, ready=0, conditions=[cond("Available", "False")]),
           pods=[*group("0", scheduled="Unschedulable", ready=False),
                 *group("1", deleting=True, ready=False,
                        annotations={P + "group-restart-budget-exhausted": "true"})]),
     "RestartBudgetExhausted",
     "group 1 exhausted its restart budget: its pods are stopped and kept, and nothing "
     "restarts it until it is recovered"),
    ("Hash: a retained exhausted group before the gated replacement it holds back",
     scene(lws(hashed=True, size=1, ready=0),
           pods=[pod("demo-a", "aaaa", deleting=True, ready=False,
                     annotations={P + "group-restart-budget-exhausted": "true"}),
                 pod("demo-b", "bbbb", scheduled="SchedulingGated", ready=False,
                     gates=[P + "group-replacement"])], statefulsets=[]),
     "RestartBudgetExhausted",
     "group aaaa exhausted its restart budget: its pods are stopped and kept, and nothing "
     "restarts it until it is recovered"),
    ("a gate before another group's unschedulable pods",
     scene(lws(replicas=2, ready=0, conditions=[cond("Available", "False")]),
           pods=[*group("0", scheduled="Unschedulable", ready=False),
                 pod("demo-1", "1", scheduled="SchedulingGated", gates=["example.com/x"],
                     ready=False)]),
     "SchedulingGated", "group 1 is held by the scheduling gate example.com/x, added by "
     "another admission controller"),
    ("a gang before the plain unschedulable pods of its members",
     scene(lws(ready=0), pods=group(scheduled="Unschedulable", message=GANG_MSG, ready=False,
                                    spec={"schedulingGroup": {"podGroupName": "pg-0"}}),
           pod_groups=[NATIVE_PG]),
     "PodGroupIncomplete", "group 0: PodGroup pg-0 needs 2 pods placed together and has 0: "
     "the scheduler places none until all fit"),
    ("the stall before the unschedulable group it is made of",
     scene(lws(conditions=updating()), pods=group(scheduled="Unschedulable", ready=False)),
     "RolloutStalled", "the rollout is stalled: pods of the new revision cannot be scheduled "
     "(found by kubectl lws; the controller reports no stall)"),
    ("unschedulable workers before the leader's group-ready gate",
     scene(lws(hashed=True, ready=0), pods=[hash_leader("False"), pod(
         "demo-7f3a9c2e-1", "7f3a9c2e", 1, scheduled="Unschedulable", ready=False)],
         statefulsets=[]),
     "Unschedulable", "group 7f3a9c2e: 1 pod cannot be scheduled"),
    ("a leader whose own containers are not ready: not the gate",
     scene(lws(hashed=True, ready=0), pods=[hash_leader("False", containers=False)],
           statefulsets=[]),
     "PodsNotReady", "group 7f3a9c2e: 1 pod scheduled but not Ready"),
    ("a drain waiting on the group disruption budget of a Ready set: a warning",
     scene(events=[event("LeaderWorkerSet", "demo", "EvictionRefused",
                         "Refused the eviction of pod demo-1: Cannot evict pod as it would "
                         "violate the group disruption budget")]),
     "EvictionsRefused", "evictions refused by the group disruption budget: an evictor "
     "(kubectl drain, an autoscaler) waits for disrupted groups to be Ready again"),
    ("a budget of 0 groups: every healthy group's eviction is refused",
     scene(with_budget(lws(), "0")), "DisruptionBudgetUsed",
     "the group disruption budget is used up: an eviction of a pod of a healthy group "
     "(kubectl drain, an autoscaler) is refused until a disrupted group is Ready again"),
    ("the operator rolled the set back: a warning",
     scene(events=[event("LeaderWorkerSet", "demo", "RolledBack", ROLLED_BACK_NOTE)]),
     "RolledBack", "the operator rolled the templates back to the last fully Ready revision: "
     "the rollout made no progress by its deadline"),
]
# Causes that hold back an evictor, not the set, or that say what was done: not blocking.
NOT_BLOCKING = {"EvictionsRefused", "DisruptionBudgetUsed", "RolledBack"}


@pytest.mark.parametrize(("case", "given", "cause", "summary"), CASES,
                         ids=[c[0] for c in CASES])
def test_first_cause(case: str, given: Scene, cause: str, summary: str) -> None:
    found = diagnose(given)
    if not cause:
        assert found.findings == ()
        assert not found.blocked
        return
    first = found.findings[0]
    assert (first.cause, first.summary) == (cause, summary)
    assert found.blocked is (cause not in NOT_BLOCKING)


def test_every_cause_has_a_row() -> None:
    assert set(RANK) <= {c[2] for c in CASES}


# ------------------------------------------------------------------------------ details


def test_exhausted_says_how_to_recover_and_that_it_is_ours() -> None:
    given = CASES[[c[0] for c in CASES].index("restart budget exhausted")][1]
    first = diagnose(given).findings[0]
    assert first.fix == "kubectl lws recover demo 0 -n ns"
    assert "kubectl annotate pod demo-0 leaderworkerset.sigs.k8s.io/recover=true -n ns" \
        in first.hint
    assert first.as_dict()["onlyLwsOperator"] == (
        "lws-operator only: the upstream Go controller has no restart budget "
        "(maxGroupRestarts)")
    assert first.evidence[1] == "condition Degraded=True ReplicaRestartBudgetExceeded: "


def test_unschedulable_evidence_quotes_the_scheduler() -> None:
    found = diagnose(scene(lws(ready=0), pods=group(scheduled="Unschedulable",
                                                    message=GANG_MSG, ready=False)))
    assert found.findings[0].evidence == (f"pod demo-0 (for 2m): {GANG_MSG}",
                                          f"pod demo-0-1 (for 2m): {GANG_MSG}")


def test_the_deadline_says_how_to_resume_and_to_opt_in_to_rollback() -> None:
    given = CASES[[c[0] for c in CASES].index("progress deadline exceeded (our condition)")][1]
    (found, *_) = diagnose(given).findings
    assert "a new revision resumes the rollout" in found.hint
    assert ("kubectl annotate leaderworkerset demo lws-operator.dev/progress-deadline-seconds- "
            f"-n {NS}") in found.hint
    assert "lws-operator.dev/rollback-on-deadline=true" in found.hint
    assert found.as_dict()["onlyLwsOperator"]


def test_the_pause_says_how_to_resume_and_warns_at_rest() -> None:
    given = CASES[[c[0] for c in CASES].index(
        "rollout paused (before the new revision's pods not Ready)")][1]
    (found, *_) = diagnose(given).findings
    assert found.fix == "kubectl lws rollout resume demo -n ns"
    assert found.evidence == ("annotation lws-operator.dev/paused=true",
                              f"condition Progressing=Unknown RolloutPaused since {T0}")
    assert found.as_dict()["onlyLwsOperator"]
    at_rest = diagnose(scene(paused(lws()), pods=group()))
    assert [(f.cause, f.blocking) for f in at_rest.findings] == [("RolloutPaused", False)]
    assert not at_rest.blocked
    assert diagnose(scene(lws(), pods=group())).findings == ()


def test_the_stall_fix_is_the_guides_ordinal_remedy() -> None:
    found = diagnose(scene(lws(conditions=updating()), pods=group(scheduled="Unschedulable",
                                                                   ready=False)))
    assert found.findings[0].fix == (
        "kubectl patch leaderworkerset demo --type=merge -p "
        "'{\"spec\":{\"rolloutStrategy\":{\"rollingUpdateConfiguration\":"
        "{\"maxUnavailable\":\"100%\"}}}}' -n ns")
    assert found.findings[1].summary == ("group 0: 2 pods cannot be scheduled (blocking the "
                                         "rollout)")


def test_an_unschedulable_pod_inside_the_grace_period_is_not_a_stall() -> None:
    fresh = "2026-12-01T10:01:50Z"  # 10 s before NOW
    pods = group(scheduled="Unschedulable", ready=False)
    for p in pods:
        p["status"]["conditions"][0]["lastTransitionTime"] = fresh
    assert diagnose(scene(lws(conditions=updating()), pods=pods)).findings[0].cause \
        == "Unschedulable"


def test_a_serving_webhook_is_no_finding_and_its_service_is_read() -> None:
    given = scene(webhook_configurations=[pod_webhook()], endpoint_slices=SERVING)
    assert webhook_services(given) == ["lws-system/lws-webhook-service"]
    assert diagnose(given).findings == ()


@pytest.mark.parametrize(("change", "services"), [
    (lambda s: s, ["lws-system/lws-webhook-service"]),
    # Confined to another namespace: not this set's webhook.
    (lambda s: {**s, "webhook_configurations": [pod_webhook(namespaces=["other"])]}, []),
    # An objectSelector this set's pods do not match.
    (lambda s: {**s, "webhook_configurations": [_with_object_selector(
        {"matchLabels": {P + "name": "another"}})]}, []),
    # The namespace could not be read: its selector is taken to match.
    (lambda s: {**s, "namespace_labels": None,
                "webhook_configurations": [pod_webhook(namespaces=["other"])]},
     ["lws-system/lws-webhook-service"]),
])
def test_which_webhooks_concern_the_set(change: Callable[[dict[str, Any]], dict[str, Any]],
                                        services: list[str]) -> None:
    fields = change({"webhook_configurations": [pod_webhook()],
                     "namespace_labels": {"kubernetes.io/metadata.name": NS}})
    assert webhook_services(scene(**fields)) == services


def _with_object_selector(selector: dict[str, Any]) -> dict[str, Any]:
    config = pod_webhook()
    config["webhooks"][0]["objectSelector"] = selector
    return config


def test_a_webhook_down_under_a_ready_set_is_a_warning() -> None:
    found = diagnose(scene(webhook_configurations=[pod_webhook()],
                           endpoint_slices=NO_ENDPOINTS))
    assert [(f.cause, f.blocking) for f in found.findings] == [("WebhookUnreachable", False)]
    assert not found.blocked
    ignore = diagnose(scene(lws(ready=0, conditions=[cond("Available", "False")]), pods=[],
                            webhook_configurations=[pod_webhook(policy="Ignore")],
                            endpoint_slices=NO_ENDPOINTS))
    assert ignore.findings[0].summary.endswith("pods are admitted without it (failurePolicy "
                                               "Ignore)")
    assert not ignore.findings[0].blocking


def test_the_webhook_finding_carries_the_failure_event() -> None:
    given = CASES[[c[0] for c in CASES].index("webhook without endpoints, calls failing")][1]
    evidence = diagnose(given).findings[0].evidence
    assert evidence[0] == ("MutatingWebhookConfiguration lws-mutating-webhook-configuration "
                           "webhook mpod.kb.io path /mutate--v1-pod, failurePolicy Fail")
    assert evidence[1].startswith("StatefulSet demo: create Pod demo-0 in StatefulSet demo ")
    assert evidence[1].endswith("(x3)")


def test_refused_evictions_name_the_budget_and_age_out() -> None:
    refusal = event("LeaderWorkerSet", "demo", "EvictionRefused", "Refused the eviction of pod "
                    "demo-1: Cannot evict pod as it would violate the group disruption budget")
    found = diagnose(scene(events=[refusal])).findings
    assert [f.cause for f in found] == ["EvictionsRefused"]
    assert found[0].evidence == ("Event EvictionRefused 30s ago: Refused the eviction of pod "
                                 "demo-1: Cannot evict pod as it would violate the group "
                                 "disruption budget",)
    assert "kubectl annotate leaderworkerset demo --overwrite " \
        "lws-operator.dev/max-disrupted-groups=<more> -n ns" in found[0].hint
    assert found[0].as_dict()["onlyLwsOperator"].endswith("group disruption budget")
    old = {**refusal, "lastTimestamp": "2026-12-01T09:00:00Z"}
    other = event("LeaderWorkerSet", "other", "EvictionRefused", "not this set")
    assert diagnose(scene(events=[old, other])).findings == ()


@pytest.mark.parametrize(("budget", "down", "refused", "causes", "disrupted"), [
    # A drain waiting: the refusal, and the groups the budget counts now.
    ("1", {"1"}, True, ["EvictionsRefused"], "groups disrupted now: 1 of at most 1 (1)"),
    # No refusal yet, the budget used up: the next healthy group's eviction will be refused.
    ("1", {"1"}, False, ["DisruptionBudgetUsed"], "groups disrupted now: 1 of at most 1 (1)"),
    ("50%", {"0", "2"}, False, ["DisruptionBudgetUsed"],
     "groups disrupted now: 2 of at most 2 (0, 2)"),
    # Room left in the budget, nothing refused: nothing to say about it.
    ("2", {"1"}, False, [], ""),
])
def test_the_budget_shows_the_groups_it_counts_disrupted(
        budget: str, down: set[str], refused: bool, causes: list[str], disrupted: str) -> None:
    pods = [p for i in range(4) for p in group(str(i), ready=str(i) not in down)]
    refusal = event("LeaderWorkerSet", "demo", "EvictionRefused", "Refused the eviction of pod "
                    "demo-0: Cannot evict pod as it would violate the group disruption budget")
    found = diagnose(scene(with_budget(lws(replicas=4, ready=4 - len(down)), budget), pods=pods,
                           events=[refusal] if refused else []))
    budget_findings = [f for f in found.findings if f.ours == "group disruption budget"]
    assert [f.cause for f in budget_findings] == causes
    if causes:
        assert budget_findings[0].evidence[-1] == disrupted
        assert not budget_findings[0].blocking


def test_a_rollback_is_reported_with_its_event_and_annotation() -> None:
    body = lws()
    body["metadata"]["annotations"] = {"lws-operator.dev/rolled-back-from": "bad9999"}
    found = diagnose(scene(body, events=[event("LeaderWorkerSet", "demo", "RolledBack",
                                               ROLLED_BACK_NOTE)])).findings
    assert [f.cause for f in found] == ["RolledBack"]
    assert found[0].evidence == (f"Event RolledBack 30s ago: {ROLLED_BACK_NOTE}",
                                 "annotation lws-operator.dev/rolled-back-from=bad9999")
    assert found[0].as_dict()["onlyLwsOperator"].endswith("progress deadline's rollback")
    # An hour later it is no news (the annotation stays, and says nothing by itself).
    old = event("LeaderWorkerSet", "demo", "RolledBack", ROLLED_BACK_NOTE,
                when="2026-12-01T09:00:00Z")
    assert diagnose(scene(body, events=[old])).findings == ()


def test_an_old_failure_event_is_no_news() -> None:
    stale = event("StatefulSet", "demo", "FailedCreate", "exceeded quota",
                  when="2026-12-01T09:00:00Z")
    found = diagnose(scene(lws(ready=0, conditions=[cond("Available", "False")]), pods=[],
                           statefulsets=[{**leader_sts(), "status": {"replicas": 0}}],
                           events=[stale]))
    assert [f.cause for f in found.findings] == ["GroupIncomplete"]


@pytest.mark.parametrize(("leaders", "hint_start", "why"), [
    ([pod("demo-a", "aaaa", deleting=True, ready=False)],
     "the LWS controller lifts it once the groups being torn down are gone",
     "waiting for group(s) aaaa to finish terminating"),
    ([pod("demo-a", "aaaa")],
     "it stays gated: at most spec.replicas groups of a revision are ungated",
     "1 groups of its revision already run (replicas 1)"),
])
def test_why_our_hash_gate_is_not_lifted(leaders: list[dict[str, Any]], hint_start: str,
                                         why: str) -> None:
    gated_leader = pod("demo-b", "bbbb", scheduled="SchedulingGated", ready=False,
                       gates=[P + "group-replacement"])
    found = diagnose(scene(lws(hashed=True, size=1, ready=0), pods=[*leaders, gated_leader],
                           statefulsets=[]))
    first = found.findings[0]
    assert (first.cause, first.group) == ("SchedulingGated", "bbbb")
    assert first.hint.startswith(hint_start)
    assert first.evidence[-1] == why
    assert first.ours == "group-replacement scheduling gate"


def test_a_group_ready_gate_with_every_worker_ready_points_at_the_controller() -> None:
    found = diagnose(scene(lws(hashed=True, ready=0), pods=[hash_leader("False"), pod(
        "demo-7f3a9c2e-1", "7f3a9c2e", 1)], statefulsets=[]))
    first = found.findings[0]
    assert first.evidence[1] == "1 of 1 workers Ready"
    assert first.hint.startswith("every worker is Ready, so the LWS controller should set")


def test_not_ready_evidence_names_the_container_state() -> None:
    broken = pod("demo-0-1", worker=1, ready=False)
    broken["status"]["containerStatuses"] = [{"name": "engine", "ready": False,
                                              "restartCount": 4, "state": {"waiting": {
                                                  "reason": "ImagePullBackOff",
                                                  "message": "engine:v9 not found"}}}]
    found = diagnose(scene(lws(ready=0), pods=[pod("demo-0"), broken]))
    assert found.findings[0].evidence == (
        "pod demo-0-1 not Ready for 2m: phase Pending, on node-1, container engine waiting: "
        "ImagePullBackOff (engine:v9 not found), 4 restarts",)


@pytest.mark.parametrize(("wanted", "index"), [
    ("1", "1"), ("demo-1-1", "1"), ("key1", "1"), ("key1key1", "1")])
def test_one_group(wanted: str, index: str) -> None:
    pods = [*group("0", scheduled="Unschedulable", ready=False), *group("1")]
    found = diagnose(scene(lws(replicas=2, ready=1), pods=pods), wanted)
    assert (found.group, found.ready, found.updated, found.findings) == (index, True, True, ())
    assert found.summary == "Ready and updated: 2/2 pods ready, revision new1234"


def test_an_unknown_group_is_a_lookup_error() -> None:
    with pytest.raises(LookupError, match="LeaderWorkerSet demo has no group '9'"):
        diagnose(scene(), "9")


def test_the_set_summary() -> None:
    found = diagnose(scene(lws(conditions=updating(), replicas=2, ready=1, updated=1),
                           pods=[*group("0", revision=OLD), *group("1", ready=False)],
                           statefulsets=[leader_sts(partition=1)]))
    assert found.summary == ("not Ready: 1/2 groups ready, 1/2 updated to revision new1234, "
                             "partition 1")


@pytest.mark.parametrize(("selector", "labels", "matches"), [
    (None, {}, True),
    ({}, {"a": "1"}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "1"}, True),
    ({"matchLabels": {"a": "1"}}, {"a": "2"}, False),
    ({"matchExpressions": [{"key": "a", "operator": "In", "values": ["1"]}]}, {}, False),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {}, True),
    ({"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["1"]}]}, {"a": "1"},
     False),
    ({"matchExpressions": [{"key": "a", "operator": "Exists"}]}, {"a": ""}, True),
    ({"matchExpressions": [{"key": "a", "operator": "DoesNotExist"}]}, {"a": ""}, False),
])
def test_selector_matches(selector: dict[str, Any] | None, labels: dict[str, str],
                          matches: bool) -> None:
    assert selector_matches(selector, labels) is matches


def test_events_of_both_apis_read_alike() -> None:
    core = event("Pod", "demo-0", "FailedScheduling", "no", when="2026-12-01T10:00:00Z")
    new = {"regarding": {"kind": "Pod", "name": "demo-0"}, "reason": "FailedScheduling",
           "note": "no", "type": "Warning", "eventTime": "2026-12-01T10:00:00.000000Z",
           "series": {"count": 3}}
    assert event_fact(core) == event_fact(new)


def test_render_prints_the_first_cause_in_full_and_the_others_in_a_line() -> None:
    pods = [*group("0", scheduled="Unschedulable", message=GANG_MSG, ready=False),
            pod("demo-1", "1", scheduled="SchedulingGated", gates=["example.com/x"],
                ready=False)]
    given = scene(lws(replicas=2, ready=0, updated=2, conditions=[cond("Available", "False")]),
                  pods=pods)
    out = io.StringIO()
    render(diagnose(given), out)
    assert out.getvalue().splitlines() == [
        "LeaderWorkerSet ns/demo: not Ready: 0/2 groups ready, 2/2 updated to revision new1234",
        "Blocked by: SchedulingGated: group 1 is held by the scheduling gate example.com/x, "
        "added by another admission controller",
        "  - pod demo-1: schedulingGates example.com/x",
        "  hint: the controller that owns example.com/x (a queueing or quota system) must lift "
        "it; LWS does not",
        "Also:",
        "  Unschedulable: group 0: 2 pods cannot be scheduled",
    ]


def test_render_of_a_ready_set() -> None:
    out = io.StringIO()
    render(diagnose(scene()), out)
    assert out.getvalue().splitlines() == [
        "LeaderWorkerSet ns/demo: Ready and updated: 1/1 groups ready, 1/1 updated to revision "
        "new1234", "Nothing blocks it."]


def test_the_diagnosis_does_not_change_what_it_reads() -> None:
    given = CASES[[c[0] for c in CASES].index("rollout stalled (our condition)")][1]
    before = copy.deepcopy(given)
    diagnose(given)
    assert given == before
