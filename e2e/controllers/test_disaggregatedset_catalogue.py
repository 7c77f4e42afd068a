"""The DisaggregatedSet end-to-end catalogue (upstream's test/e2e/disaggregatedset, and the
LWS docs' additions) on the full tier, with our operator in this process. ``make e2e-ds`` runs it
(``LWS_E2E_DS=full``); ``make test`` runs only test_disaggregatedset.py.

Every rollout here is watched throughout by ``RolloutMonitor``: no (slice, revision) ever has a
role at 0 while a sibling is above 0, and no role's total exceeds max(source, target) + surge.
Every converged state is checked exactly (``check_everything``: children, pods with the documented
``DISAGGREGATEDSET_*`` variables, Services and EndpointSlices).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
from kubernetes.aio.dynamic.exceptions import DynamicApiError

from e2e.cluster.stages import READY_DELAY_ANNOTATION
from e2e.harness.builder import DS_API, DS_KIND, SCALER_KIND, DisaggregatedSet, Role
from e2e.harness.disaggregated import (
    NAME_LABEL,
    PAUSE,
    REVISION_LABEL,
    ROLE_LABEL,
    SLICE_LABEL,
    Converged,
    RolloutMonitor,
    check_everything,
    children,
    ds_pods,
    ds_services,
    wait_converged,
    wait_gone,
)
from e2e.harness.launcher import Operator
from e2e.kube import MERGE_PATCH, polling, wait_for

pytestmark = [pytest.mark.full, pytest.mark.skipif(
    os.environ.get("LWS_E2E_DS") != "full",
    reason="the DisaggregatedSet catalogue runs under `make e2e-ds` (LWS_E2E_DS=full)")]

ROLLED = "registry.k8s.io/pause:3.10"


def role(name: str, replicas: int, image: str = PAUSE, size: int = 1,
         delay: str = "300ms") -> Role:
    """A role of upstream's e2e fixture (pause, size 1), its pods Ready ``delay`` after they
    start so each rollout step is a moment of its own."""
    return (Role(name).replicas(replicas).size(size).image(image, name="model")
            .worker_annotations({READY_DELAY_ANNOTATION: delay}))


def ds(name: str, *roles: Role, slices: int | None = None) -> dict[str, Any]:
    out = DisaggregatedSet(name)
    for r in roles:
        out.role(r)
    if slices is not None:
        out.slices(slices)
    return out.build()


async def apply(op: Operator, body: dict[str, Any]) -> None:
    """Replace the set's spec (a merge patch replaces ``spec.roles`` whole)."""
    await op.kube.patch(DS_API, DS_KIND, body["metadata"]["name"], {"spec": body["spec"]},
                        op.namespace, content_type=MERGE_PATCH)


async def created(op: Operator, body: dict[str, Any]) -> Converged:
    await op.kube.create(body, op.namespace)
    got = await wait_converged(op.kube, op.namespace, body["metadata"]["name"])
    await check_everything(op.kube, op.namespace, got)
    return got


async def rolled(op: Operator, before: Converged, body: dict[str, Any],
                 bounds: dict[str, int]) -> tuple[RolloutMonitor, Converged]:
    """Apply ``body``, watch until the set converged on a new revision; no violation."""
    name = body["metadata"]["name"]
    async with RolloutMonitor(op.kube, op.namespace, name) as monitor:
        await apply(op, body)
        after = await wait_converged(op.kube, op.namespace, name, other_than=before.revision)
    assert monitor.violations(bounds) == []
    assert monitor.revisions() == [before.revision, after.revision]
    await check_everything(op.kube, op.namespace, after)
    return monitor, after


async def deleted(op: Operator, name: str) -> None:
    await op.kube.delete(DS_API, DS_KIND, name, op.namespace)
    await wait_gone(op.kube, op.namespace, name)


