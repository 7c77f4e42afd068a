"""The progress deadline end to end: a template that never becomes Ready stops, a fix resumes,
and the rollback opt-in puts the last fully Ready revision back.

kwok withholds readiness from a pod whose ready-delay annotation says an hour, so the "bad"
template's groups never come up. Four groups of two pods, maxUnavailable 1 and maxSurge 1, a
10 s deadline: the rollout takes group 3 and the surge group 4 onto the bad revision and waits.
After 10 s the set reports ``Progressing=False/ProgressDeadlineExceeded`` with one Warning. Then
the test makes the surge group's pods Ready by hand, as a crash-looping image that passes its
readiness probe for a moment would: upstream's arithmetic would move the partition down across
the next old group (the tail is ready), taking one more group out of service; held, the
partition and replicas stay and groups 0-2 stay Ready at every poll. A fixed template resumes
the rollout to the end; with ``rollback-on-deadline`` a second bad template is rolled back to
the fixed one by the operator, and the next test sees every group Ready on it again (the
rollback's pass asks for the pass after it, which its own watch event would not bring). A
set created on a never-Ready template and updated to another is not rolled back to its first
revision, which never was fully Ready: it is held, and the condition says why. The first test
takes about 4 min under this machine's load, the others seconds to a minute.
"""

from __future__ import annotations

import datetime as dt
import time
from typing import Any

import pytest

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH, condition, is_ready, polling, wait_for

pytestmark = pytest.mark.full

API = "leaderworkerset.x-k8s.io/v1"
KIND = "LeaderWorkerSet"
P = "leaderworkerset.sigs.k8s.io/"
OURS = "lws-operator.dev/"
NAME = "deadline"
REPLICAS, SIZE = 4, 2


def worker_template(image: str, ready: bool) -> dict[str, Any]:
    """A template whose pods become Ready quickly, or (``ready`` False) never in this test."""
    return {"metadata": {"annotations": {READY_DELAY_ANNOTATION: None if ready else "1h"}},
            "spec": {"containers": [{"name": "engine", "image": image}]}}


