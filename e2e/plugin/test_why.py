"""``kubectl lws why`` end to end: each blocking cause produced for real on the full tier, and the
exact finding the installed console script prints for it.

Every scenario is started at once when the module begins (a task each, on the session's loop,
next to the in-process operator), so their waits overlap; each test then waits for its own
scenario to reach the state it diagnoses and runs ``kubectl-lws why`` (text and ``-o json``) as
a user would. kwok withholds readiness from pods annotated with a long ready delay, which is how
a new revision "never becomes Ready" here.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from e2e.cluster.faults import restart_container
from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import API, KIND, LeaderWorkerSet, P
from e2e.harness.converge import converged, get_lws, pods_of
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH, condition, wait_for

pytestmark = pytest.mark.full

KUBECTL_LWS = Path(sys.executable).with_name("kubectl-lws")
NEVER = "10000h"  # kwok's ready delay for pods that must never become Ready
TOO_BIG = {"requests": {"cpu": "1000"}}  # no node has 1000 CPUs
ADMISSION = "admissionregistration.k8s.io/v1"


async def kubectl_lws(op: Operator, *args: str) -> tuple[int, str]:
    """The console script as a user runs it: its exit code and what it printed."""
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL_LWS), "--kubeconfig", op.kubeconfig, "-n", op.namespace, *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        stdin=asyncio.subprocess.DEVNULL)
    out, err = await proc.communicate()
    assert proc.returncode is not None
    assert not err.strip() or proc.returncode >= 3, err.decode()
    return proc.returncode, out.decode()


async def why(op: Operator, *args: str) -> tuple[int, list[str], dict[str, Any]]:
    """``why`` in text and as json: the exit code, the text lines and the data."""
    (code, text), (json_code, data) = await asyncio.gather(
        kubectl_lws(op, "why", *args), kubectl_lws(op, "why", *args, "-o", "json"))
    assert code == json_code, (text, data)
    return code, text.splitlines(), json.loads(data)


def lws(name: str, replicas: int = 1, size: int = 2) -> LeaderWorkerSet:
    return LeaderWorkerSet(name).replicas(replicas).size(size).image("engine:v1")


async def scheduled_false(op: Operator, name: str, count: int, reason: str = "Unschedulable",
                          ) -> bool:
    pods = await pods_of(op, name)
    return len(pods) == count and all(
        any(c.get("type") == "PodScheduled" and c.get("reason") == reason
            for c in (p.get("status") or {}).get("conditions") or []) for p in pods)


# ------------------------------------------------------------------------------ the scenarios


async def unschedulable(op: Operator) -> None:
    await op.kube.create(lws("unsched").image("engine:v1", resources=TOO_BIG).build(),
                         op.namespace)
    await wait_for(lambda: scheduled_false(op, "unsched", 2), timeout=60,
                   what="both pods unschedulable")


async def gated(op: Operator) -> None:
    await op.kube.create(lws("gated", size=1).worker_pod(
        schedulingGates=[{"name": "example.com/approval"}]).build(), op.namespace)
    await wait_for(lambda: scheduled_false(op, "gated", 1, "SchedulingGated"), timeout=60,
                   what="the gated pod")


async def exhausted(op: Operator) -> None:
    await op.kube.create(lws("budget").template(maxGroupRestarts=0).build(), op.namespace)
    await converged(op, "budget", 1, 2)
    await restart_container(op.kube, op.namespace, "budget-0-1")

    async def marked() -> bool:
        leader = await op.kube.get("v1", "Pod", "budget-0", op.namespace)
        annotations = ((leader or {}).get("metadata") or {}).get("annotations") or {}
        return annotations.get(P + "group-restart-budget-exhausted") == "true"

    await wait_for(marked, timeout=60, what="group 0 exhausted")


async def never_ready(op: Operator) -> None:
    await op.kube.create(lws("neverready", replicas=2).build(), op.namespace)
    await converged(op, "neverready", 2, 2)
    await op.kube.patch(API, KIND, "neverready", {"spec": {"leaderWorkerTemplate": {
        "workerTemplate": {"metadata": {"annotations": {READY_DELAY_ANNOTATION: NEVER}},
                           "spec": {"containers": [{"name": "engine", "image": "engine:v2"}]}}}}},
        op.namespace, content_type=MERGE_PATCH)

    async def stuck() -> bool:
        pods = [p for p in await pods_of(op, "neverready")
                if p["metadata"]["name"].startswith("neverready-1")
                and not p["metadata"].get("deletionTimestamp")]
        return len(pods) == 2 and all(
            p["spec"].get("nodeName")
            and (p["metadata"].get("annotations") or {}).get(READY_DELAY_ANNOTATION) == NEVER
            for p in pods)

    await wait_for(stuck, timeout=60, what="group 1 recreated on the new revision, not Ready")


async def stalled(op: Operator) -> None:
    await op.kube.create(lws("stalled", size=1).build(), op.namespace)
    await converged(op, "stalled", 1, 1)
    await op.kube.patch(API, KIND, "stalled", {"spec": {"leaderWorkerTemplate": {
        "workerTemplate": {"spec": {"containers": [
            {"name": "engine", "image": "engine:v2", "resources": TOO_BIG}]}}}}},
        op.namespace, content_type=MERGE_PATCH)

    async def reported() -> bool:
        got = await get_lws(op, "stalled")
        return any(c["type"] == "Progressing" and c.get("reason") == "RolloutStalled"
                   for c in got["status"].get("conditions") or [])

    await wait_for(reported, timeout=60, what="RolloutStalled")


async def webhook_down(op: Operator) -> None:
    """The pod webhook registered through a Service with no endpoints (an operator whose pods
    are all gone), confined to the test namespace and to this set's pods."""
    ns = op.namespace
    await op.kube.create({"apiVersion": "v1", "kind": "Service",
                          "metadata": {"name": "lws-webhook-service"},
                          "spec": {"ports": [{"port": 443, "targetPort": 9443}]}}, ns)
    await op.kube.create({
        "apiVersion": ADMISSION, "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": f"why-down-{ns}"},
        "webhooks": [{
            "name": "mpod.kb.io", "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Fail", "timeoutSeconds": 5,
            "clientConfig": {"service": {"name": "lws-webhook-service", "namespace": ns,
                                         "path": "/mutate--v1-pod", "port": 443}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"]}],
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}},
            "objectSelector": {"matchLabels": {P + "name": "nohook"}}}]})
    await op.kube.create(lws("nohook", size=1).build(), ns)

    async def refused() -> bool:
        events = await op.kube.list("v1", "Event", ns)
        return any(e.get("reason") == "FailedCreate" and e["involvedObject"]["name"] == "nohook"
                   and "failed calling webhook" in (e.get("message") or "") for e in events)

    await wait_for(refused, timeout=60, what="the StatefulSet's FailedCreate")


