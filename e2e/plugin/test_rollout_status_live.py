"""``kubectl lws rollout status`` end to end: the installed console script waiting on real
rollouts of LeaderWorkerSets, and each of its exit codes: 0 when the rollout completes, 3 when
it passes its progress deadline, 4 when ``--timeout`` passes first, 5 for ``--watch=false`` on a
rollout not finished, 1 for a set that does not exist; a paused rollout is said to be paused.

kwok withholds readiness from pods annotated with a long ready delay: that is how a new
revision "never becomes Ready" here; a short one makes each group of a good rollout take a
moment, so the command has something to wait for.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import API, KIND, LeaderWorkerSet
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH, condition, wait_for

pytestmark = pytest.mark.full

OURS = "lws-operator.dev/"
NEVER = "10000h"


def new_template(image: str, ready_delay: str) -> dict[str, Any]:
    return {"spec": {"leaderWorkerTemplate": {"workerTemplate": {
        "metadata": {"annotations": {READY_DELAY_ANNOTATION: ready_delay}},
        "spec": {"containers": [{"name": "engine", "image": image}]}}}}}


def lws(name: str, **annotations: str) -> dict[str, Any]:
    return (LeaderWorkerSet(name).replicas(2).size(2).image("engine:v1")
            .annotations(annotations).build())


async def test_a_rollout_that_completes_exits_0(operator: Operator, kubectl_lws: Any,
                                                watch: Any,
                                                ready_set: Callable[..., Awaitable[str]]) -> None:
    """The command is started on a rollout held by a revision that never turns Ready, so it
    is waiting for sure; a fixed template then completes the rollout, and the command ends."""
    name = await ready_set(lws("status-good"), pods=4)
    settled = await kubectl_lws("rollout", "status", name, "--watch=false")
    assert (settled.code, settled.out) == (0, f'leaderworkerset "{name}" successfully rolled '
                                              "out\n"), settled.err
    await operator.kube.patch(API, KIND, name, new_template("engine:v2", NEVER),
                              operator.namespace, content_type=MERGE_PATCH)
    waiting = await watch("rollout", "status", name, "--timeout=5m")
    await waiting.until(lambda out: "out of 2 groups have been updated" in out,
                        "the command waiting on the held rollout")
    await operator.kube.patch(API, KIND, name, new_template("engine:v3", "1s"),
                              operator.namespace, content_type=MERGE_PATCH)
    assert await waiting.finish() == 0, (waiting.out, waiting.err)
    lines = waiting.out.splitlines()
    assert lines[0].startswith(f'Waiting for leaderworkerset "{name}" rollout to finish: ')
    assert lines[-1] == f'leaderworkerset "{name}" successfully rolled out'
    got = await operator.kube.get(API, KIND, name, operator.namespace)
    assert got is not None
    assert got["status"]["updatedReplicas"] == 2
    assert condition(got, "Available") == "True"


async def test_a_rollout_past_its_progress_deadline_exits_3(
        operator: Operator, kubectl_lws: Any, ready_set: Callable[..., Awaitable[str]]) -> None:
    name = await ready_set(lws("status-deadline", **{OURS + "progress-deadline-seconds": "5"}),
                           pods=4)
    await operator.kube.patch(API, KIND, name, new_template("engine:v2", NEVER),
                              operator.namespace, content_type=MERGE_PATCH)
    ran = await kubectl_lws("rollout", "status", name, "--timeout=5m", timeout=330)
    assert ran.code == 3, (ran.out, ran.err)
    assert ran.out.splitlines()[-1].startswith(
        f'leaderworkerset "{name}" exceeded its progress deadline: Rollout made no progress '
        "for 5s")
    got = await operator.kube.get(API, KIND, name, operator.namespace)
    assert got is not None
    progressing = next(c for c in got["status"]["conditions"] if c["type"] == "Progressing")
    assert progressing["reason"] == "ProgressDeadlineExceeded"
    # Asked again, it says so at once.
    again = await kubectl_lws("rollout", "status", name, "--watch=false")
    assert again.code == 3


async def test_a_timeout_exits_4_and_a_pause_is_said(
        operator: Operator, kubectl_lws: Any, ready_set: Callable[..., Awaitable[str]]) -> None:
    name = await ready_set(lws("status-stuck"), pods=4)
    await operator.kube.patch(API, KIND, name, new_template("engine:v2", NEVER),
                              operator.namespace, content_type=MERGE_PATCH)

    async def updating() -> bool:
        got = await operator.kube.get(API, KIND, name, operator.namespace)
        return condition(got, "UpdateInProgress") == "True"

    await wait_for(updating, timeout=60, what="the rollout under way")
    ran = await kubectl_lws("rollout", "status", name, "--timeout=3s")
    assert ran.code == 4, (ran.out, ran.err)
    assert ran.err == f"error: timed out after 3s waiting for the rollout of {name}\n"
    assert ran.out.startswith(f'Waiting for leaderworkerset "{name}" rollout to finish: ')
    now = await kubectl_lws("rollout", "status", name, "--watch=false")
    assert now.code == 5, now.err
    assert now.out.count("\n") == 1

    await operator.kube.patch(API, KIND, name, {"metadata": {"annotations": {
        OURS + "paused": "true"}}}, operator.namespace, content_type=MERGE_PATCH)
    paused = await kubectl_lws("rollout", "status", name, "--timeout=2s")
    assert paused.code == 4, (paused.out, paused.err)
    assert paused.out.startswith(f'leaderworkerset "{name}" rollout is paused: ')
    assert paused.out.rstrip().endswith(f"resume it with `kubectl lws rollout resume {name}`")


async def test_a_set_that_does_not_exist_exits_1(operator: Operator, kubectl_lws: Any) -> None:
    ran = await kubectl_lws("rollout", "status", "no-such-set", "--timeout=10s")
    assert ran.code == 1
    assert ran.err == ('error: leaderworkerset or disaggregatedset "no-such-set" not found in '
                       f'namespace "{operator.namespace}"\n')
    bad = await kubectl_lws("rollout", "status", "x", "--timeout=soon")
    assert bad.code == 2
