"""DisaggregatedSets end to end on the full tier, the part ``make test`` runs (``make e2e-ds``
runs the whole catalogue: test_disaggregatedset_catalogue.py and _processes.py).

- Both upstream DisaggregatedSet samples, applied unchanged (``kubectl apply -f`` of the
  byte-identical copies in ``upstream_samples/``, into the ``default`` namespace they name, its
  admission served by our webhooks for the module), converge; every child LeaderWorkerSet,
  pod and Service is then checked exactly (``e2e.harness.disaggregated``): the five system
  labels over the user's, the user's annotations, the four documented ``DISAGGREGATEDSET_*``
  variables after ``LWS_*`` on every container with the values of the pod's own labels, the
  headless portless Services and their EndpointSlices.
- A two-role coordinated rollout (upstream's e2e "should complete rolling update with both
  roles scaling together"), watched throughout: no revision ever has one role at 0 while a
  sibling is above 0, no role exceeds max(source, target) + surge, and the steps are exactly
  the planner's (upstream's planner_test.go, small_2_2_surge1). Then the set is deleted and the
  garbage collector removes every child (upstream's "should garbage collect all child resources").
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.admission import options_for, start_webhooks, stop_webhooks
from e2e.harness.builder import DS_API, DS_KIND, DisaggregatedSet, Role
from e2e.harness.disaggregated import (
    PAUSE,
    RolloutMonitor,
    check_everything,
    wait_converged,
    wait_gone,
)
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH

pytestmark = pytest.mark.full

SAMPLES = Path(__file__).parent / "upstream_samples"
DS_SAMPLES = ("disaggregatedset_v1_disaggregatedset.yaml", "disaggregatedset_v1_3role.yaml")


# ------------------------------------------------------------------ the check itself


def _monitor(states: list[dict[tuple[str, str, str], int]]) -> RolloutMonitor:
    monitor = RolloutMonitor(None, "", "")  # type: ignore[arg-type]
    monitor.states = states
    return monitor


def test_the_continuous_check_tells_one_pass_from_a_split_revision() -> None:
    """The rollout check fails on a revision left with one role at 0 while its sibling serves,
    and accepts the instant between two writes of one pass."""
    a, b = "aaaaaaaa", "bbbbbbbb"
    one_pass = [{("0", a, "p"): 1, ("0", a, "d"): 1, ("0", b, "p"): 1, ("0", b, "d"): 1},
                {("0", a, "p"): 0, ("0", a, "d"): 1, ("0", b, "p"): 1, ("0", b, "d"): 1},
                {("0", a, "p"): 0, ("0", a, "d"): 0, ("0", b, "p"): 1, ("0", b, "d"): 1}]
    assert _monitor(one_pass).violations() == []
    assert _monitor(one_pass).trace(b, ["p", "d"]) == ["1,1|1,1", "0,0|1,1"]
    split = [one_pass[0], one_pass[1],
             {("0", a, "p"): 0, ("0", a, "d"): 1, ("0", b, "p"): 2, ("0", b, "d"): 1},
             {("0", a, "p"): 0, ("0", a, "d"): 0, ("0", b, "p"): 2, ("0", b, "d"): 1}]
    assert len(_monitor(split).violations()) == 2  # split across two steps
    assert len(_monitor(one_pass[:2]).violations()) == 1  # left split at the end
    assert _monitor(one_pass).violations({"p": 2, "d": 2}) == []
    # A step that drains and scales up: drained first, no instant above the bound; the other
    # order (upstream's) stands one batch above it between the two calls.
    drain_first = [{("0", a, "p"): 3, ("0", b, "p"): 1}, {("0", a, "p"): 2, ("0", b, "p"): 1},
                   {("0", a, "p"): 2, ("0", b, "p"): 2}]
    assert _monitor(drain_first).violations({"p": 4}) == []
    up_first = [drain_first[0], {("0", a, "p"): 3, ("0", b, "p"): 2}, drain_first[2]]
    assert _monitor(up_first).violations({"p": 4}) == [
        "p (slice 0) at 5 > 4: 0/aaaaaaaa/p=3, 0/bbbbbbbb/p=2"]
    assert _monitor(one_pass).violations({"p": 1}) == [
        "p (slice 0) at 2 > 1: 0/aaaaaaaa/d=1, 0/aaaaaaaa/p=1, 0/bbbbbbbb/d=1, 0/bbbbbbbb/p=1"]


# ------------------------------------------------------------------ upstream's samples


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def default_admission(ds_operator: Operator) -> AsyncIterator[str]:
    """Our webhooks serving the ``default`` namespace, which upstream's samples name."""
    hooks = await start_webhooks(ds_operator.kubeconfig, options_for("default"))
    try:
        yield "default"
    finally:
        for ds in await ds_operator.kube.list(DS_API, DS_KIND, "default"):
            await ds_operator.kube.delete(DS_API, DS_KIND, ds["metadata"]["name"], "default")
            await wait_gone(ds_operator.kube, "default", ds["metadata"]["name"])
        await stop_webhooks(hooks)