async def group_ready_gate(op: Operator) -> None:
    body = (lws("hashready").spec(groupIdentity="Hash")
            .leader_template({"spec": {"containers": [{"name": "leader", "image": "engine:v1"}]}})
            .worker_annotations({READY_DELAY_ANNOTATION: NEVER}).build())
    await op.kube.create(body, op.namespace)

    async def leader_waits() -> bool:
        for pod in await pods_of(op, "hashready"):
            if pod["metadata"]["labels"].get(P + "worker-index") == "0":
                return (condition(pod, "ContainersReady") == "True"
                        and condition(pod, "Ready") == "False"
                        and len(await pods_of(op, "hashready")) == 2)
        return False

    await wait_for(leader_waits, timeout=60, what="the Hash leader held by group-ready")


async def gang(op: Operator) -> None:
    """Replica-level gang of two: the leader alone would fit, the worker fits nowhere, so the
    gang places neither."""
    body = (lws("gang").spec(scheduling={})
            .leader_template({"spec": {"containers": [{"name": "leader", "image": "engine:v1"}]}})
            .image("engine:v1", resources=TOO_BIG).build())
    await op.kube.create(body, op.namespace)
    await wait_for(lambda: scheduled_false(op, "gang", 2), timeout=60,
                   what="the whole gang unschedulable")


SCENARIOS: dict[str, Callable[[Operator], Coroutine[Any, Any, None]]] = {
    "unsched": unschedulable, "gated": gated, "budget": exhausted, "neverready": never_ready,
    "stalled": stalled, "nohook": webhook_down, "hashready": group_ready_gate, "gang": gang}


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def scenes(operator: Operator) -> AsyncIterator[dict[str, asyncio.Task[None]]]:
    """Every scenario started at once; a test awaits its own."""
    tasks = {name: asyncio.create_task(run(operator)) for name, run in SCENARIOS.items()}
    yield tasks
    for task in tasks.values():
        task.cancel()
    with contextlib.suppress(BaseException):
        await asyncio.gather(*tasks.values(), return_exceptions=True)
    await operator.kube.delete(ADMISSION, "MutatingWebhookConfiguration",
                               f"why-down-{operator.namespace}")


