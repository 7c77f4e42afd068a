"""The diagnosis: the set's (or one group's) state in a line, the set-level causes, then, group
by group, the first cause holding each back, all in rank order."""

from __future__ import annotations

from collections.abc import Sequence

from lws_operator.api.constants import CONDITION_AVAILABLE, CONDITION_UPDATE_IN_PROGRESS
from lws_operator.api.view import count_of, deleting, lws_view, revision_of
from lws_operator.logic.status.readiness import pod_running_and_ready
from lws_operator.plugin.analysis.diagnosis.budgets import evictions_refused, restart_budget_finding
from lws_operator.plugin.analysis.diagnosis.creation import (
    failed_creates,
    not_observed,
    pods_not_mutated,
    recent_failures,
    webhook_findings,
    webhook_services,
)
from lws_operator.plugin.analysis.diagnosis.groups import (
    Group,
    current_revision,
    find_group,
    group_size,
    groups_of,
    leader_owner,
)
from lws_operator.plugin.analysis.diagnosis.readiness import (
    group_ready_gate_finding,
    incomplete_finding,
    not_ready_finding,
)
from lws_operator.plugin.analysis.diagnosis.rollout import (
    deadline_exceeded,
    rolled_back,
    rollout_paused,
    rollout_stalled,
)
from lws_operator.plugin.analysis.diagnosis.scene import (
    GROUP_INCOMPLETE,
    RANK,
    Diagnosis,
    EventFact,
    Finding,
    Scene,
    condition_true,
    event_fact,
    kubectl,
    spec_of,
)
from lws_operator.plugin.analysis.diagnosis.scheduling import (
    gated_finding,
    pod_group_finding,
    unschedulable_finding,
)


def _group_finding(scene: Scene, group: Group, groups: Sequence[Group],
                   facts: Sequence[EventFact], current: str) -> Finding | None:
    """The first cause holding ``group`` back, or None."""
    return (restart_budget_finding(scene, group) or gated_finding(scene, group, groups)
            or pod_group_finding(scene, group, facts)
            or unschedulable_finding(scene, group, facts, current)
            or group_ready_gate_finding(scene, group) or not_ready_finding(scene, group, current)
            or incomplete_finding(scene, group))


def _settled(scene: Scene, groups: Sequence[Group], current: str) -> tuple[bool, bool, str]:
    """(ready, updated, one-line summary) of the set."""
    view = lws_view(scene.lws)
    status = view.status
    replicas = view.replicas
    ready_n = count_of(status.get("readyReplicas")) or 0
    updated_n = count_of(status.get("updatedReplicas")) or 0
    ready = condition_true(scene.lws, CONDITION_AVAILABLE) and ready_n >= replicas
    updated = not condition_true(scene.lws, CONDITION_UPDATE_IN_PROGRESS) and updated_n >= replicas
    parts = [f"{ready_n}/{replicas} groups ready", f"{updated_n}/{replicas} updated"]
    if current:
        parts[-1] += f" to revision {current}"
    owner = leader_owner(scene)
    partition = ((spec_of(owner).get("updateStrategy") or {}).get("rollingUpdate") or {}).get(
        "partition") if owner and not view.hashed else None
    if not updated and count_of(partition):
        parts.append(f"partition {partition}")
    state = ("Ready and updated" if ready and updated else "Ready, rollout in progress"
             if ready else "not Ready")
    return ready, updated, f"{state}: " + ", ".join(parts)


def _group_settled(scene: Scene, group: Group, current: str) -> tuple[bool, bool, str]:
    size = group_size(scene, group)
    live = group.live
    ready = (group.leader is not None and not deleting(group.leader) and len(live) >= size
             and all(pod_running_and_ready(p) for p in live))
    updated = bool(live) and (not current or all(revision_of(p) == current for p in live))
    ready_pods = sum(1 for p in live if pod_running_and_ready(p))
    revisions = sorted({revision_of(p) for p in group.pods if revision_of(p)})
    state = ("Ready and updated" if ready and updated else "Ready, not updated" if ready
             else "not Ready")
    return ready, updated, (f"{state}: {ready_pods}/{size} pods ready, revision "
                            f"{', '.join(revisions) or 'unknown'}"
                            + (f" (current {current})" if current and not updated else ""))


def diagnose(scene: Scene, group: str | None = None) -> Diagnosis:
    """The findings for the set, or for one ``group`` (its index, Hash key or a pod name).

    Raises ``LookupError`` when ``group`` names no group of the set."""
    view = lws_view(scene.lws)
    groups = groups_of(scene.pods)
    current = current_revision(scene)
    facts = [event_fact(e) for e in scene.events]
    chosen: Group | None = None
    if group is not None:
        chosen = find_group(groups, group)
        if chosen is None:
            raise LookupError(f"LeaderWorkerSet {view.name} has no group {group!r}")
        ready, updated, summary = _group_settled(scene, chosen, current)
    else:
        ready, updated, summary = _settled(scene, groups, current)
    settled = ready and updated
    failures = recent_failures(scene)
    operator_ns = next((s.split("/", 1)[0] for s in webhook_services(scene)), None)
    findings: list[Finding] = [
        *not_observed(scene, operator_ns), *webhook_findings(scene, failures, settled),
        *pods_not_mutated(scene), *failed_creates(scene, failures)]
    if chosen is None:
        findings += rollout_paused(scene)
        findings += deadline_exceeded(scene)
        findings += rollout_stalled(scene, current)
        findings += evictions_refused(scene)
        findings += rolled_back(scene)
    for each in ([chosen] if chosen is not None else groups):
        found = _group_finding(scene, each, groups, facts, current)
        if found is not None:
            findings.append(found)
    if chosen is None and not findings and not ready:
        leaders = sum(1 for g in groups if g.leader is not None and not deleting(g.leader))
        if leaders < view.replicas:
            owner = "deployment" if view.hashed else "statefulset"
            findings.append(Finding(
                GROUP_INCOMPLETE,
                f"{view.replicas - leaders} of {view.replicas} groups have no leader pod yet",
                hint="the leader StatefulSet or Deployment creates them; look at its Events "
                     f"({kubectl(scene, 'describe', owner, view.name)})"))
    order = {g.index: i for i, g in enumerate(groups)}
    findings.sort(key=lambda f: (RANK.get(f.cause, len(RANK)), not f.blocking,
                                 order.get(f.group or "", -1)))
    return Diagnosis(view.name, view.namespace, chosen.index if chosen else None, ready,
                     updated, summary, tuple(findings))