@pytest.mark.parametrize("sample", DS_SAMPLES)
async def test_the_upstream_sample_converges_exactly(ds_operator: Operator, default_admission: str,
                                                     sample: str) -> None:
    """``kubectl apply -f`` of upstream's sample as it is; every object it makes, exactly."""
    path = SAMPLES / sample
    doc = yaml.safe_load(path.read_text())
    name, ns = doc["metadata"]["name"], default_admission
    assert doc["metadata"]["namespace"] == ns
    kubectl = ds_operator.cluster.kubectl
    try:
        await asyncio.to_thread(kubectl, "apply", "-f", str(path))
        got = await wait_converged(ds_operator.kube, ns, name)
        roles = doc["spec"]["roles"]
        slices = doc["spec"].get("slices", 1)
        assert len(got.lws) == slices * len(roles)
        assert len(got.pods) == slices * sum(
            r["spec"]["replicas"] * r["spec"]["leaderWorkerTemplate"]["size"] for r in roles)
        assert len(got.revision) == 8
        assert set(got.revision) <= set("0123456789abcdef")
        await check_everything(ds_operator.kube, ns, got)
        available = next(c for c in got.ds["status"]["conditions"] if c["type"] == "Available")
        assert (available["status"], available["reason"]) == ("True", "AllRolesReady")
    finally:
        await ds_operator.kube.delete(DS_API, DS_KIND, name, ns)
        await wait_gone(ds_operator.kube, ns, name)


# ------------------------------------------------------------------ rollout, then GC


def two_roles(name: str, image: str, replicas: int = 2) -> dict[str, object]:
    """Prefill and decode of size 1 (upstream's e2e fixture), pods Ready 300 ms after they
    start so each step of the rollout is a moment of its own."""
    def role(role_name: str) -> Role:
        return (Role(role_name).replicas(replicas).size(1).image(image, name="model")
                .worker_annotations({READY_DELAY_ANNOTATION: "300ms"}))
    return DisaggregatedSet(name).role(role("prefill")).role(role("decode")).build()


async def test_a_two_role_rollout_is_coordinated_then_deletion_collects_everything(
        ds_operator: Operator) -> None:
    op, ns = ds_operator, ds_operator.namespace
    await op.kube.create(two_roles("coord", PAUSE), ns)
    before = await wait_converged(op.kube, ns, "coord")
    await check_everything(op.kube, ns, before)

    async with RolloutMonitor(op.kube, ns, "coord") as monitor:
        await op.kube.patch(DS_API, DS_KIND, "coord", two_roles(
            "coord", "registry.k8s.io/pause:3.10"), ns, content_type=MERGE_PATCH)
        after = await wait_converged(op.kube, ns, "coord", other_than=before.revision)

    assert monitor.revisions() == [before.revision, after.revision]
    assert monitor.violations({"prefill": 3, "decode": 3}) == []
    # Upstream's planner trace (planner_test.go, small_2_2_surge1) for 2,2 -> 2,2 with the
    # default budgets (surge 1).
    assert monitor.trace(after.revision, ["prefill", "decode"]) == [
        "2,2|0,0", "2,2|1,1", "1,1|1,1", "1,1|2,2", "0,0|2,2"]
    await check_everything(op.kube, ns, after)

    await op.kube.delete(DS_API, DS_KIND, "coord", ns)
    await wait_gone(op.kube, ns, "coord")
