"""A DisaggregatedSet's coordinated rollout paused and resumed end to end, through the real
``kubectl lws rollout pause|resume`` console script: paused mid-rollout, every role of every
revision holds its replicas (watched for 10 s, where unpaused a step lands every few seconds)
and ``Progressing`` says ``RolloutPaused``; resumed, the rollout completes on the new revision.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import DS_API, DS_KIND, DisaggregatedSet, Role
from e2e.harness.disaggregated import PAUSE, RolloutMonitor, wait_converged, wait_gone
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH, wait_for

pytestmark = pytest.mark.full

KUBECTL_LWS = Path(sys.executable).with_name("kubectl-lws")
NAME = "held"
RESOURCE = f"disaggregatedset.disaggregatedset.x-k8s.io/{NAME}"


def two_roles(image: str) -> dict[str, object]:
    """Prefill and decode, three groups each of one pod Ready 2 s after it starts, so each
    step of the rollout takes a few seconds."""
    def role(role_name: str) -> Role:
        return (Role(role_name).replicas(3).size(1).image(image, name="model")
                .worker_annotations({READY_DELAY_ANNOTATION: "2s"}))
    return DisaggregatedSet(NAME).role(role("prefill")).role(role("decode")).build()


async def kubectl_lws(op: Operator, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        str(KUBECTL_LWS), "--kubeconfig", op.kubeconfig, "-n", op.namespace, *args,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE)
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_a_paused_rollout_holds_every_role_and_the_resume_completes_it(
        ds_operator: Operator) -> None:
    op, ns = ds_operator, ds_operator.namespace
    await op.kube.create(two_roles(PAUSE), ns)
    before = await wait_converged(op.kube, ns, NAME)
    async with RolloutMonitor(op.kube, ns, NAME) as monitor:
        await op.kube.patch(DS_API, DS_KIND, NAME, two_roles("registry.k8s.io/pause:3.10"),
                            ns, content_type=MERGE_PATCH)

        async def mid_rollout() -> bool:
            state = monitor.states[-1]
            new = sum(n for (_, rev, _), n in state.items() if rev != before.revision)
            return new >= 1

        await wait_for(mid_rollout, timeout=120, interval=0.1, what="the rollout under way")
        code, out, err = await kubectl_lws(op, "rollout", "pause", NAME)
        assert (code, out) == (0, f"{RESOURCE} paused\n"), err
        again = await kubectl_lws(op, "rollout", "pause", NAME)
        assert again[0] == 1
        assert "is already paused" in again[2]

        async def paused_condition() -> bool:
            got = await op.kube.get(DS_API, DS_KIND, NAME, ns)
            return any(c["type"] == "Progressing" and c["reason"] == "RolloutPaused"
                       and c["status"] == "True"
                       for c in ((got or {}).get("status") or {}).get("conditions") or [])

        await wait_for(paused_condition, timeout=30, what="Progressing RolloutPaused")
        await asyncio.sleep(2)  # a step already written when the pause landed settles
        held = len(monitor.states)
        await asyncio.sleep(10)
        assert monitor.states[held - 1:] == [monitor.states[held - 1]], \
            f"replicas changed while paused: {monitor.states[held - 1:]}"
        state = monitor.states[-1]
        old = sum(n for (_, rev, _), n in state.items() if rev == before.revision)
        assert old > 0, f"paused mid-rollout: {state}"

        code, out, err = await kubectl_lws(op, "rollout", "resume", NAME)
        assert (code, out) == (0, f"{RESOURCE} resumed\n"), err
        after = await wait_converged(op.kube, ns, NAME, other_than=before.revision)
    assert monitor.revisions() == [before.revision, after.revision]
    assert monitor.violations({"prefill": 4, "decode": 4}) == []
    code, _, err = await kubectl_lws(op, "rollout", "resume", NAME)
    assert code == 1
    assert "is not paused" in err
    await op.kube.delete(DS_API, DS_KIND, NAME, ns)
    await wait_gone(op.kube, ns, NAME)
