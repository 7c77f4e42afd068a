"""The webhook taken away: LWS pods fail closed, other pods do not notice, and
everything recovers when the operator returns.

A real ``lws-operator run`` process manages a running LeaderWorkerSet on the full tier; it
registered its webhooks itself, by URL on 127.0.0.1. Two faults, each what an operator outage
looks like to the API server:

* ``SIGKILL``: the process is gone but its registrations stay (only SIGTERM removes them), so the
  API server keeps calling a closed port (connection refused); a new process takes over.
* ``SIGSTOP``: the process hangs; every call waits for the webhook timeout (10 s); ``SIGCONT``
  brings it back. (Leader election is on, the default: a process resumed after more than the
  renew deadline exits with status 1 as designed, and a new one is started, as a Deployment's
  restart would.)

While it is down: a deleted worker pod cannot be recreated (the StatefulSet reports FailedCreate
naming our webhook), a direct create of a pod with the LeaderWorkerSet labels fails with the same
error, and creating or updating a LeaderWorkerSet fails naming its webhook. A label change on an
LWS pod goes through (upstream's ``vpod.kb.io``, which failed it although it checks nothing, is
not registered: ``admission.registration``), and deleting pods is never blocked (no webhook has
a DELETE rule). A plain pod and a Deployment's pods, in the same namespace and in another
one, are created and become Ready (the pod webhooks select only pods carrying the LeaderWorkerSet
name label). When it is back, the missing pod is created, every group is whole and Ready, and
no pod of the other groups was replaced (same UIDs). The touched group itself may be recreated:
after SIGCONT the operator sees the worker's deletion and applies RecreateGroupOnPodRestart;
after SIGKILL the deletion happened while nobody watched, so only the StatefulSet replaces the
pod, as with upstream.

Short (CI): one cycle of each fault (3 groups). Full: five of each (11 groups); each fault
touches a group of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from e2e.chaos import size
from e2e.harness.admission import is_mutated, lws_pod
from e2e.harness.admission_load import delete_registrations, lws_body, registered_url
from e2e.harness.clusters import Clusters
from e2e.harness.launcher import OperatorProcess
from e2e.kube import MERGE_PATCH, Kube, condition, is_ready, wait_for
from lws_operator.kube.client import ApiException, KubeClient, status_message

pytestmark = [pytest.mark.full, pytest.mark.chaos_run]

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"
NAME = "victim"
CYCLES = size(1, 5)
# Each fault deletes a worker of another group: kube-controller-manager's event recorder keeps
# only about 25 events per object (then one per 5 minutes), and every fault makes a StatefulSet
# emit several FailedCreate events, so a second fault on the same StatefulSet could go unreported.
# Group 0 is never touched.
FAULTS = ("SIGKILL", "SIGSTOP")
REPLICAS, SIZE = 1 + len(FAULTS) * CYCLES, 2
# What the API server reports for each fault (Go's error text for the dial and for the timeout).
FAULT_ERRORS = {"SIGKILL": ("connection refused",),
                "SIGSTOP": ("context deadline exceeded", "Client.Timeout", "timeout")}


@dataclass
class Setup:
    kube: Kube
    raw: KubeClient
    kubeconfig: str
    namespace: str
    other: str  # a second namespace without any LeaderWorkerSet
    run_id: str
    logs: Path
    operator: OperatorProcess | None = None
    stopped: OperatorProcess | None = None  # SIGSTOPped, not resumed yet
    started: list[OperatorProcess] = field(default_factory=list)
    log: list[str] = field(default_factory=list)  # what happened, printed at the end

    @property
    def operator_namespace(self) -> str:
        return f"lws-system-{self.run_id}"

    async def start_operator(self) -> OperatorProcess:
        op = OperatorProcess.local(self.kubeconfig, self.run_id,
                             self.logs / f"operator-{len(self.started)}.log",
                             extra_args=["--metrics-bind-address", "0"])
        self.started.append(op)
        await op.start()
        self.operator = op
        return op


def leading(op: OperatorProcess) -> bool:
    """Whether the process has taken the Lease (it logs that once; it exits when it loses it)."""
    return ": leading" in op.log_text(1_000_000)


@pytest_asyncio.fixture(loop_scope="session")
async def setup(clusters: Clusters, tmp_path: Path) -> AsyncIterator[Setup]:
    cluster = clusters.get("full")
    await asyncio.to_thread(cluster.install_crd)
    kubeconfig = str(cluster.kubeconfig)
    kube = await Kube.connect(kubeconfig)
    raw = await KubeClient.connect(kubeconfig)
    run_id = uuid.uuid4().hex[:8]
    s = Setup(kube, raw, kubeconfig, f"t-wh-{run_id}", f"t-wh-{run_id}-other", run_id, tmp_path)
    for ns in (s.namespace, s.other, s.operator_namespace):
        await kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})
    try:
        yield s
    finally:
        if s.stopped is not None and s.stopped.process is not None:
            # A stopped process cannot even be terminated. Resumed, a lapsed Lease makes it
            # exit within a retry period.
            with contextlib.suppress(ProcessLookupError):
                signal_pod(s.stopped.process, signal.SIGCONT)
            await asyncio.sleep(3)
        if s.operator is not None:
            # The finalizer needs the operator: remove the LeaderWorkerSet while one runs (a
            # new one if the last exited, e.g. after a failed assertion).
            if s.operator.process is None or s.operator.process.returncode is not None:
                with contextlib.suppress(Exception):
                    await s.start_operator()
            await kube.delete(API, KIND, NAME, s.namespace)
            with contextlib.suppress(AssertionError):
                await wait_for(lambda: _gone(kube, s.namespace), timeout=60,
                               what="the LeaderWorkerSet and its pods gone")
        for op in s.started:
            await op.stop()
        # A killed operator leaves its registrations behind; they would block every LWS pod
        # in the cluster.
        await delete_registrations(raw, f"lws-mutating-{run_id}", f"lws-validating-{run_id}")
        for ns in (s.namespace, s.other, s.operator_namespace):
            await kube.delete("v1", "Namespace", ns)
        await raw.close()
        await kube.close()


async def _gone(kube: Kube, namespace: str) -> bool:
    return not await kube.list(API, KIND, namespace) and not await kube.list(
        "v1", "Pod", namespace, label_selector=f"{P}name={NAME}")


def victim() -> dict[str, Any]:
    return {"apiVersion": API, "kind": KIND, "metadata": {"name": NAME},
            "spec": {"replicas": REPLICAS, "leaderWorkerTemplate": {"size": SIZE,
                     "workerTemplate": {"spec": {"containers": [
                         {"name": "engine", "image": "engine:v1"}]}}}}}


async def whole_and_ready(s: Setup) -> dict[str, str] | None:
    """Pod name -> UID once every group is whole, Ready and admitted by our webhook, and the
    LeaderWorkerSet reports every replica ready and is Available."""
    pods = [p for p in await s.kube.list("v1", "Pod", s.namespace,
                                         label_selector=f"{P}name={NAME}")
            if not p["metadata"].get("deletionTimestamp")]
    if len(pods) != REPLICAS * SIZE or not all(is_ready(p) and is_mutated(p) for p in pods):
        return None
    lws = await s.kube.get(API, KIND, NAME, s.namespace)
    status = (lws or {}).get("status") or {}
    if status.get("readyReplicas") != REPLICAS or condition(lws, "Available") != "True":
        return None
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}


def group(pod_name: str) -> str:
    """``victim-1`` and ``victim-1-1`` belong to group 1."""
    return pod_name.split("-")[1]


async def failed_create_events(s: Setup, statefulset: str) -> dict[tuple[str, int], str]:
    """(event name, count) -> message of the StatefulSet's FailedCreate events."""
    events = await s.kube.list("v1", "Event", s.namespace,
                               field_selector=f"involvedObject.name={statefulset},"
                                              "reason=FailedCreate")
    return {(e["metadata"]["name"], int(e.get("count") or 1)): str(e.get("message"))
            for e in events}