def _monitor_of(monitor: RolloutMonitor, states: list[dict[tuple[str, str, str], int]]
                ) -> RolloutMonitor:
    """The same watch's record, cut to ``states``."""
    return RolloutMonitor(monitor.kube, monitor.namespace, monitor.name, states=list(states))


def totals(state: dict[tuple[str, str, str], int], revision: str) -> int:
    return sum(n for (_, rev, _), n in state.items() if rev == revision)


# ------------------------------------------------------------------ webhook, create, scale


async def test_the_webhook_rejects_a_partition(ds_operator: Operator) -> None:
    """Upstream's "should reject DisaggregatedSet with partition set"."""
    body = ds("part", role("prefill", 1), role("decode", 1))
    body["spec"]["roles"][0]["spec"]["rolloutStrategy"] = {
        "rollingUpdateConfiguration": {"partition": 1}}
    with pytest.raises(DynamicApiError) as error:
        await ds_operator.kube.create(body, ds_operator.namespace)
    assert "partition" in str(error.value.body)
    assert await ds_operator.kube.get(DS_API, DS_KIND, "part", ds_operator.namespace) is None


async def test_create_then_scale_up_and_down_in_place(ds_operator: Operator) -> None:
    """Upstream's "should create LWS resources for prefill and decode roles" and "should scale
    replicas up and down": 1/1 (2 pods) -> 3/3 (6) -> 1/1 (2), the same LeaderWorkerSets
    scaled in place, no new revision."""
    op = ds_operator
    first = await created(op, ds("scale", role("prefill", 1), role("decode", 1)))
    assert len(first.pods) == 2
    async with RolloutMonitor(op.kube, op.namespace, "scale") as monitor:
        await apply(op, ds("scale", role("prefill", 3), role("decode", 3)))
        up = await wait_converged(op.kube, op.namespace, "scale")
        assert len(up.pods) == 6
        await apply(op, ds("scale", role("prefill", 1), role("decode", 1)))
        last = await wait_converged(op.kube, op.namespace, "scale")
    assert len(last.pods) == 2
    assert monitor.revisions() == [first.revision]
    assert up.uids() == first.uids() == last.uids()
    await check_everything(op.kube, op.namespace, last)
    await deleted(op, "scale")


# ------------------------------------------------------------------ rollouts


async def test_percent_budgets(ds_operator: Operator) -> None:
    """Upstream's "should handle percentage-based maxSurge and maxUnavailable": 4/4 with 50%
    surge (2) and 25% unavailable (1) completes with 8 pods, never above 4 + 2 per role."""
    op = ds_operator

    def body(image: str) -> dict[str, Any]:
        return ds("percent", role("prefill", 4, image).surge("50%", "25%"),
                  role("decode", 4, image).surge("50%", "25%"))

    before = await created(op, body(PAUSE))
    _, after = await rolled(op, before, body(ROLLED), {"prefill": 6, "decode": 6})
    assert len(after.pods) == 8
    await deleted(op, "percent")


async def test_a_three_role_rollout(ds_operator: Operator) -> None:
    """Upstream's "should complete rolling update with 3 roles scaling together" (2/2/2); the
    status says Progressing (and Available False, with Progressing's reason) while it runs, and
    the rollout's events name the revision and each scaling."""
    op, ns = ds_operator, ds_operator.namespace

    def body(image: str) -> dict[str, Any]:
        return ds("three", role("prefill", 2, image), role("decode", 2, image),
                  role("encode", 2, image))

    before = await created(op, body(PAUSE))
    seen: list[dict[str, tuple[str, str]]] = []

    async def conditions() -> None:
        got = await op.kube.get(DS_API, DS_KIND, "three", ns)
        seen.append({c["type"]: (c["status"], c["reason"])
                     for c in ((got or {}).get("status") or {}).get("conditions") or []})

    async with polling(conditions):
        monitor, after = await rolled(op, before, body(ROLLED),
                                      {"prefill": 3, "decode": 3, "encode": 3})
    assert len(after.pods) == 6
    trace = monitor.trace(after.revision, ["prefill", "decode", "encode"])
    assert (trace[0], trace[-1]) == ("2,2,2|0,0,0", "0,0,0|2,2,2"), trace
    assert {"Progressing": ("True", "RolloutInProgress"),
            "Available": ("False", "RolloutInProgress")} in seen
    assert seen[-1] == {"Progressing": ("False", "AllRolesReady"),
                        "Available": ("True", "AllRolesReady")}
    await op.recorded()
    events = [e for e in await op.kube.list("v1", "Event", ns)
              if (e.get("involvedObject") or {}).get("name") == "three"]
    assert f"Started rolling update to revision {after.revision}" in [
        e["message"] for e in events if e["reason"] == "RollingUpdateStarted"]
    assert {"ScalingUp", "ScalingDown"} <= {e["reason"] for e in events}
    await deleted(op, "three")


