"""``kubectl lws rollout status``'s pure half: a set's status and spec to complete, progressing
(with which message), paused or failed; and where a DisaggregatedSet's coordinated rollout
stands among the steps of the controller's planner."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from lws_operator.api.constants import (
    PAUSED_ANNOTATION,
    PROGRESS_DEADLINE_ANNOTATION,
    REASON_ROLLOUT_PAUSED,
    ROLLED_BACK_FROM_ANNOTATION,
)
from lws_operator.api.disaggregated import (
    API_VERSION,
    INITIAL_REPLICAS_ANNOTATION,
    KIND,
    NAME_LABEL,
    REVISION_LABEL,
    ROLE_LABEL,
    SLICE_LABEL,
)
from lws_operator.logic.disaggregated.planner import Step
from lws_operator.plugin.analysis.ds_rollout import (
    position,
    progress_line,
    proposed_rollout,
    slice_rollout,
    step_kind,
    steps_data,
)
from lws_operator.plugin.analysis.rollout_status import (
    COMPLETE,
    FAILED,
    PAUSED,
    PROGRESSING,
    ds_verdict,
    lws_verdict,
    observed_generation,
)


def cond(kind: str, status: str, reason: str = "", message: str = "",
         generation: int | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": kind, "status": status, "reason": reason, "message": message}
    if generation is not None:
        out["observedGeneration"] = generation
    return out


AVAILABLE = cond("Available", "True", "AllGroupsReady")
UPDATING = [cond("Progressing", "True", "GroupsProgressing"),
            cond("UpdateInProgress", "True", "GroupsUpdating")]
DEADLINE = [cond("Progressing", "False", "ProgressDeadlineExceeded",
                 "Rollout made no progress for 30s: no group became ready on revision abc"),
            cond("UpdateInProgress", "True", "GroupsUpdating")]


def lws(*, replicas: int = 3, generation: int = 2, observed: int | None = 2,
        conditions: list[dict[str, Any]] | None = None, updated: int = 3, ready: int = 3,
        total: int | None = None, annotations: dict[str, str] | None = None,
        hashed: bool = False, partition: int = 0) -> dict[str, Any]:
    status: dict[str, Any] = {"replicas": replicas if total is None else total,
                              "updatedReplicas": updated, "readyReplicas": ready,
                              "conditions": conditions if conditions is not None
                              else [AVAILABLE]}
    if observed is not None:
        status["observedGeneration"] = observed
    spec: dict[str, Any] = {"replicas": replicas, "leaderWorkerTemplate": {"size": 2},
                            "rolloutStrategy": {"type": "RollingUpdate",
                                                "rollingUpdateConfiguration": {
                                                    "partition": partition}}}
    if hashed:
        spec["groupIdentity"] = "Hash"
    return {"metadata": {"name": "llm", "namespace": "ns", "generation": generation,
                         "annotations": annotations or {}},
            "spec": spec, "status": status}


def sts(partition: int, replicas: int, updated: int = 0, ready: int = 0) -> dict[str, Any]:
    return {"spec": {"replicas": replicas,
                     "updateStrategy": {"rollingUpdate": {"partition": partition}}},
            "status": {"updatedReplicas": updated, "readyReplicas": ready}}


LWS_CASES = [
    # (id, set, leader workload, rolled-back-from when the watch began, state, message part)
    ("complete", lws(), sts(0, 3), None, COMPLETE,
     'leaderworkerset "llm" successfully rolled out'),
    ("complete with a user partition", lws(partition=2), sts(2, 3), None, COMPLETE,
     "partitioned: groups from 2 on are updated"),
    ("spec not observed yet", lws(observed=1), sts(0, 3), None, PROGRESSING,
     'Waiting for leaderworkerset "llm" spec update to be observed'),
    ("no status yet", lws(observed=None, conditions=[]), None, None, PROGRESSING,
     "spec update to be observed"),
    ("not observed outranks Available", lws(observed=1, conditions=[AVAILABLE]), None, None,
     PROGRESSING, "spec update to be observed"),
    ("groups not updated, the partition", lws(conditions=UPDATING, updated=1), sts(2, 3, 1, 3),
     None, PROGRESSING, "1 out of 3 groups have been updated (partition 2: 1 of 3 leader pods "
     "updated, 3 ready)..."),
    ("a surge group", lws(conditions=UPDATING, updated=1), sts(2, 4, 2, 3), None, PROGRESSING,
     "(partition 2, 1 surge group: 2 of 4 leader pods updated, 3 ready)"),
    ("old groups pending termination", lws(conditions=UPDATING, total=4), sts(0, 4), None,
     PROGRESSING, "1 old groups are pending termination"),
    ("updated groups not ready", lws(conditions=UPDATING, ready=1), sts(0, 3), None,
     PROGRESSING, "1 of 3 updated groups are ready"),
    ("hash: the leader Deployment", lws(hashed=True, conditions=UPDATING, updated=2),
     {"status": {"updatedReplicas": 2, "replicas": 4}}, None, PROGRESSING,
     "(leader Deployment: 2 updated, 4 groups)"),
    ("deadline exceeded", lws(conditions=DEADLINE, updated=1), sts(2, 3), None, FAILED,
     'leaderworkerset "llm" exceeded its progress deadline: Rollout made no progress'),
    ("deadline outranks pause", lws(conditions=DEADLINE, annotations={PAUSED_ANNOTATION: "true"}),
     None, None, FAILED, "exceeded its progress deadline"),
    ("rolled back while watched", lws(annotations={ROLLED_BACK_FROM_ANNOTATION: "bad1"},
                                      conditions=UPDATING), None, None, FAILED,
     "was rolled back by the operator: revision bad1 made no progress"),
    ("rolled back before the watch: the rollback's own rollout",
     lws(annotations={ROLLED_BACK_FROM_ANNOTATION: "bad1"}), None, "bad1", COMPLETE,
     "successfully rolled out"),
    ("rolled back again while watched",
     lws(annotations={ROLLED_BACK_FROM_ANNOTATION: "bad2"}), None, "bad1", FAILED,
     "revision bad2"),
    ("paused by the annotation", lws(conditions=UPDATING, updated=1,
                                     annotations={PAUSED_ANNOTATION: "true"}), sts(2, 3), None,
     PAUSED, "rollout is paused: 1 of 3 groups updated, 3 ready (partition 2: 0 of 3 leader pods "
     "updated, 0 ready); resume it with `kubectl lws rollout resume llm`"),
    ("paused by the condition", lws(conditions=[cond("Progressing", "False",
                                                     REASON_ROLLOUT_PAUSED)], updated=1),
     None, None, PAUSED, "rollout is paused"),
    ("paused outranks Available", lws(annotations={PAUSED_ANNOTATION: "true"}), None, None,
     PAUSED, "rollout is paused"),
    ("annotation false is not paused", lws(annotations={PAUSED_ANNOTATION: "false"}), None,
     None, COMPLETE, "successfully rolled out"),
    ("a deadline opted in but not exceeded", lws(
        conditions=UPDATING, updated=2, annotations={PROGRESS_DEADLINE_ANNOTATION: "30"}),
     sts(1, 3), None, PROGRESSING, "2 out of 3 groups have been updated"),
]


@pytest.mark.parametrize(("body", "workload", "before", "state", "message"),
                         [c[1:] for c in LWS_CASES], ids=[c[0] for c in LWS_CASES])
def test_lws_verdict(body: dict[str, Any], workload: dict[str, Any] | None, before: str | None,
                     state: str, message: str) -> None:
    verdict = lws_verdict(body, workload, before)
    assert verdict.state == state
    assert message in verdict.message
    assert verdict.finished == (state in (COMPLETE, FAILED))


@pytest.mark.parametrize(("status", "expected"), [
    ({"observedGeneration": 4, "conditions": [cond("Available", "True", generation=3)]}, 4),
    ({"conditions": [cond("Available", "True", generation=3),
                     cond("Progressing", "False", generation=5)]}, 5),
    ({"conditions": [cond("Available", "True")]}, None),
    ({}, None),
])
def test_observed_generation_falls_back_to_the_conditions(status: dict[str, Any],
                                                          expected: int | None) -> None:
    assert observed_generation({"status": status}) == expected


# ------------------------------------------------------------------------------ DisaggregatedSet

UID = "ds-uid"


def role(name: str, replicas: int, surge: int = 1, unavailable: int = 0) -> dict[str, Any]:
    return {"name": name, "spec": {
        "replicas": replicas,
        "rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {
            "maxSurge": surge, "maxUnavailable": unavailable}},
        "leaderWorkerTemplate": {"workerTemplate": {"spec": {"containers": [
            {"name": "m", "image": "x"}]}}}}}


def ds(roles: list[dict[str, Any]], *, conditions: list[dict[str, Any]] | None = None,
       statuses: list[dict[str, Any]] | None = None, generation: int = 1,
       annotations: dict[str, str] | None = None, slices: int = 1) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND,
            "metadata": {"name": "dis", "namespace": "ns", "uid": UID,
                         "generation": generation, "annotations": annotations or {}},
            "spec": {"roles": roles, "slices": slices},
            "status": {"observedGeneration": generation, "roleStatuses": statuses or [],
                       "conditions": conditions or []}}


def child(role_name: str, revision: str, replicas: int, ready: int | None = None,
          initial: int | None = None, slice_index: int = 0,
          conditions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    annotations = {INITIAL_REPLICAS_ANNOTATION: str(initial)} if initial is not None else {}
    return {"metadata": {
        "name": f"dis-{slice_index}-{revision}-{role_name}", "annotations": annotations,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "labels": {NAME_LABEL: "dis", ROLE_LABEL: role_name, REVISION_LABEL: revision,
                   SLICE_LABEL: str(slice_index)},
        "ownerReferences": [{"apiVersion": API_VERSION, "kind": KIND, "name": "dis",
                             "uid": UID, "controller": True}]},
        "spec": {"replicas": replicas},
        "status": {"replicas": replicas,
                   "readyReplicas": replicas if ready is None else ready,
                   "conditions": conditions or []}}


TWO_ROLES = [role("prefill", 2), role("decode", 1)]
# The planner's walk for prefill 2, decode 1 with the default budgets (surge 1, unavailable 0),
# as the controller takes it: scale up, drain, scale up, final drain.
WALK = [Step((2, 1), (0, 0)), Step((2, 1), (1, 1)), Step((1, 1), (1, 1)),
        Step((1, 1), (2, 1)), Step((0, 0), (2, 1))]


def test_the_walk_is_the_planners() -> None:
    children = [child("prefill", "old", 2), child("decode", "old", 1)]
    rollout = slice_rollout(ds(TWO_ROLES), children, "new", 0)
    assert list(rollout.steps) == WALK
    assert rollout.roles == ("prefill", "decode")
    assert [step_kind(a, b) for a, b in itertools.pairwise(WALK)] == [
        "scale up new", "drain old", "scale up new", "final drain"]


ROLLOUTS = [
    # (id, children, current step index, new revision Ready, in progress)
    ("not started: no new child yet",
     [child("prefill", "old", 2), child("decode", "old", 1)], 0, False, True),
    ("started: the new children at 0",
     [child("prefill", "old", 2, initial=2), child("decode", "old", 1, initial=1),
      child("prefill", "new", 0), child("decode", "new", 0)], 0, True, True),
    ("first step taken, new groups not Ready",
     [child("prefill", "old", 2, initial=2), child("decode", "old", 1, initial=1),
      child("prefill", "new", 1, ready=0), child("decode", "new", 1, ready=0)], 1, False, True),
    ("second step: old drained by one",
     [child("prefill", "old", 1, initial=2), child("decode", "old", 1, initial=1),
      child("prefill", "new", 1), child("decode", "new", 1)], 2, True, True),
    ("between steps: a drain half applied",
     [child("prefill", "old", 2, initial=2), child("decode", "old", 0, initial=1),
      child("prefill", "new", 1), child("decode", "new", 1)], None, True, True),
    ("done: only the new revision",
     [child("prefill", "new", 2), child("decode", "new", 1)], 0, True, False),
]


@pytest.mark.parametrize(("children", "index", "stable", "in_progress"),
                         [c[1:] for c in ROLLOUTS], ids=[c[0] for c in ROLLOUTS])
def test_slice_rollout_finds_the_live_step(children: list[dict[str, Any]], index: int | None,
                                           stable: bool, in_progress: bool) -> None:
    rollout = slice_rollout(ds(TWO_ROLES), children, "new", 0)
    assert rollout.index == index
    assert rollout.stable == stable
    assert rollout.in_progress == in_progress
    if in_progress:
        assert list(rollout.steps) == WALK
        assert rollout.old_revisions == ("old",)


def test_progress_line_says_step_and_gate() -> None:
    children = [child("prefill", "old", 2, initial=2), child("decode", "old", 1, initial=1),
                child("prefill", "new", 1, ready=0), child("decode", "new", 1, ready=0)]
    rollout = slice_rollout(ds(TWO_ROLES), children, "new", 0)
    assert progress_line(rollout) == (
        "slice 0: step 1 of 4, old|new prefill 2|1, decode 1|1; waiting for the new "
        "revision's groups to be Ready")
    assert position(slice_rollout(ds(TWO_ROLES), ROLLOUTS[4][1], "new", 0)) \
        == "between steps (of 4)"


def test_only_the_slice_asked_and_only_owned_children_count() -> None:
    foreign = child("prefill", "old", 5, slice_index=0)
    foreign["metadata"]["ownerReferences"][0]["uid"] = "another"
    children = [child("prefill", "old", 2), child("decode", "old", 1),
                child("prefill", "old", 3, slice_index=1), child("decode", "old", 3,
                                                                 slice_index=1), foreign]
    rollout = slice_rollout(ds(TWO_ROLES, slices=2), children, "new", 0)
    assert rollout.steps[0] == Step((2, 1), (0, 0))


def test_a_proposed_change_walks_from_the_live_state() -> None:
    """A new target (prefill 3) from a set at rest at prefill 2, decode 1: every child is old,
    the walk starts from now and ends at the new targets."""
    children = [child("prefill", "cur", 2), child("decode", "cur", 1)]
    rollout = proposed_rollout(ds([role("prefill", 3), role("decode", 1)]), children, "next", 0)
    assert rollout.steps[0] == Step((2, 1), (0, 0))
    assert rollout.steps[-1] == Step((0, 0), (3, 1))
    data = steps_data(rollout)
    assert data["steps"][0]["action"] == "start"
    assert data["steps"][-1] == {"step": len(rollout.steps) - 1, "old": [0, 0], "new": [3, 1],
                                 "action": "final drain"}


ROLE_STATUSES = [{"name": "prefill", "replicas": 3, "readyReplicas": 2, "updatedReplicas": 1},
                 {"name": "decode", "replicas": 2, "readyReplicas": 2, "updatedReplicas": 1}]
DS_AVAILABLE = [cond("Available", "True", "AllRolesReady")]
DS_PROGRESSING = [cond("Progressing", "True", "RolloutInProgress")]

DS_CASES = [
    ("complete", ds(TWO_ROLES, conditions=DS_AVAILABLE), [], COMPLETE,
     'disaggregatedset "dis" successfully rolled out', ()),
    ("progressing, per role", ds(TWO_ROLES, conditions=DS_PROGRESSING,
                                 statuses=ROLE_STATUSES), [], PROGRESSING,
     'Waiting for disaggregatedset "dis" rollout to finish...',
     ("prefill: 1 of 2 groups updated, 2 ready, 3 in all",
      "decode: 1 of 1 groups updated, 2 ready, 2 in all")),
    ("a role without status yet", ds(TWO_ROLES, conditions=DS_PROGRESSING), [], PROGRESSING,
     "rollout to finish", ("prefill: 0 of 2 groups updated, 0 ready, 0 in all",
                           "decode: 0 of 1 groups updated, 0 ready, 0 in all")),
    ("not observed", {**ds(TWO_ROLES, conditions=DS_AVAILABLE, generation=2),
                      "status": {"observedGeneration": 1, "conditions": DS_AVAILABLE}}, [],
     PROGRESSING, "spec update to be observed", ()),
    ("paused", ds(TWO_ROLES, conditions=DS_PROGRESSING,
                  annotations={PAUSED_ANNOTATION: "true"}), [], PAUSED,
     "rollout is paused; resume it with `kubectl lws rollout resume dis`", None),
    ("a child held at its deadline", ds(TWO_ROLES, conditions=DS_PROGRESSING),
     [child("prefill", "new", 2, conditions=DEADLINE)], FAILED,
     "leaderworkerset dis-0-new-prefill exceeded its progress deadline", ()),
]


@pytest.mark.parametrize(("body", "children", "state", "message", "details"),
                         [c[1:] for c in DS_CASES], ids=[c[0] for c in DS_CASES])
def test_ds_verdict(body: dict[str, Any], children: list[dict[str, Any]], state: str,
                    message: str, details: tuple[str, ...] | None) -> None:
    verdict = ds_verdict(body, {"prefill": 2, "decode": 1}, (), children)
    assert verdict.state == state
    assert message in verdict.message
    if details is not None:
        assert verdict.details == details


def test_ds_verdict_shows_each_slice_in_progress() -> None:
    children = [child("prefill", "old", 2, initial=2), child("decode", "old", 1, initial=1),
                child("prefill", "new", 1, ready=0), child("decode", "new", 1, ready=0)]
    body = ds(TWO_ROLES, conditions=DS_PROGRESSING, statuses=ROLE_STATUSES)
    rollouts = [slice_rollout(body, children, "new", 0)]
    verdict = ds_verdict(body, {"prefill": 2, "decode": 1}, rollouts, [])
    assert verdict.details[-1].startswith("slice 0: step 1 of 4")
    done = [slice_rollout(body, [child("prefill", "new", 2), child("decode", "new", 1)],
                          "new", 0)]
    assert not any(d.startswith("slice") for d in ds_verdict(
        body, {"prefill": 2, "decode": 1}, done, []).details)


# ------------------------------------------------------------------------------ why, for a set

def _diagnosis(name: str, *findings: Any) -> Any:
    from lws_operator.plugin.analysis.diagnosis import Diagnosis

    return Diagnosis(name=name, namespace="ns", group=None, ready=not findings,
                     updated=not findings, summary="", findings=tuple(findings))


def test_why_puts_the_sets_own_causes_then_the_target_revisions_children() -> None:
    from lws_operator.plugin.analysis.diagnosis import Finding
    from lws_operator.plugin.analysis.ds_diagnosis import (
        ROLE_MISSING,
        ROLLOUT_PAUSED,
        SCALER_MISSING,
        ChildDiagnosis,
        ds_diagnosis,
        set_findings,
    )

    body = ds([role("prefill", 2), {**role("decode", 1), "scaling": {"mode": "External"}}],
              conditions=DS_PROGRESSING, annotations={PAUSED_ANNOTATION: "true"})
    children = [child("prefill", "new", 2), child("prefill", "old", 1), child("decode", "old", 1)]
    own = set_findings(body, children, [], "new")
    assert [f.cause for f in own] == [ROLLOUT_PAUSED, SCALER_MISSING, ROLE_MISSING]
    assert own[0].fix == "kubectl lws -n ns rollout resume dis"
    assert own[2].summary == "slice 0 has no LeaderWorkerSet of revision new for role decode"
    stuck = Finding("PodsNotReady", "2 pods not Ready")
    warn = Finding("RolledBack", "rolled back", blocking=False)
    report = ds_diagnosis(body, ds_verdict(body, {"prefill": 2, "decode": 1}), own, [
        ChildDiagnosis("prefill", 0, "old", False, _diagnosis("dis-0-old-prefill", warn)),
        ChildDiagnosis("prefill", 0, "new", True, _diagnosis("dis-0-new-prefill", stuck))])
    assert [f.cause for f in report.findings] == [ROLLOUT_PAUSED, SCALER_MISSING, ROLE_MISSING,
                                                  "PodsNotReady", "RolledBack"]
    assert report.findings[3].summary == \
        "role prefill (LeaderWorkerSet dis-0-new-prefill): 2 pods not Ready"
    assert report.findings[4].summary == ("role prefill (LeaderWorkerSet dis-0-old-prefill, "
                                          "old revision old): rolled back")
    assert report.blocked
    assert not report.available
    assert report.summary.startswith('disaggregatedset "dis" rollout is paused')
    only = ds_diagnosis(body, ds_verdict(body, {}), [], [
        ChildDiagnosis("prefill", 0, "new", True, _diagnosis("a", stuck)),
        ChildDiagnosis("decode", 0, "new", True, _diagnosis("b", warn))], role="decode")
    assert [f.cause for f in only.findings] == ["RolledBack"]
    assert not only.blocked
    assert only.as_dict()["role"] == "decode"


def test_why_of_a_settled_set_finds_nothing() -> None:
    from lws_operator.plugin.analysis.ds_diagnosis import ds_diagnosis, set_findings

    body = ds(TWO_ROLES, conditions=DS_AVAILABLE)
    children = [child("prefill", "new", 2), child("decode", "new", 1)]
    assert set_findings(body, children, [], "new") == []
    report = ds_diagnosis(body, ds_verdict(body, {}), [], [])
    assert report.available
    assert not report.blocked
    unobserved = {**body, "metadata": {**body["metadata"], "generation": 3}}
    assert [f.cause for f in set_findings(unobserved, children, [], "new")] == ["NotObserved"]