async def create_error(coro: Any) -> tuple[int, str]:
    """The API error a create or update ends with (it must fail)."""
    try:
        await coro
    except ApiException as exc:
        return int(exc.status or 0), status_message(exc)
    raise AssertionError("the request succeeded although the webhook is down")


def assert_names_webhook(message: str, webhook: str, fault: str) -> None:
    assert f'failed calling webhook "{webhook}"' in message, message
    assert any(reason in message for reason in FAULT_ERRORS[fault]), message


async def non_lws_pods_run(s: Setup, tag: str) -> list[str]:
    """A plain pod and a 2-replica Deployment in each namespace; waits until all are Ready."""
    made = []
    for ns in (s.namespace, s.other):
        plain = f"plain-{tag}"
        await s.kube.create({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": plain},
                             "spec": {"containers": [{"name": "c", "image": "busybox"}]}}, ns)
        app = f"app-{tag}"
        await s.kube.create({
            "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": app}},
                     "template": {"metadata": {"labels": {"app": app}},
                                  "spec": {"containers": [{"name": "c", "image": "busybox"}]}}}},
            ns)
        made.append(f"{ns}: pod {plain}, deployment {app}")

        async def ready(ns: str = ns, app: str = app, plain: str = plain) -> bool:
            pods = await s.kube.list("v1", "Pod", ns, label_selector=f"app={app}")
            single = await s.kube.get("v1", "Pod", plain, ns)
            return len(pods) == 2 and all(is_ready(p) for p in [*pods, single])

        await wait_for(ready, timeout=120, interval=0.5,
                       what=f"non-LWS pods Ready in {ns} with the webhook down")
    return made