def progressive(monitor: RolloutMonitor, old: str, new: str) -> bool:
    """Some step had both revisions serving (no "brutal drain")."""
    return any(totals(s, old) > 0 and totals(s, new) > 0 for s in monitor.steps())


async def test_adding_a_role_rolls_every_role(ds_operator: Operator) -> None:
    """Upstream's "should add new role and roll all roles to new revision" and "... with
    progressive rollout": alpha 2, beta 3, then gamma 5 added: 10 pods on the new revision."""
    op = ds_operator
    before = await created(op, ds("add", role("alpha", 2), role("beta", 3)))
    monitor, after = await rolled(op, before, ds("add", role("alpha", 2), role("beta", 3),
                                                 role("gamma", 5)),
                                  {"alpha": 3, "beta": 4, "gamma": 6})
    assert len(after.pods) == 10
    assert progressive(monitor, before.revision, after.revision)
    await deleted(op, "add")


async def test_removing_a_role_drains_it_with_its_revision(ds_operator: Operator) -> None:
    """Upstream's "should remove role with progressive rollout for remaining roles": 4/6/2,
    encode removed: it keeps at least one group until its revision's final drain (orphan
    prevention), and 10 pods remain."""
    op = ds_operator
    before = await created(op, ds("remove", role("prefill", 4), role("decode", 6),
                                  role("encode", 2)))
    monitor, after = await rolled(op, before, ds("remove", role("prefill", 4),
                                                 role("decode", 6)),
                                  {"prefill": 5, "decode": 7, "encode": 2})
    assert len(after.pods) == 10
    assert progressive(monitor, before.revision, after.revision)
    for state in monitor.steps():
        encode = state.get(("0", before.revision, "encode"))
        if encode is not None and totals(state, before.revision) > encode:
            assert encode >= 1, state
    await deleted(op, "remove")


async def test_renaming_a_role(ds_operator: Operator) -> None:
    """Upstream's "should drain old role progressively and roll all roles to new revision":
    zeta renamed gamma (alpha 2, beta 3, 5): zeta drained, gamma 5, 10 pods."""
    op = ds_operator
    before = await created(op, ds("rename", role("alpha", 2), role("beta", 3), role("zeta", 5)))
    monitor, after = await rolled(op, before, ds("rename", role("alpha", 2), role("beta", 3),
                                                 role("gamma", 5)),
                                  {"alpha": 3, "beta": 4, "zeta": 5, "gamma": 6})
    assert len(after.pods) == 10
    assert progressive(monitor, before.revision, after.revision)
    assert {o["metadata"]["labels"][ROLE_LABEL] for o in after.lws.values()} == {
        "alpha", "beta", "gamma"}
    await deleted(op, "rename")