# ------------------------------------------------------------------------------ the tests


async def test_unschedulable_pods_with_the_schedulers_message(
        operator: Operator, scenes: dict[str, asyncio.Task[None]]) -> None:
    await scenes["unsched"]
    code, lines, data = await why(operator, "unsched")
    assert code == 1
    first = data["findings"][0]
    assert (first["cause"], first["summary"], first["group"]) == (
        "Unschedulable", "group 0: 2 pods cannot be scheduled", "0")
    assert [e.split(" ")[1] for e in first["evidence"]] == ["unsched-0", "unsched-0-1"]
    assert all("Insufficient cpu" in e for e in first["evidence"])
    assert lines[1] == "Blocked by: Unschedulable: group 0: 2 pods cannot be scheduled"
    assert lines[2].startswith("  - pod unsched-0 (for ")
    assert "Insufficient cpu" in lines[2]


async def test_a_scheduling_gate_from_the_pod_template(
        operator: Operator, scenes: dict[str, asyncio.Task[None]]) -> None:
    await scenes["gated"]
    code, lines, data = await why(operator, "gated")
    assert code == 1
    ns = operator.namespace
    assert lines[1:4] == [
        "Blocked by: SchedulingGated: group 0 is held by the scheduling gate "
        "example.com/approval, which the pod template sets: nothing lifts it",
        "  - pod gated-0: schedulingGates example.com/approval",
        f"  fix: kubectl edit leaderworkerset gated -n {ns}"]
    assert data["findings"][0]["onlyLwsOperator"] == ""


async def test_an_exhausted_restart_budget_and_how_to_recover(
        operator: Operator, scenes: dict[str, asyncio.Task[None]]) -> None:
    await scenes["budget"]
    code, lines, data = await why(operator, "budget")
    assert code == 1
    ns = operator.namespace
    first = data["findings"][0]
    assert first["cause"] == "RestartBudgetExhausted"
    assert lines[1] == ("Blocked by: RestartBudgetExhausted: group 0 exhausted its restart "
                        "budget: its pods are stopped and kept, and nothing restarts it until "
                        "it is recovered")
    assert first["evidence"][0] == ("leader pod budget-0 is annotated "
                                    "group-restart-budget-exhausted (maxGroupRestarts 0)")
    assert first["fix"] == f"kubectl lws recover budget 0 -n {ns}"
    assert (f"kubectl annotate pod budget-0 leaderworkerset.sigs.k8s.io/recover=true -n {ns}"
            in first["hint"])
    assert first["onlyLwsOperator"] == ("lws-operator only: the upstream Go controller has no "
                                        "restart budget (maxGroupRestarts)")
    # The same for the group alone.
    code, lines, _ = await why(operator, "budget", "0")
    assert code == 1
    assert lines[0].startswith(f"LeaderWorkerSet {ns}/budget group 0: not Ready: ")


async def test_a_rollout_held_by_a_new_revision_that_never_becomes_ready(
        operator: Operator, scenes: dict[str, asyncio.Task[None]]) -> None:
    await scenes["neverready"]
    code, lines, data = await why(operator, "neverready")
    assert code == 1
    revision = (await pods_of(operator, "neverready"))
    current = next(p["metadata"]["labels"][P + "template-revision-hash"] for p in revision
                   if p["metadata"]["name"] == "neverready-1"
                   and not p["metadata"].get("deletionTimestamp"))
    first = data["findings"][0]
    assert (first["cause"], first["group"]) == ("PodsNotReady", "1")
    assert first["summary"] == (
        f"group 1: 2 pods scheduled but not Ready; the rollout to revision {current} replaces "
        "the next group only once this one is Ready")
    assert [e.split(" ")[1] for e in first["evidence"]] == ["neverready-1", "neverready-1-1"]
    assert all("phase Pending" in e and "containers not started" in e
               for e in first["evidence"])
    assert first["fix"] == f"kubectl edit leaderworkerset neverready -n {operator.namespace}"
    assert "1/2 updated to revision" in lines[0] or "updated to revision" in lines[0]
    assert len(data["findings"]) == 1  # group 0 (old revision, Ready) is fine