def signal_pod(process: asyncio.subprocess.Process, sig: signal.Signals) -> None:
    """``sig`` to the operator and its admission process (the webhooks' server, a child in the
    operator's process group): what a container runtime's kill or freeze does to a pod."""
    os.killpg(process.pid, sig)


async def one_fault(s: Setup, fault: str, cycle: int, touched: str,
                    before: dict[str, str]) -> dict[str, str]:
    op = s.operator
    assert op is not None
    assert op.process is not None
    dead_url = await registered_url(s.raw, f"lws-mutating-{s.run_id}")
    assert dead_url is not None
    assert f":{op.webhook_port}/" in dead_url
    tag = f"{fault.lower()}-{cycle}"
    t0 = time.monotonic()
    if fault == "SIGKILL":
        signal_pod(op.process, signal.SIGKILL)
        await op.process.wait()
        # A crash removes nothing: the API server keeps calling the dead endpoint.
        assert await registered_url(s.raw, f"lws-mutating-{s.run_id}") == dead_url
    else:
        signal_pod(op.process, signal.SIGSTOP)
        s.stopped = op

    # 1. A worker pod deleted: its StatefulSet must recreate it and cannot.
    statefulset = f"{NAME}-{touched}"
    worker = f"{NAME}-{touched}-1"
    seen = set(await failed_create_events(s, statefulset))
    await s.kube.delete("v1", "Pod", worker, s.namespace)

    async def failed_create() -> str | None:
        for key, message in (await failed_create_events(s, statefulset)).items():
            if key not in seen and worker in message:
                return message
        return None

    failed_create_event = wait_for(
        failed_create, timeout=90, interval=0.5,
        what=f"FailedCreate of {worker} with the webhook down ({fault})")

    # 1-5 at once (a hung webhook makes each blocked request wait for its timeout):
    # 2. a direct create of a pod with the LeaderWorkerSet labels fails, naming our webhook;
    # 3. LeaderWorkerSets cannot be created or changed (the mutating webhook is called first);
    # 4. a change to an LWS pod goes through (no webhook checks pod updates);
    # 5. pods that are not LeaderWorkerSet pods do not notice.
    direct = f"direct-{tag}"
    leader = f"{NAME}-0"
    errors = asyncio.gather(
        create_error(s.kube.create(lws_pod(direct, group=NAME), s.namespace)),
        create_error(s.raw.request(
            "POST", f"/apis/{API}/namespaces/{s.namespace}/leaderworkersets",
            body=lws_body(f"new-{tag}", valid=True))),
        create_error(s.kube.patch(
            API, KIND, NAME, {"metadata": {"annotations": {"example.com/touched": tag}}},
            s.namespace, content_type=MERGE_PATCH)),
        s.kube.patch(
            "v1", "Pod", leader, {"metadata": {"labels": {"example.com/touched": tag}}},
            s.namespace, content_type=MERGE_PATCH))
    event, made, answers = await asyncio.gather(failed_create_event, non_lws_pods_run(s, tag),
                                                errors)
    assert event is not None
    assert_names_webhook(event, "mpod.kb.io", fault)
    (code, message), (lws_code, lws_create), (update_code, lws_update), \
        patched = answers
    assert code == 500, (code, message)
    assert_names_webhook(message, "mpod.kb.io", fault)
    assert await s.kube.get("v1", "Pod", direct, s.namespace) is None
    assert lws_code == 500, (lws_code, lws_create)
    assert_names_webhook(lws_create, "mleaderworkerset.kb.io", fault)
    assert update_code == 500, (update_code, lws_update)
    assert_names_webhook(lws_update, "mleaderworkerset.kb.io", fault)
    assert (patched.get("metadata") or {}).get("labels", {}).get("example.com/touched") == tag

    # Still down, still closed: the deleted worker was not recreated behind our back.
    assert await s.kube.get("v1", "Pod", worker, s.namespace) is None
    down_for = time.monotonic() - t0

    # 5. The operator returns.
    t1 = time.monotonic()
    if fault == "SIGKILL":
        await s.start_operator()
    else:
        signal_pod(op.process, signal.SIGCONT)
        s.stopped = None
    exits: list[int] = []

    async def recovered() -> dict[str, str] | None:
        # A process resumed after more than the renew deadline finds its Lease lapsed and
        # exits (status 1, as controller-runtime's manager does); a Deployment's pod would be
        # restarted, so a new process is started here.
        current = s.operator
        if current is not None and current.process is not None \
                and current.process.returncode is not None:
            exits.append(current.process.returncode)
            current = await s.start_operator()
        if current is None or not leading(current):
            return None  # recovered means reconciling again too, not only admitting
        return await whole_and_ready(s)

    after = await wait_for(recovered, timeout=180, interval=0.5,
                           what=f"every group whole and Ready after {fault}")
    assert after is not None
    recovered_in = time.monotonic() - t1
    assert all(code == 1 for code in exits), exits  # only the lapsed Lease, never a crash
    untouched = {n: u for n, u in before.items() if group(n) != touched}
    assert {n: after.get(n) for n in untouched} == untouched, (
        "a pod of a group the fault did not touch was replaced", before, after)
    s.log.append(json.dumps({
        "fault": fault, "cycle": cycle, "down_s": round(down_for, 1),
        "recovered_s": round(recovered_in, 1), "exit_codes_after_resume": exits,
        "statefulset_event": event,
        "direct_pod_create": message, "lws_create": lws_create, "lws_update": lws_update,
        "lws_pod_update_labels": (patched.get("metadata") or {}).get("labels"),
        "non_lws_pods_ready": made,
        "touched_group": touched,
        "touched_group_pods_replaced": sorted(
            n for n in after if group(n) == touched and before.get(n) != after[n]),
    }, indent=2))
    return after


async def test_lws_pods_fail_closed_while_others_run_and_recover(setup: Setup) -> None:
    s = setup
    await s.start_operator()
    await s.kube.create(victim(), s.namespace)
    pods = await wait_for(lambda: whole_and_ready(s), timeout=120, interval=0.5,
                          what="the LeaderWorkerSet whole and Ready")
    assert s.operator is not None
    assert leading(s.operator)
    assert pods is not None
    try:
        for cycle in range(CYCLES):
            for i, fault in enumerate(FAULTS):
                touched = str(1 + cycle * len(FAULTS) + i)
                pods = await one_fault(s, fault, cycle, touched, pods)
    finally:
        print("\nwebhook faults:\n" + "\n".join(s.log))
    # Admission works again: a LeaderWorkerSet update goes through both LWS webhooks.
    await s.kube.patch(API, KIND, NAME, {"metadata": {"annotations": {"example.com/ok": "1"}}},
                       s.namespace, content_type=MERGE_PATCH)
    for op in s.started:
        assert "Traceback" not in op.log_text(200_000), op.log_tail()
