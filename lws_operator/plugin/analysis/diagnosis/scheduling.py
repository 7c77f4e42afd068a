"""Group causes before a pod runs: a scheduling gate (a gated pod is not even tried by the
scheduler), a gang whose minimum cannot be placed together, pods no node fits."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from lws_operator.api.constants import (
    CONDITION_UPDATE_IN_PROGRESS,
    CONDITION_WORKLOAD_SCHEDULING_CREATED,
    GROUP_REPLACEMENT_GATE,
    VOLCANO_GROUP_NAME_ANNOTATION,
)
from lws_operator.api.view import count_of, deleting, lws_view, revision_of
from lws_operator.logic.failures.restart_budget import exhausted
from lws_operator.logic.objects.meta import epoch_seconds, meta_of, name_of
from lws_operator.plugin.analysis.diagnosis.groups import Group
from lws_operator.plugin.analysis.diagnosis.scene import (
    POD_GROUP_INCOMPLETE,
    SCHEDULING_GATED,
    UNSCHEDULABLE,
    EventFact,
    Finding,
    Scene,
    age_since,
    condition,
    condition_true,
    kubectl,
    pod_scheduled,
    scheduling_gates,
    spec_of,
)


def _template_gates(scene: Scene) -> set[str]:
    view = lws_view(scene.lws)
    out: set[str] = set()
    for template in (view.worker_template, view.leader_template or {}):
        out.update(scheduling_gates(template))
    return out


def _tearing_down(groups: Sequence[Group]) -> list[str]:
    """Hash groups some pod of which still exists while their leader is terminating or gone."""
    return [g.index for g in groups if g.pods and (
        g.leader is None or deleting(g.leader)) and not (g.leader and exhausted(g.leader))]


def _ours_gate_hint(scene: Scene, group: Group, groups: Sequence[Group]) -> tuple[str, str]:
    """Why the controller has not lifted our ``group-replacement`` gate yet: (hint, evidence)."""
    view = lws_view(scene.lws)
    if view.scheduling_level in ("replica", "role"):
        failed = _workload_scheduling_failed(scene)
        detail = f"; {failed}" if failed else ""
        return ("the LWS controller lifts it once the group's PodGroups exist (gang "
                "scheduling)", f"the group's PodGroups are not there yet{detail}")
    if view.hashed:
        retained = [g.index for g in groups if g.leader is not None and exhausted(g.leader)]
        if retained:
            return ("recover the exhausted group (kubectl lws recover) or scale down",
                    f"held back by group(s) {', '.join(retained)} that exhausted their "
                    "restart budget")
        down = [i for i in _tearing_down(groups) if i != group.index]
        if down and view.group_replacement_policy != "Immediate":
            return ("the LWS controller lifts it once the groups being torn down are gone "
                    "(groupReplacementPolicy PostTermination)",
                    f"waiting for group(s) {', '.join(down)} to finish terminating")
        ungated = sum(1 for g in groups if g.leader is not None and not deleting(g.leader)
                      and GROUP_REPLACEMENT_GATE not in scheduling_gates(g.leader)
                      and revision_of(g.leader) == revision_of(group.leader))
        if ungated >= view.replicas:
            return ("it stays gated: at most spec.replicas groups of a revision are ungated; "
                    "a scale-down removes it first",
                    f"{ungated} groups of its revision already run (replicas {view.replicas})")
    return ("the LWS controller lifts it when it admits the group; if it does not, check the "
            "operator is running", "")


def gated_finding(scene: Scene, group: Group, groups: Sequence[Group]) -> Finding | None:
    pods = [p for p in group.live if scheduling_gates(p)]
    if not pods:
        return None
    in_template = _template_gates(scene)
    gates = sorted({g for p in pods for g in scheduling_gates(p)},
                   key=lambda g: (g == GROUP_REPLACEMENT_GATE, g))
    gate = gates[0]  # a foreign gate first: ours is lifted by us, theirs only by them
    evidence = [f"pod {name_of(p)}: schedulingGates {', '.join(scheduling_gates(p))}" for p in pods]
    view = lws_view(scene.lws)
    if gate == GROUP_REPLACEMENT_GATE:
        hint, why = _ours_gate_hint(scene, group, groups)
        if why:
            evidence.append(why)
        return Finding(SCHEDULING_GATED,
                       f"group {group.index} is held by the {gate} scheduling gate: the "
                       "scheduler does not try to place it yet",
                       group.index, tuple(evidence), hint=hint,
                       ours="group-replacement scheduling gate")
    if gate in in_template:
        return Finding(SCHEDULING_GATED,
                       f"group {group.index} is held by the scheduling gate {gate}, which the "
                       "pod template sets: nothing lifts it",
                       group.index, tuple(evidence),
                       fix=kubectl(scene, "edit", "leaderworkerset", view.name),
                       hint=f"remove {gate} from the template's spec.schedulingGates (a new "
                            "template rolls the groups), or have whatever expects it lift it "
                            "from each pod")
    return Finding(SCHEDULING_GATED,
                   f"group {group.index} is held by the scheduling gate {gate}, added by "
                   "another admission controller",
                   group.index, tuple(evidence),
                   hint=f"the controller that owns {gate} (a queueing or quota system) must "
                        "lift it; LWS does not")


def _scheduler_message(scene: Scene, pod: Mapping[str, Any],
                       facts: Sequence[EventFact]) -> str:
    cond = pod_scheduled(pod) or {}
    if cond.get("message"):
        return str(cond["message"])
    uid = str(meta_of(pod).get("uid") or "")
    for fact in facts:
        if fact.reason == "FailedScheduling" and fact.kind == "Pod" and (
                fact.name == name_of(pod) and (not uid or not fact.uid or fact.uid == uid)):
            return fact.message
    return ""


def _unscheduled(pod: Mapping[str, Any]) -> bool:
    return not spec_of(pod).get("nodeName") and not deleting(pod)


def _unschedulable(pod: Mapping[str, Any], facts: Sequence[EventFact]) -> bool:
    if not _unscheduled(pod) or scheduling_gates(pod):
        return False
    cond = pod_scheduled(pod)
    if cond is not None:
        return cond.get("status") == "False" and cond.get("reason") != "SchedulingGated"
    uid = str(meta_of(pod).get("uid") or "")
    return any(f.reason == "FailedScheduling" and f.name == name_of(pod)
               and (not f.uid or f.uid == uid) for f in facts)


def _unscheduled_evidence(scene: Scene, pods: Iterable[Mapping[str, Any]],
                          facts: Sequence[EventFact]) -> list[str]:
    out = []
    for pod in pods:
        message = _scheduler_message(scene, pod, facts)
        since = epoch_seconds((pod_scheduled(pod) or {}).get("lastTransitionTime"))
        age = age_since(scene.now, since)
        out.append(f"pod {name_of(pod)}" + (f" (for {age})" if age else "") + ": "
                   + (message or "not scheduled yet, no message from the scheduler"))
    return out


def _min_count(group: Mapping[str, Any]) -> int | None:
    policy = spec_of(group).get("schedulingPolicy") or {}
    gang = policy.get("gang") if isinstance(policy, Mapping) else None
    return count_of(gang.get("minCount")) if isinstance(gang, Mapping) else None


def _native_pod_group(pod: Mapping[str, Any]) -> str | None:
    sg = spec_of(pod).get("schedulingGroup")
    name = sg.get("podGroupName") if isinstance(sg, Mapping) else None
    return str(name) if name else None


@dataclass(frozen=True)
class _Gang:
    """The gang a pod is placed with: a native PodGroup (``spec.schedulingGroup``) or a volcano
    PodGroup (its annotation, read only when volcano schedules the pod)."""

    kind: str
    name: str
    live: Mapping[str, Any] | None  # None: the PodGroup does not exist (yet)
    peers: list[Mapping[str, Any]]  # its pods not being deleted, of any group
    minimum: int | None  # None: no minimum is set, so it never holds its pods back
    ours: str


def _gang_of(scene: Scene, pod: Mapping[str, Any], native: Mapping[str, Mapping[str, Any]],
             volcano: Mapping[str, Mapping[str, Any]]) -> _Gang | None:
    native_name = _native_pod_group(pod)
    if native_name:
        live = native.get(native_name)
        peers = [p for p in scene.pods if _native_pod_group(p) == native_name
                 and not deleting(p)]
        return _Gang("PodGroup", native_name, live, peers, _min_count(live) if live else None,
                     "native gang scheduling (spec.scheduling)")
    annotations = meta_of(pod).get("annotations") or {}
    volcano_name = annotations.get(VOLCANO_GROUP_NAME_ANNOTATION) \
        if spec_of(pod).get("schedulerName") == "volcano" else None
    if not volcano_name:
        return None
    live = volcano.get(str(volcano_name))
    peers = [p for p in scene.pods if not deleting(p) and (meta_of(p).get(
        "annotations") or {}).get(VOLCANO_GROUP_NAME_ANNOTATION) == volcano_name]
    return _Gang("volcano PodGroup", str(volcano_name), live, peers,
                 count_of(spec_of(live).get("minMember")) if live else None, "")


def _workload_scheduling_failed(scene: Scene) -> str:
    """The set's ``WorkloadSchedulingCreated=False`` condition as evidence ('' without one): why
    the controller could not create the PodGroups."""
    created = condition(scene.lws, CONDITION_WORKLOAD_SCHEDULING_CREATED)
    if not created or created.get("status") != "False":
        return ""
    return (f"condition {CONDITION_WORKLOAD_SCHEDULING_CREATED}=False "
            f"{created.get('reason')}: {created.get('message')}")


def _gang_holds(scene: Scene, gang: _Gang) -> tuple[str, str, list[str]] | None:
    """Why ``gang`` holds its pods back, as (summary, hint, evidence), or None when it does not:
    it does not exist, or fewer than its minimum are placed."""
    if gang.live is None:
        failed = _workload_scheduling_failed(scene)
        return (f"{gang.kind} {gang.name} does not exist: the scheduler holds its pods until it "
                "does",
                "the LWS controller creates it; if it does not, check the operator is running",
                [failed] if failed else [])
    placed = sum(1 for p in gang.peers if spec_of(p).get("nodeName"))
    if gang.minimum is None or placed >= gang.minimum:
        return None
    evidence: list[str] = []
    status = gang.live.get("status") or {}
    if status.get("phase"):
        evidence.append(f"{gang.kind} {gang.name}: phase {status.get('phase')}, running "
                        f"{status.get('running', 0)}")
    evidence += [f"{gang.kind} {gang.name}: {cond.get('type')} {cond.get('reason')}: "
                 f"{cond.get('message')}"
                 for cond in status.get("conditions") or [] if cond.get("message")]
    return (f"{gang.kind} {gang.name} needs {gang.minimum} pods placed together and has "
            f"{placed}: the scheduler places none until all fit",
            "free capacity for the whole gang, or make the group smaller; the scheduler's "
            "message says what is missing", evidence)


def pod_group_finding(scene: Scene, group: Group, facts: Sequence[EventFact],
                      ) -> Finding | None:
    """A gang (native PodGroup ``gang.minCount``, or volcano ``minMember``) of which this group
    has unscheduled members and which has fewer than its minimum placed."""
    members = [p for p in group.live if _unscheduled(p) and not scheduling_gates(p)]
    if not members:
        return None
    native = {g_name: g for g in scene.pod_groups if (g_name := name_of(g))}
    volcano = {name_of(g): g for g in scene.volcano_groups}
    for pod in members:
        gang = _gang_of(scene, pod, native, volcano)
        held = _gang_holds(scene, gang) if gang is not None else None
        if gang is None or held is None:
            continue
        summary, hint, evidence = held
        evidence += _unscheduled_evidence(
            scene, [p for p in gang.peers if _unscheduled(p)][:4], facts)
        return Finding(POD_GROUP_INCOMPLETE, f"group {group.index}: {summary}", group.index,
                       tuple(evidence), hint=hint, ours=gang.ours)
    return None


def unschedulable_finding(scene: Scene, group: Group, facts: Sequence[EventFact],
                           current: str) -> Finding | None:
    pods = [p for p in group.live if _unschedulable(p, facts)]
    if not pods:
        return None
    count = len(pods)
    rollout = (" (blocking the rollout)" if current and revision_of(pods[0]) == current
               and condition_true(scene.lws, CONDITION_UPDATE_IN_PROGRESS) else "")
    return Finding(UNSCHEDULABLE,
                   f"group {group.index}: {count} pod{'s' if count != 1 else ''} cannot be "
                   f"scheduled{rollout}",
                   group.index, tuple(_unscheduled_evidence(scene, pods, facts)),
                   hint="the scheduler's message says what no node offers: add capacity, or "
                        "lower the template's requests or constraints "
                        f"({kubectl(scene, 'edit', 'leaderworkerset', lws_view(scene.lws).name)})")