async def test_a_change_mid_rollout_drains_the_newest_old_revision_first(
        ds_operator: Operator) -> None:
    """Upstream's "should drain B (broken intermediate) before A (stable original)": 6/6 rolled
    to B, changed to C while B is partly up; B reaches 0 while A still serves, never the
    reverse; 12 pods on C."""
    op, ns = ds_operator, ds_operator.namespace

    def body(image: str) -> dict[str, Any]:
        return ds("abc", role("prefill", 6, image, delay="1s"),
                  role("decode", 6, image, delay="1s"))

    a = await created(op, body(PAUSE))
    async with RolloutMonitor(op.kube, ns, "abc") as monitor:
        await apply(op, body(ROLLED))

        async def b_partly_up() -> str | None:
            revisions = [r for r in monitor.revisions() if r != a.revision]
            state = monitor.states[-1]
            if revisions and all(state.get(("0", revisions[0], r), 0) >= 2
                                 for r in ("prefill", "decode")):
                return revisions[0]
            return None

        b = await wait_for(b_partly_up, timeout=180, what="B partly up")
        assert b is not None
        await apply(op, body("registry.k8s.io/pause:3.8"))
        c = await wait_converged(op.kube, ns, "abc", other_than=b, timeout=360)
    assert c.revision not in (a.revision, b)
    assert monitor.revisions() == [a.revision, b, c.revision]
    assert monitor.violations() == []  # no split revision, A and B included
    after_c = [s for s in monitor.states if any(rev == c.revision for _, rev, _ in s)]
    # Before C, source and target are 6: at most 7. From C's start, the source is what A and B
    # held then (re-snapshotted).
    source = {r: sum(n for (_, rev, role), n in after_c[0].items() if role == r)
              for r in ("prefill", "decode")}
    before_c = monitor.states[:monitor.states.index(after_c[0])]
    assert _monitor_of(monitor, before_c).violations({"prefill": 7, "decode": 7}) == []
    assert _monitor_of(monitor, after_c).violations(
        {r: max(n, 6) + 1 for r, n in source.items()}) == []
    b_gone = next(i for i, s in enumerate(after_c) if totals(s, b) == 0)
    assert totals(after_c[b_gone], a.revision) > 0, after_c[b_gone]
    assert not [s for s in after_c if totals(s, a.revision) == 0 and totals(s, b) > 0]
    assert len(c.pods) == 12
    await check_everything(op.kube, ns, c)
    await deleted(op, "abc")


# ------------------------------------------------------------------ slices, placement, metadata


async def test_slices_are_copies_and_lowering_them_deletes(ds_operator: Operator) -> None:
    """Two slices are two full copies (slice labels 0/1, replicas per slice); lowering to one
    deletes slice 1's LeaderWorkerSets and Services and leaves slice 0 untouched."""
    op, ns = ds_operator, ds_operator.namespace
    two = await created(op, ds("sliced", role("prefill", 2), role("decode", 1), slices=2))
    assert sorted(o["metadata"]["labels"][SLICE_LABEL] for o in two.lws.values()) == [
        "0", "0", "1", "1"]
    assert len(two.pods) == 6
    await apply(op, ds("sliced", role("prefill", 2), role("decode", 1), slices=1))
    one = await wait_converged(op.kube, ns, "sliced")
    assert one.revision == two.revision
    assert one.uids() == {n: u for n, u in two.uids().items() if n.startswith("sliced-0-")}
    services = await ds_services(op.kube, ns, "sliced")
    assert sorted(s["metadata"]["name"] for s in services) == sorted(
        f"{n}-prv" for n in one.lws)
    await check_everything(op.kube, ns, one)
    await deleted(op, "sliced")


async def test_placement_pins_each_slice_to_one_domain(ds_operator: Operator) -> None:
    """Upstream's "should inject placement affinity into the managed LWS pod templates"
    (ExclusiveTopology on kubernetes.io/hostname; the exact terms are checked on every
    template and pod), and the scheduler honours them: each slice on one node, the slices
    apart."""
    op = ds_operator
    body = (DisaggregatedSet("placed").role(role("prefill", 1, size=2))
            .role(role("decode", 1, size=2)).slices(2)
            .placement("ExclusiveTopology", "kubernetes.io/hostname").build())
    got = await created(op, body)
    nodes: dict[str, set[str]] = {}
    for pod in got.pods:
        nodes.setdefault(pod["metadata"]["labels"][SLICE_LABEL], set()).add(
            pod["spec"]["nodeName"])
    assert sorted(nodes) == ["0", "1"]
    assert all(len(n) == 1 for n in nodes.values()), nodes
    assert nodes["0"] != nodes["1"], nodes
    await deleted(op, "placed")