async def test_a_bad_rollout_stops_at_the_deadline_and_a_new_template_resumes(
    operator: Operator,
) -> None:
    op, ns = operator, operator.namespace
    template = worker_template("engine:v1", ready=True)
    template["metadata"]["annotations"] = {}
    await op.kube.create({
        "apiVersion": API, "kind": KIND,
        "metadata": {"name": NAME, "annotations": {OURS + "progress-deadline-seconds": "10"}},
        "spec": {"replicas": REPLICAS, "rolloutStrategy": {
            "type": "RollingUpdate", "rollingUpdateConfiguration": {
                "maxUnavailable": 1, "maxSurge": 1}},
            "leaderWorkerTemplate": {"size": SIZE, "workerTemplate": template}},
    }, ns)

    async def lws() -> dict[str, Any]:
        got = await op.kube.get(API, KIND, NAME, ns)
        assert got is not None
        return got

    async def pods() -> list[dict[str, Any]]:
        return [p for p in await op.kube.list("v1", "Pod", ns, label_selector=f"{P}name={NAME}")
                if not p["metadata"].get("deletionTimestamp")]

    async def ready_groups() -> set[str]:
        groups: dict[str, list[bool]] = {}
        for pod in await pods():
            groups.setdefault(pod["metadata"]["labels"][P + "group-index"], []).append(
                is_ready(pod))
        return {g for g, ready in groups.items() if len(ready) == SIZE and all(ready)}

    async def settled_on_one_revision() -> bool:
        got, live = await lws(), await pods()
        keys = {p["metadata"]["labels"][P + "template-revision-hash"] for p in live}
        return (condition(got, "Available") == "True" and len(live) == REPLICAS * SIZE
                and all(is_ready(p) for p in live) and len(keys) == 1)

    await wait_for(settled_on_one_revision, timeout=120, what="4 groups Ready")
    await op.kube.patch(API, KIND, NAME, {"spec": {"leaderWorkerTemplate": {
        "workerTemplate": worker_template("engine:bad", ready=False)}}}, ns,
        content_type=MERGE_PATCH)

    async def exceeded() -> dict[str, Any] | None:
        for cond in (await lws())["status"].get("conditions") or []:
            if cond["type"] == "Progressing" and cond["reason"] == "ProgressDeadlineExceeded":
                return dict(cond)
        return None

    cond = await wait_for(exceeded, timeout=90, what="Progressing=False, ProgressDeadlineExceeded")
    assert cond is not None
    assert cond["status"] == "False"
    assert "no progress for 10s" in cond["message"]
    got = await lws()
    assert condition(got, "UpdateInProgress") == "True"
    assert condition(got, "Available") == "False"
    await op.recorded()  # the pass that wrote the condition queued the Event
    warnings = [e for e in await op.kube.list("events.k8s.io/v1", "Event", ns)
                if e["reason"] == "ProgressDeadlineExceeded"]
    assert [(e["type"], e["note"]) for e in warnings] == [("Warning", cond["message"])]

    async def leader_rollout() -> tuple[int, int]:
        sts = await op.kube.get("apps/v1", "StatefulSet", NAME, ns)
        assert sts is not None
        spec = sts["spec"]
        return spec["updateStrategy"]["rollingUpdate"]["partition"], spec["replicas"]

    held = await leader_rollout()
    assert held == (3, 5), "group 3 and the surge group 4 on the bad revision"
    assert await ready_groups() == {"0", "1", "2"}

    # The surge group of the bad revision comes up for a moment (its pods Ready by hand).
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for pod in await pods():
        if pod["metadata"]["labels"][P + "group-index"] == "4":
            await op.kube.patch("v1", "Pod", pod["metadata"]["name"], {"status": {
                "phase": "Running", "conditions": [
                    {"type": "Ready", "status": "True", "lastTransitionTime": now},
                    {"type": "ContainersReady", "status": "True",
                     "lastTransitionTime": now}]}}, ns,
                subresource="status")

    async def surge_group_ready() -> bool:
        return "4" in await ready_groups()

    await wait_for(surge_group_ready, timeout=30, what="group 4's pods Ready by hand")
    seen: list[tuple[tuple[int, int], set[str]]] = []

    async def probe() -> None:
        seen.append((await leader_rollout(), await ready_groups()))

    async with polling(probe, interval=0.5):
        await wait_for(lambda: _after(seen, 16), timeout=60, what="8 s of polls")
    print(f"\n[deadline] held for {len(seen)} polls 0.5 s apart: (partition, replicas) "
          f"{sorted({rollout for rollout, _ in seen})}, groups Ready "
          f"{sorted({tuple(sorted(ready)) for _, ready in seen})}", flush=True)
    assert {rollout for rollout, _ in seen} == {held}, "partition and replicas held"
    assert all(ready >= {"0", "1", "2"} for _, ready in seen), "no further group taken down"
    assert await exceeded() is not None
    await op.recorded()
    assert len([e for e in await op.kube.list("events.k8s.io/v1", "Event", ns)
                if e["reason"] == "ProgressDeadlineExceeded"]) == 1

    # A fixed template is a new revision: the rollout resumes and completes.
    await op.kube.patch(API, KIND, NAME, {"spec": {"leaderWorkerTemplate": {
        "workerTemplate": worker_template("engine:v2", ready=True)}}}, ns,
        content_type=MERGE_PATCH)
    await wait_for(settled_on_one_revision, timeout=180, what="the fixed template rolled out")
    assert await exceeded() is None
    good_key = (await pods())[0]["metadata"]["labels"][P + "template-revision-hash"]

    # Rollback opt-in: the next bad template is put back to the fixed one by the operator.
    await op.kube.patch(API, KIND, NAME, {"metadata": {"annotations": {
        OURS + "rollback-on-deadline": "true"}}}, ns, content_type=MERGE_PATCH)
    await op.kube.patch(API, KIND, NAME, {"spec": {"leaderWorkerTemplate": {
        "workerTemplate": worker_template("engine:bad2", ready=False)}}}, ns,
        content_type=MERGE_PATCH)

    async def rolled_back() -> list[dict[str, Any]]:
        return [e for e in await op.kube.list("events.k8s.io/v1", "Event", ns)
                if e["reason"] == "RolledBack"]

    (event,) = await wait_for(rolled_back, timeout=90, what="the RolledBack Event")
    got = await lws()
    bad_key = got["metadata"]["annotations"][OURS + "rolled-back-from"]
    assert event["note"].startswith(
        f"Rolled back from revision {bad_key} to revision {good_key} ")
    container = got["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert container["image"] == "engine:v2"
    assert len(await rolled_back()) == 1


async def test_after_the_rollback_every_group_is_ready_again(operator: Operator) -> None:
    """The set the test above rolled back: back on the last fully Ready revision, every group
    Ready."""
    op, ns = operator, operator.namespace

    async def settled() -> bool:
        got = await op.kube.get(API, KIND, NAME, ns)
        live = [p for p in await op.kube.list("v1", "Pod", ns,
                                              label_selector=f"{P}name={NAME}")
                if not p["metadata"].get("deletionTimestamp")]
        keys = {p["metadata"]["labels"][P + "template-revision-hash"] for p in live}
        return (condition(got, "Available") == "True" and len(live) == REPLICAS * SIZE
                and all(is_ready(p) for p in live) and len(keys) == 1)

    started = time.monotonic()
    trace: list[str] = []

    async def step() -> None:
        sts = await op.kube.get("apps/v1", "StatefulSet", NAME, ns)
        groups: dict[str, list[tuple[str, bool]]] = {}
        for p in await op.kube.list("v1", "Pod", ns, label_selector=f"{P}name={NAME}"):
            if not p["metadata"].get("deletionTimestamp"):
                labels = p["metadata"]["labels"]
                groups.setdefault(labels[P + "group-index"], []).append(
                    (labels[P + "template-revision-hash"][:4], is_ready(p)))
        spec = (sts or {}).get("spec") or {}
        partition = ((spec.get("updateStrategy") or {}).get("rollingUpdate") or {}).get(
            "partition")
        shown = " ".join(
            f"{g}:{'/'.join(sorted({k for k, _ in m}))}"
            f"{'+' if all(r for _, r in m) and len(m) == SIZE else '-'}"
            for g, m in sorted(groups.items()))
        line = f"partition {partition} replicas {spec.get('replicas')} {shown}"
        if not trace or trace[-1].split(" ", 1)[1] != line:
            trace.append(f"{time.monotonic() - started:.1f}s {line}")

    try:
        async with polling(step, interval=0.3):
            await wait_for(settled, timeout=60, what="all groups Ready after the rollback")
    finally:
        print("\n[rollback] trace (group:revision, + Ready): " + "; ".join(trace), flush=True)
        await op.kube.delete(API, KIND, NAME, ns)


async def test_no_rollback_to_a_revision_that_never_was_fully_ready(operator: Operator) -> None:
    """A set created on a template that never becomes Ready, then updated to another that
    stalls too, with the rollback opt-in: its first revision never was fully Ready, so the
    operator does not roll back to it; the rollout is held and the condition says why."""
    op, ns, name = operator, operator.namespace, "never"
    await op.kube.create({
        "apiVersion": API, "kind": KIND,
        "metadata": {"name": name, "annotations": {OURS + "progress-deadline-seconds": "10",
                                                   OURS + "rollback-on-deadline": "true"}},
        "spec": {"replicas": 2, "leaderWorkerTemplate": {
            "size": SIZE, "workerTemplate": worker_template("engine:never1", ready=False)}},
    }, ns)
    try:
        async def all_pods() -> bool:
            return len(await op.kube.list("v1", "Pod", ns,
                                          label_selector=f"{P}name={name}")) == 2 * SIZE

        await wait_for(all_pods, timeout=60, what="the never-Ready groups' pods")
        await op.kube.patch(API, KIND, name, {"spec": {"leaderWorkerTemplate": {
            "workerTemplate": worker_template("engine:never2", ready=False)}}}, ns,
            content_type=MERGE_PATCH)

        async def exceeded() -> dict[str, Any] | None:
            got = await op.kube.get(API, KIND, name, ns)
            assert got is not None
            for cond in (got.get("status") or {}).get("conditions") or []:
                if cond["type"] == "Progressing" and cond["reason"] == \
                        "ProgressDeadlineExceeded":
                    return dict(cond)
            return None

        cond = await wait_for(exceeded, timeout=90, what="ProgressDeadlineExceeded")
        assert cond is not None
        assert "Not rolled back: no earlier revision was ever fully Ready" in cond["message"]
        got = await op.kube.get(API, KIND, name, ns)
        assert got is not None
        assert OURS + "rolled-back-from" not in got["metadata"].get("annotations", {})
        image = got["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
        assert image["image"] == "engine:never2"
        await op.recorded()  # the pass that wrote the condition queued the Event
        events = [e for e in await op.kube.list("events.k8s.io/v1", "Event", ns)
                  if e["regarding"].get("name") == name]
        assert [e["reason"] for e in events if e["reason"] == "RolledBack"] == []
        (warning,) = [e for e in events if e["reason"] == "ProgressDeadlineExceeded"]
        assert warning["note"] == cond["message"]
    finally:
        await op.kube.delete(API, KIND, name, ns)


async def _after(seen: list[Any], polls: int) -> bool:
    return len(seen) >= polls
