"""Group causes once its pods are placed: the leader held by the ``group-ready`` readiness
gate, pods scheduled but not Ready, a group short of pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import CONDITION_UPDATE_IN_PROGRESS, GROUP_READY_CONDITION
from lws_operator.api.view import count_of, deleting, is_leader, lws_view, revision_of
from lws_operator.logic.objects.meta import epoch_seconds, host_name, meta_of, name_of
from lws_operator.logic.status.readiness import containers_ready, pod_running_and_ready
from lws_operator.plugin.analysis.diagnosis.groups import Group, group_size
from lws_operator.plugin.analysis.diagnosis.scene import (
    GROUP_INCOMPLETE,
    GROUP_READY_GATE,
    PODS_NOT_READY,
    Finding,
    Scene,
    age_since,
    condition,
    condition_true,
    kubectl,
    pod_scheduled,
    spec_of,
)


def _not_ready_line(scene: Scene, pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    parts = [f"phase {status.get('phase') or 'Pending'}"]
    node = spec_of(pod).get("nodeName")
    if node:
        parts.append(f"on {node}")
    for cs in [*(status.get("initContainerStatuses") or []),
               *(status.get("containerStatuses") or [])]:
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting:
            parts.append(f"container {cs.get('name')} waiting: {waiting.get('reason')}"
                         + (f" ({waiting.get('message')})" if waiting.get("message") else ""))
        elif terminated and not cs.get("ready"):
            parts.append(f"container {cs.get('name')} terminated: {terminated.get('reason')} "
                         f"exit {terminated.get('exitCode')}")
        elif not cs.get("ready"):
            parts.append(f"container {cs.get('name')} not ready")
        if count_of(cs.get("restartCount")):
            parts.append(f"{cs.get('restartCount')} restarts")
    if not status.get("containerStatuses"):
        parts.append("containers not started")
    ready = condition(pod, "Ready")
    since = epoch_seconds((ready or {}).get("lastTransitionTime")) \
        or epoch_seconds((pod_scheduled(pod) or {}).get("lastTransitionTime")) \
        or epoch_seconds(meta_of(pod).get("creationTimestamp"))
    age = age_since(scene.now, since)
    return f"pod {name_of(pod)} not Ready" + (f" for {age}" if age else "") + ": " + \
        ", ".join(parts)


def _has_group_ready_gate(pod: Mapping[str, Any]) -> bool:
    return any(isinstance(g, Mapping) and g.get("conditionType") == GROUP_READY_CONDITION
               for g in spec_of(pod).get("readinessGates") or [])


def group_ready_gate_finding(scene: Scene, group: Group) -> Finding | None:
    leader = group.leader
    if leader is None or deleting(leader) or not _has_group_ready_gate(leader):
        return None
    if not containers_ready(leader) or condition_true(leader, GROUP_READY_CONDITION):
        return None
    workers = [p for p in group.live if not is_leader(p)]
    not_ready = [p for p in workers if not pod_running_and_ready(p)]
    gate = condition(leader, GROUP_READY_CONDITION)
    evidence = [f"leader pod {name_of(leader)}: containers ready, readiness gate "
                f"{GROUP_READY_CONDITION} is "
                + (f"{gate.get('status')} ({gate.get('reason')})" if gate else "not set yet")]
    size = group_size(scene, group)
    evidence.append(f"{len(workers) - len(not_ready)} of {size - 1} workers Ready")
    evidence += [_not_ready_line(scene, p) for p in not_ready]
    if not not_ready and len(workers) >= size - 1:
        hint = ("every worker is Ready, so the LWS controller should set the gate: check the "
                "operator is running")
    else:
        hint = ("the LWS controller sets the gate once the group's worker StatefulSet is "
                "ready; the workers above are what it waits for")
    return Finding(GROUP_READY_GATE,
                   f"group {group.index}: leader {name_of(leader)} is not Ready because its "
                   f"{GROUP_READY_CONDITION} readiness gate waits for the whole group",
                   group.index, tuple(evidence), hint=hint, ours="group-ready readiness gate")


def not_ready_finding(scene: Scene, group: Group, current: str) -> Finding | None:
    pods = [p for p in group.live if spec_of(p).get("nodeName") and not pod_running_and_ready(p)]
    if not pods:
        return None
    updating = condition_true(scene.lws, CONDITION_UPDATE_IN_PROGRESS)
    on_new = bool(current) and revision_of(pods[0]) == current
    count = len(pods)
    summary = (f"group {group.index}: {count} pod{'s' if count != 1 else ''} scheduled but "
               "not Ready")
    view = lws_view(scene.lws)
    if updating and on_new:
        summary += (f"; the rollout to revision {current} replaces the next group only once "
                    "this one is Ready")
        return Finding(PODS_NOT_READY, summary, group.index,
                       tuple(_not_ready_line(scene, p) for p in pods),
                       fix=kubectl(scene, "edit", "leaderworkerset", view.name),
                       hint="if the new template is at fault (an image that never starts, a "
                            "failing probe), fix it: the next template replaces this group")
    return Finding(PODS_NOT_READY, summary, group.index,
                   tuple(_not_ready_line(scene, p) for p in pods),
                   hint=f"look at the pods ({kubectl(scene, 'describe', 'pod', name_of(pods[0]))}"
                        "): image pulls, probes, crashes")


def incomplete_finding(scene: Scene, group: Group) -> Finding | None:
    size = group_size(scene, group)
    live = group.live
    if group.leader is None or deleting(group.leader) or len(live) >= size:
        return None
    view = lws_view(scene.lws)
    return Finding(GROUP_INCOMPLETE,
                   f"group {group.index} has {len(live)} of its {size} pods",
                   group.index,
                   (f"startupPolicy {view.startup_policy}: workers are created "
                    + ("once the leader is Ready" if view.startup_policy == "LeaderReady"
                       else "with the leader"),),
                   hint="the worker StatefulSet creates the missing pods; if it does not, look "
                        "at its Events ("
                        f"{kubectl(scene, 'describe', 'statefulset', host_name(group.leader))})")