async def test_role_metadata_and_template_metadata_propagate(ds_operator: Operator) -> None:
    """Upstream's "should propagate custom labels and annotations to LWS" and "... LWS CR
    metadata labels for Kueue integration": role metadata (a Kueue queue, an
    ``exclusive-topology`` *label*, a user ``app`` the system one overrides) onto the child,
    template labels and annotations onto every pod (checked exactly)."""
    op = ds_operator
    prefill = (role("prefill", 1).labels({
        "kueue.x-k8s.io/queue-name": "gpu-queue", "app": "mine",
        "leaderworkerset.sigs.k8s.io/exclusive-topology": "rack"})
        .annotations({"example.com/note": "prefill"})
        .worker_labels({"component": "disaggregation"})
        .worker_annotations({"example.com/pod-note": "hello"}))
    got = await created(op, ds("meta", prefill, role("decode", 1)))
    child = next(o for o in got.lws.values() if o["metadata"]["labels"][ROLE_LABEL] == "prefill")
    assert child["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "gpu-queue"
    assert child["metadata"]["labels"]["app"] == "meta-0-prefill"
    await deleted(op, "meta")


# ------------------------------------------------------------------ autoscaling


async def test_an_hpa_drives_an_external_role_through_its_scaler(ds_operator: Operator) -> None:
    """Upstream's hpa_test.go: the scaler is created (owned, seeded 1) and its ``/scale``
    answers before anything writes it; ``kubectl scale`` on it reaches the role's
    LeaderWorkerSet; an HPA whose minReplicas is above the current count scales it through
    ``/scale`` (no metrics server needed: kube-controller-manager raises to minReplicas);
    deleting the set removes the scaler."""
    op, ns = ds_operator, ds_operator.namespace
    kubectl = op.cluster.kubectl
    body = (DisaggregatedSet("hpa")
            .role(Role("prefill").external().size(1).image(PAUSE, name="model"))
            .role(role("decode", 1)).build())
    await op.kube.create(body, ns)
    scaler = await wait_for(lambda: op.kube.get(DS_API, SCALER_KIND, "hpa-prefill", ns),
                            timeout=60, what="the scaler")
    assert scaler is not None
    owner = await op.kube.get(DS_API, DS_KIND, "hpa", ns)
    assert owner is not None
    assert scaler["metadata"]["ownerReferences"] == [{
        "apiVersion": DS_API, "kind": DS_KIND, "name": "hpa", "uid": owner["metadata"]["uid"],
        "controller": True, "blockOwnerDeletion": True}]
    assert scaler["metadata"]["labels"] == {NAME_LABEL: "hpa", ROLE_LABEL: "prefill"}
    scale = json.loads(await asyncio.to_thread(
        kubectl, "get", "--raw",
        f"/apis/{DS_API}/namespaces/{ns}/disaggregatedsetrolescalers/hpa-prefill/scale"))
    assert scale["kind"] == "Scale"
    assert scale["spec"]["replicas"] == 1
    await wait_converged(op.kube, ns, "hpa", replicas={"prefill": 1})

    await asyncio.to_thread(kubectl, "scale", "-n", ns,
                            "disaggregatedsetrolescaler/hpa-prefill", "--replicas=2")
    got = await wait_converged(op.kube, ns, "hpa", replicas={"prefill": 2})

    await op.kube.create({
        "apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "hpa-prefill"},
        "spec": {"scaleTargetRef": {"apiVersion": DS_API, "kind": SCALER_KIND,
                                    "name": "hpa-prefill"},
                 "minReplicas": 3, "maxReplicas": 5,
                 "metrics": [{"type": "Resource", "resource": {
                     "name": "cpu", "target": {"type": "Utilization",
                                               "averageUtilization": 50}}}]}}, ns)
    got = await wait_converged(op.kube, ns, "hpa", replicas={"prefill": 3}, timeout=180)
    live = await op.kube.get(DS_API, SCALER_KIND, "hpa-prefill", ns)
    assert live is not None
    assert live["spec"]["replicas"] == 3
    assert live["status"]["replicas"] == 3
    assert live["status"]["selector"] == (f"{NAME_LABEL}=hpa,{ROLE_LABEL}=prefill,"
                                          "leaderworkerset.sigs.k8s.io/worker-index=0")
    await check_everything(op.kube, ns, got)
    await op.kube.delete("autoscaling/v2", "HorizontalPodAutoscaler", "hpa-prefill", ns)
    await deleted(op, "hpa")


async def test_garbage_collection_after_delete(ds_operator: Operator) -> None:
    """Upstream's "should garbage collect all child resources when deleted": LeaderWorkerSets,
    pods and Services all go."""
    op, ns = ds_operator, ds_operator.namespace
    got = await created(op, ds("gc", role("prefill", 1), role("decode", 1)))
    assert len(await children(op.kube, ns, "gc")) == 2
    assert len(await ds_pods(op.kube, ns, "gc")) == 2
    assert len(await ds_services(op.kube, ns, "gc")) == 2
    assert {o["metadata"]["labels"][REVISION_LABEL] for o in got.lws.values()} == {got.revision}
    await deleted(op, "gc")


async def test_a_group_identity_change_rolls_the_set(ds_operator: Operator) -> None:
    """LWS docs "Group Identity": within a DisaggregatedSet a role may change
    ``groupIdentity`` (immutable on a LeaderWorkerSet), which rolls it as a template update:
    a new revision whose decode LeaderWorkerSet is Hash, reached by a coordinated rollout."""
    op = ds_operator
    before = await created(op, ds("identity", role("prefill", 2), role("decode", 2)))
    hashed = role("decode", 2).spec(groupIdentity="Hash")
    async with RolloutMonitor(op.kube, op.namespace, "identity") as monitor:
        await apply(op, ds("identity", role("prefill", 2), hashed))
        after = await wait_converged(op.kube, op.namespace, "identity",
                                     other_than=before.revision)
    assert monitor.violations({"prefill": 3, "decode": 3}) == []
    assert monitor.revisions() == [before.revision, after.revision]
    identities = {o["metadata"]["labels"][ROLE_LABEL]: o["spec"].get("groupIdentity")
                  for o in after.lws.values()}
    assert identities["decode"] == "Hash"
    assert identities["prefill"] in (None, "Ordinal")
    await deleted(op, "identity")


async def test_a_role_scaler_follows_its_role(ds_operator: Operator) -> None:
    """The scaler's lifecycle (upstream's scaler_manager.go): deleted by hand, it is recreated,
    seeded with the role's running count; the role turned Static, it is deleted (event
    ScalerDeleted), with no rollout either time."""
    op, ns = ds_operator, ds_operator.namespace

    def body(external: bool) -> dict[str, Any]:
        prefill = Role("prefill").size(1).image(PAUSE, name="model")
        prefill = prefill.external() if external else prefill.replicas(2)
        return DisaggregatedSet("scaled").role(prefill).role(role("decode", 1)).build()

    await op.kube.create(body(True), ns)
    first = await wait_for(lambda: op.kube.get(DS_API, SCALER_KIND, "scaled-prefill", ns),
                           timeout=60, what="the scaler")
    assert first is not None
    await op.kube.patch(DS_API, SCALER_KIND, "scaled-prefill", {"spec": {"replicas": 2}}, ns,
                        content_type=MERGE_PATCH)
    start = await wait_converged(op.kube, ns, "scaled", replicas={"prefill": 2})
    await op.kube.delete(DS_API, SCALER_KIND, "scaled-prefill", ns)

    async def recreated() -> dict[str, Any] | None:
        got = await op.kube.get(DS_API, SCALER_KIND, "scaled-prefill", ns)
        return got if got and got["metadata"]["uid"] != first["metadata"]["uid"] else None

    again = await wait_for(recreated, timeout=60, what="the scaler recreated")
    assert again is not None
    assert again["spec"]["replicas"] == 2  # the running fleet, not a fresh 1
    await apply(op, body(False))

    async def scaler_gone() -> bool:
        return await op.kube.get(DS_API, SCALER_KIND, "scaled-prefill", ns) is None

    await wait_for(scaler_gone, timeout=60, what="the scaler deleted")
    static = await wait_converged(op.kube, ns, "scaled")
    assert static.revision == start.revision
    assert static.uids() == start.uids()
    await op.recorded()  # the pass that deleted the scaler queued the Event
    events = [e for e in await op.kube.list("v1", "Event", ns)
              if (e.get("involvedObject") or {}).get("name") == "scaled"]
    assert "Deleted scaler scaled-prefill (role prefill is no longer External)" in [
        e["message"] for e in events if e["reason"] == "ScalerDeleted"]
    await deleted(op, "scaled")


def collapsed(trace: list[str]) -> list[str]:
    """A planner trace as the watch groups it: consecutive steps that change only the old side,
    or only the new side, are one run of writes to one revision."""
    def side(a: str, b: str) -> str:
        (a_old, a_new), (b_old, b_new) = a.split("|"), b.split("|")
        return "old" if a_new == b_new else "new" if a_old == b_old else "both"

    out = trace[:1]
    for i in range(1, len(trace)):
        if (len(out) > 1 and side(trace[i - 1], trace[i]) != "both"
                and side(trace[i - 2], trace[i - 1]) == side(trace[i - 1], trace[i])):
            out[-1] = trace[i]
        else:
            out.append(trace[i])
    return out


@pytest.mark.parametrize(("source", "target", "budget", "planned"), [
    # Upstream's "scale-down-role0-scale-up-role1" (surge 2, unavailable 0).
    ((10, 2), (6, 8), (2, 0), ["10,2|0,0", "8,2|0,0", "6,2|0,0", "6,2|2,2", "4,1|2,2",
                               "4,1|3,4", "4,1|4,5", "2,1|4,5", "2,1|5,7", "2,1|6,8",
                               "0,0|6,8"]),
    # Upstream's "surge-0-unavail-2-batches-by-unavailable".
    ((4, 4), (4, 4), (0, 2), ["4,4|0,0", "2,2|0,0", "2,2|2,2", "0,0|2,2", "0,0|4,4"]),
], ids=["scale-down-role0-scale-up-role1", "surge-0-unavail-2"])
async def test_rollout_step_tracking(ds_operator: Operator, source: tuple[int, int],
                                     target: tuple[int, int], budget: tuple[int, int],
                                     planned: list[str]) -> None:
    """Upstream's "Rolling Update Step Tracking": the observed steps are the traces
    its test (test/e2e/disaggregatedset) expects, every role within max(source, target) + surge."""
    op = ds_operator
    surge, unavailable = budget

    def body(image: str, replicas: tuple[int, int]) -> dict[str, Any]:
        return ds("tracked", role("prefill", replicas[0], image).surge(surge, unavailable),
                  role("decode", replicas[1], image).surge(surge, unavailable))

    before = await created(op, body(PAUSE, source))
    monitor, after = await rolled(op, before, body(ROLLED, target), {
        "prefill": max(source[0], target[0]) + surge,
        "decode": max(source[1], target[1]) + surge})
    assert monitor.trace(after.revision, ["prefill", "decode"]) == collapsed(planned)
    await deleted(op, "tracked")
