"""Replica resolution and role scalers (upstream's TestGetTargetReplicasResolutionMatrix,
TestScalerManagerReconcile*, TestScalerManagerWriteStatus)."""

from __future__ import annotations

from typing import Any

import pytest

from lws_operator.api.disaggregated import DisaggregatedSetView, RoleScalerView, RoleView
from lws_operator.logic.disaggregated.scaling import (
    observed_groups,
    plan_scalers,
    scaler_seed,
    scaler_status,
    target_replicas,
)
from tests.harness.ds_bodies import child, ds, role, scaler

NOW = "2026-12-01T18:00:00Z"
EARLIER = "2026-11-30T10:00:00Z"


# 186-190: TestGetTargetReplicasResolutionMatrix
@pytest.mark.parametrize(("spec_role", "scalers", "current", "want"), [
    (role("r", replicas=None), {}, 9, 1),                             # static default
    (role("r", replicas=4), {}, 9, 4),                                # static explicit
    (role("r", replicas=0), {}, 9, 0),                                # static paused
    (role("r", replicas=5, external=True), {"r": scaler("r", 0)}, 9, 0),
    (role("r", replicas=5, external=True), {"r": scaler("r", 7)}, 9, 7),
    (role("r", replicas=5, external=True), {}, 3, 3),                 # no scaler: current
    (role("r", replicas=5, external=True), {"r": scaler("r", None)}, 3, 0),
    (None, {}, 9, 1),                                                 # not in spec
])
def test_target_replicas(spec_role: dict[str, Any] | None, scalers: dict[str, Any],
                         current: int, want: int) -> None:
    view = RoleView(spec_role) if spec_role is not None else None
    assert target_replicas(view, scalers, current) == want
    assert target_replicas(view, {k: RoleScalerView(v) for k, v in scalers.items()},
                           current) == want


def test_seed() -> None:
    children = [child("prefill", "old", replicas=2), child("prefill", "new", replicas=1),
                child("prefill", "new", 1, replicas=None), child("decode", "old", replicas=5)]
    assert scaler_seed("prefill", children) == 4      # old + new, all slices, nil is 1
    assert scaler_seed("encode", children) == 1       # a fresh role
    assert scaler_seed("prefill", [child("prefill", "a", replicas=0)]) == 0


def test_observed_groups() -> None:
    children = [child("prefill", "a", status_replicas=3), child("prefill", "b", 1,
                                                                status_replicas=1),
                child("decode", "a", status_replicas=5)]
    assert observed_groups("prefill", children) == 4
    assert observed_groups("encode", children) == 0


# 183: TestScalerManagerReconcileCreatesMissing
def test_plan_creates_the_missing_scaler_of_an_external_role() -> None:
    owner = ds(role("prefill", external=True), role("decode"), name="myds")
    plan = plan_scalers(owner, [])
    assert plan.create == ("prefill",)
    assert plan.delete == ()
    assert plan.conflicts == ()
    assert plan.bound == {}


# 184: TestScalerManagerReconcileDeletesOrphaned
def test_plan_deletes_owned_scalers_of_non_external_roles() -> None:
    owner = ds(role("prefill", external=True), role("decode"), name="myds")
    orphan = scaler("old-role", ds_name="myds")
    static = scaler("decode", ds_name="myds")
    mine = scaler("prefill", ds_name="myds")
    plan = plan_scalers(owner, [orphan, static, mine])
    assert [s.name for s in plan.delete] == ["myds-old-role", "myds-decode"]
    assert plan.create == ()
    assert plan.bound["prefill"].raw is mine


# 185: TestScalerManagerReconcileRefusesForeignScaler
def test_plan_refuses_a_foreign_scaler_at_the_name() -> None:
    owner = ds(role("prefill", external=True), role("decode"), name="myds")
    foreign = scaler("prefill", uid=None, ds_name="myds")
    plan = plan_scalers(owner, [foreign])
    assert plan.conflicts == ("prefill",)
    assert plan.create == ()
    assert plan.delete == ()
    assert "prefill" not in plan.bound
    # A foreign scaler carrying the set's labels is never deleted either.
    assert plan_scalers(ds(name="myds"), [foreign]).delete == ()


def test_plan_adopts_an_owned_scaler_at_the_name() -> None:
    owner = ds(role("prefill", external=True), role("decode"), name="myds")
    stale = scaler("prefill", ds_name="myds")
    stale["metadata"]["labels"] = {}
    plan = plan_scalers(owner, [stale])
    assert plan.bound["prefill"].raw is stale
    assert plan.create == ()
    assert plan.conflicts == ()


# 191: TestScalerManagerWriteStatus
def test_scaler_status() -> None:
    owner = DisaggregatedSetView(ds(name="myds"))
    body = scaler_status(owner, "prefill", scaler("prefill", 4, ds_name="myds", generation=3),
                         4, NOW)
    assert body == {
        "replicas": 4,
        "selector": "disaggregatedset.x-k8s.io/name=myds,disaggregatedset.x-k8s.io/role=prefill,"
                    "leaderworkerset.sigs.k8s.io/worker-index=0",
        "observedGeneration": 3,
        "conditions": [{"type": "Ready", "status": "True", "observedGeneration": 3,
                        "reason": "Bound",
                        "message": "Scaler bound to a live DisaggregatedSet role",
                        "lastTransitionTime": NOW}],
    }


def test_scaler_status_unchanged_is_not_written_and_keeps_its_transition_time() -> None:
    owner = ds(name="myds")
    first = scaler_status(owner, "prefill", scaler("prefill", ds_name="myds"), 2, EARLIER)
    assert first is not None
    written = scaler("prefill", ds_name="myds", status=first)
    assert scaler_status(owner, "prefill", written, 2, NOW) is None
    moved = scaler_status(owner, "prefill", written, 3, NOW)
    assert moved is not None
    assert moved["replicas"] == 3
    assert moved["conditions"][0]["lastTransitionTime"] == EARLIER


def test_scaler_status_replaces_a_ready_condition_of_another_status() -> None:
    owner = ds(name="myds")
    stale = {"conditions": [{"type": "Ready", "status": "False", "reason": "WaitingForScaler",
                             "message": "m", "lastTransitionTime": EARLIER},
                            {"type": "Other", "status": "True"}]}
    body = scaler_status(owner, "prefill", scaler("prefill", ds_name="myds", status=stale), 0,
                         NOW)
    assert body is not None
    assert body["conditions"][0]["status"] == "True"
    assert body["conditions"][0]["lastTransitionTime"] == NOW
    assert body["conditions"][1] == {"type": "Other", "status": "True"}