async def test_a_stalled_rollout_names_its_cause_and_the_remedy(
        operator: Operator, scenes: dict[str, asyncio.Task[None]]) -> None:
    await scenes["stalled"]
    code, lines, data = await why(operator, "stalled")
    assert code == 1
    first, second = data["findings"][:2]
    assert first["cause"] == "RolloutStalled"
    assert lines[1] == ("Blocked by: RolloutStalled: the rollout is stalled: pods of the new "
                        "revision cannot be scheduled while the groups not yet replaced hold "
                        "the capacity")
    assert "Insufficient cpu" in first["evidence"][0]
    remedy = {"spec": {"rolloutStrategy": {"rollingUpdateConfiguration": {
        "maxUnavailable": "100%"}}}}
    assert first["fix"] == (f"kubectl patch leaderworkerset stalled --type=merge -p "
                            f"'{json.dumps(remedy, separators=(',', ':'))}' "
                            f"-n {operator.namespace}")
    assert first["onlyLwsOperator"].endswith("has no RolloutStalled condition")
    assert (second["cause"], second["summary"]) == (
        "Unschedulable", "group 0: 1 pod cannot be scheduled (blocking the rollout)")


async def test_the_pod_webhook_without_endpoints(
        operator: Operator, scenes: dict[str, asyncio.Task[None]]) -> None:
    await scenes["nohook"]
    code, lines, data = await why(operator, "nohook")
    assert code == 1
    ns = operator.namespace
    first = data["findings"][0]
    assert lines[1] == (
        f"Blocked by: WebhookUnreachable: webhook mpod.kb.io (MutatingWebhookConfiguration "
        f"why-down-{ns}) calls Service {ns}/lws-webhook-service, which has no ready endpoints: "
        "pods of this set cannot be created")
    assert first["evidence"][0] == (f"MutatingWebhookConfiguration why-down-{ns} webhook "
                                    "mpod.kb.io path /mutate--v1-pod, failurePolicy Fail")
    assert first["evidence"][1].startswith("StatefulSet nohook: ")
    assert "failed calling webhook" in first["evidence"][1]


async def test_a_hash_leader_held_by_its_group_ready_gate(
        operator: Operator, scenes: dict[str, asyncio.Task[None]]) -> None:
    await scenes["hashready"]
    pods = await pods_of(operator, "hashready")
    leader = next(p for p in pods if p["metadata"]["labels"][P + "worker-index"] == "0")
    group = leader["metadata"]["labels"][P + "group-index"]
    code, lines, data = await why(operator, "hashready")
    assert code == 1
    first = data["findings"][0]
    assert lines[1] == (
        f"Blocked by: GroupReadyGate: group {group}: leader {leader['metadata']['name']} is not "
        "Ready because its leaderworkerset.sigs.k8s.io/group-ready readiness gate waits for "
        "the whole group")
    assert first["evidence"][1] == "0 of 1 workers Ready"
    assert first["evidence"][2].startswith(f"pod hashready-{group}-1 not Ready")
    assert first["onlyLwsOperator"].endswith("has no group-ready readiness gate")


async def test_a_gang_whose_minimum_cannot_be_placed(
        operator: Operator, scenes: dict[str, asyncio.Task[None]]) -> None:
    await scenes["gang"]
    code, lines, data = await why(operator, "gang")
    assert code == 1
    first = data["findings"][0]
    pod_group = (await pods_of(operator, "gang"))[0]["spec"]["schedulingGroup"]["podGroupName"]
    assert lines[1] == (f"Blocked by: PodGroupIncomplete: group 0: PodGroup {pod_group} needs "
                        "2 pods placed together and has 0: the scheduler places none until "
                        "all fit")
    assert first["onlyLwsOperator"].endswith("native gang scheduling (spec.scheduling)")


async def test_a_ready_set_exits_zero(operator: Operator) -> None:
    await operator.kube.create(lws("fine").build(), operator.namespace)
    await converged(operator, "fine", 1, 2)
    code, lines, data = await why(operator, "fine")
    assert (code, data["findings"], data["ready"], data["updated"]) == (0, [], True, True)
    assert lines[0].startswith(f"LeaderWorkerSet {operator.namespace}/fine: Ready and updated: "
                               "1/1 groups ready, 1/1 updated to revision ")
    assert lines[1] == "Nothing blocks it."
    assert (await kubectl_lws(operator, "why", "absent"))[0] == 3
