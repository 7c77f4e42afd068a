"""Hash group identity (LWS docs: "Group Identity", "Group Replacement", "Hash Mode"):
the leader Deployment, replacement pacing, the group-ready readiness gate, and the restart
budget across replacements.

In Hash mode a Deployment named after the LeaderWorkerSet owns the leader pods, so rollout and
scale-down are the Deployment controller's: it moves ``maxSurge``/``maxUnavailable`` groups at a
time and its ReplicaSet picks unscheduled and not-ready leaders as scale-down victims first. Two
things make that group-aware:

* **group-ready**: a multi-pod group's leader is Ready (so available to the Deployment) only once
  the controller sets this readiness-gate condition, which it does while the group's worker
  StatefulSet is ready.
* **group-replacement**: every Hash leader is admitted behind this scheduling gate. While gated
  nothing is built for it. Each pass admits, oldest first, ``G - T`` of the ``G`` gated leaders,
  where ``T`` counts the groups tearing down (some pod still exists but the leader is terminating
  or gone), so a replacement schedules only onto capacity its predecessor freed
  (``PostTermination``). ``Immediate`` admits at once. Under both, a group retained after
  exhausting its restart budget holds back one gated leader, and at most ``replicas`` groups of
  one revision are ungated at a time (surplus surge leaders stay gated, and as unscheduled pods
  they are the first a scale-down removes).
* **outdated leaders**: only leaders of the set's current revision are admitted, except while
  the set is paused. When the
  template and ``replicas`` change together, the Deployment controller first scales the old
  ReplicaSet (a scaling event is applied to the existing ReplicaSets before the rollout starts),
  which creates leaders of the old revision; gating must keep them from ever scheduling or
  building workers, and as unscheduled pods the rollout removes them first (LWS docs,
  "Combined Template Update and Scale-Up"). Without this they were admitted whenever fewer
  than ``replicas`` groups of their revision ran, under either policy. They are not counted
  among the ``G`` gated leaders of PostTermination's ``G - T``, since they replace nothing.
  A paused set's Deployment (paused too, ``logic.rollout.pause``) scales the ReplicaSets it
  has: a scale-up's leaders are of the revision already running, and are admitted, so scaling
  works while paused (the rollout replaces them once resumed).

Decisions:

* A group is identified by its ``group-key`` label (leaders and workers carry it), not by pod
  names: a tearing-down group may have lost its leader object already while its workers still
  hold their nodes, and that must keep counting (the LWS docs: the count keys off pods).
* Restart counts (``"<revision>/<group>"``) of groups with no live leader are *pending
  transfer*: admitting a gated leader of that revision moves one of them (oldest group name
  first, for determinism) onto the new group, so a recreated group keeps its budget. Counts
  left over once nothing of their revision is gated or tearing down (a group that was scaled
  away, not replaced) are dropped, so a later scale-up starts fresh.
* A retained (exhausted) group is released when recovered, when the rollout moved on to another
  revision, and on scale-down: when the Deployment no longer keeps a gated leader for it to hold
  back (fewer gated leaders of its revision than retained groups while the Deployment has all
  the leaders it wants), since the ReplicaSet removes the gated replacement first.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from lws_operator.api.constants import (
    GROUP_IDENTITY_ANNOTATION,
    GROUP_IDENTITY_HASH,
    GROUP_KEY_LABEL,
    GROUP_READY_CONDITION,
    NAME_LABEL,
    REPLICAS_ANNOTATION,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.api.view import (
    LEADER_INDEX,
    deleting,
    group_index,
    is_leader,
    lws_view,
    revision_of,
)
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.logic.failures.restart_budget import count_key, exhausted
from lws_operator.logic.objects.meta import host_name, labels_of, meta_of
from lws_operator.logic.objects.owners import lws_reference
from lws_operator.logic.placement.gang import gated
from lws_operator.logic.status.readiness import worker_statefulset_ready
from lws_operator.logic.workloads.statefulsets import (
    copied_annotations,
    hashed,
    leader_pod_template,
    spec_replicas,
)

__all__ = [
    "Admission",
    "GroupReadiness",
    "hashed",
    "leader_deployment",
    "plan_admission",
    "readiness_updates",
    "release_scaled_down",
]


def immediate(lws: LWS) -> bool:
    return lws_view(lws).group_replacement_policy == "Immediate"


def _is_zero(value: Any) -> bool:
    """Zero as the Deployment API reads an int-or-percent: ``0`` or ``"0%"``."""
    return value == 0 or (isinstance(value, str) and value.rstrip("%").strip("0") == ""
                          and value.endswith("%"))


def leader_deployment(lws: LWS, key: str) -> dict[str, Any]:
    """The server-side-apply body of the leader Deployment ``<lws>`` on revision ``key``.

    ``maxSurge`` and ``maxUnavailable`` are handed to the Deployment unchanged (integers or
    percentages; the Deployment scales them against ``replicas`` itself). The pod template is the
    leader StatefulSet's plus the Hash marker the pod webhook reads and the headless Service as
    subdomain; ``revisionHistoryLimit`` is 0 because the LeaderWorkerSet keeps its own history in
    ControllerRevisions. A paused set (``logic.rollout.pause``) pauses its Deployment, whose
    controller then replaces no leader and, on a template change, creates no ReplicaSet; it is
    written either way (``false`` is what the server omits), so a resume is applied."""
    view = lws_view(lws)
    meta = view.meta
    name = view.name
    max_unavailable, max_surge = view.rolling_update.max_unavailable, view.rolling_update.max_surge
    if _is_zero(max_unavailable) and _is_zero(max_surge):
        # The LeaderWorkerSet allows both at zero while replicas is 0 (upstream's ValidateCreate,
        # leaderworkerset_webhook.go); a
        # Deployment never does, so the apply failed until the set was deleted. With no group
        # to keep available, one unavailable group is the same rollout (found by the
        # bad-input fuzzing).
        max_unavailable = 1
    template = leader_pod_template(view, key)
    template["metadata"]["annotations"][GROUP_IDENTITY_ANNOTATION] = GROUP_IDENTITY_HASH
    pod_spec = dict(template.get("spec") or {})
    pod_spec.setdefault("subdomain", name)
    template["spec"] = pod_spec
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "name": name,
            "namespace": meta.get("namespace"),
            "labels": {**(meta.get("labels") or {}), NAME_LABEL: name,
                       TEMPLATE_REVISION_HASH_LABEL: key},
            "annotations": {**copied_annotations(view),
                            REPLICAS_ANNOTATION: str(view.replicas)},
            "ownerReferences": [lws_reference(view)],
        },
        "spec": {
            "replicas": view.replicas,
            "paused": view.paused,
            "revisionHistoryLimit": 0,
            "selector": {"matchLabels": {NAME_LABEL: name, WORKER_INDEX_LABEL: LEADER_INDEX}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {
                "maxUnavailable": max_unavailable, "maxSurge": max_surge}},
            "template": template,
        },
    }


# ------------------------------------------------------------------------------ group facts


def _key(pod: Mapping[str, Any]) -> str:
    return str(labels_of(pod).get(GROUP_KEY_LABEL) or "")


def _group(pod: Mapping[str, Any]) -> str:
    return group_index(pod) or ""


def _age_order(pod: Mapping[str, Any]) -> tuple[str, str]:
    meta = meta_of(pod)
    return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")


def tearing_down(pods: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """The groups tearing down, by group key, with their revision: some pod of the group still
    exists, and its leader is terminating or gone."""
    pods = list(pods)
    live_leaders = {_key(p) for p in pods if is_leader(p) and not deleting(p)}
    out: dict[str, str] = {}
    for pod in pods:
        key = _key(pod)
        if key and key not in live_leaders:
            out.setdefault(key, revision_of(pod))
    return out


@dataclass(frozen=True)
class Admission:
    """The gated leaders to ungate this pass, oldest first, and the restart counts to write
    first (None: leave the annotation alone)."""

    ungate: list[Mapping[str, Any]] = field(default_factory=list)
    counts: dict[str, int] | None = None
    waiting: int = 0  # gated leaders held back


def plan_admission(lws: LWS, pods: Iterable[Mapping[str, Any]],
                   counts: Mapping[str, int], current: str) -> Admission:
    """Which gated Hash leaders may schedule now (module docstring), and how restart counts
    move to them. ``current`` is the set's current revision key: a gated leader of another
    revision is outdated and never admitted (module docstring)."""
    pods = list(pods)
    leaders = [p for p in pods if is_leader(p) and not deleting(p)]
    gated_leaders = sorted((p for p in leaders if gated(p)), key=_age_order)
    held_on = lws_view(lws).paused  # a paused Deployment scales the ReplicaSets it has
    waiting = [p for p in gated_leaders if held_on or revision_of(p) == current]
    down = tearing_down(pods)
    retained = sum(1 for p in pods if is_leader(p) and exhausted(p))
    held = retained if immediate(lws) else max(len(down), retained)
    admissible = waiting[:max(0, len(waiting) - held)]
    replicas = spec_replicas(lws)
    ungated: dict[str, int] = {}
    for pod in leaders:
        if not gated(pod):
            ungated[revision_of(pod)] = ungated.get(revision_of(pod), 0) + 1
    admit: list[Mapping[str, Any]] = []
    for pod in admissible:
        revision = revision_of(pod)
        if ungated.get(revision, 0) >= replicas:
            continue  # a surplus surge leader: stays gated, removed first on scale-down
        ungated[revision] = ungated.get(revision, 0) + 1
        admit.append(pod)
    return Admission(admit, _moved_counts(counts, leaders, admit, down, gated_leaders),
                     len(gated_leaders) - len(admit))


def _moved_counts(counts: Mapping[str, int], leaders: list[Mapping[str, Any]],
                  admit: list[Mapping[str, Any]], down: Mapping[str, str],
                  waiting: list[Mapping[str, Any]]) -> dict[str, int] | None:
    """The counts after transferring orphaned ones to admitted leaders and dropping those that
    no replacement can claim any more; None when nothing changes."""
    if not counts:
        return None
    live_groups = {(revision_of(p), _group(p)) for p in leaders}
    orphans: dict[str, list[str]] = {}
    for entry in sorted(counts):
        revision, _, group = entry.partition("/")
        if (revision, group) not in live_groups:
            orphans.setdefault(revision, []).append(entry)
    if not orphans:
        return None
    moved = dict(counts)
    for pod in admit:
        pending = orphans.get(revision_of(pod))
        if pending:
            entry = pending.pop(0)
            moved[count_key(revision_of(pod), _group(pod))] = moved.pop(entry)
    still_waiting = {revision_of(p) for p in waiting if p not in admit}
    tearing = set(down.values())
    for revision, entries in orphans.items():
        if revision not in still_waiting and revision not in tearing:
            for entry in entries:
                moved.pop(entry, None)
    return moved if moved != dict(counts) else None


# ------------------------------------------------------------------------------ group-ready


@dataclass(frozen=True)
class GroupReadiness:
    """A leader whose ``group-ready`` condition must change to ``ready``."""

    leader: Mapping[str, Any]
    ready: bool


def _condition(pod: Mapping[str, Any]) -> str | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(condition, Mapping) and condition.get("type") == GROUP_READY_CONDITION:
            return str(condition.get("status"))
    return None


def _has_gate(pod: Mapping[str, Any]) -> bool:
    return any(isinstance(g, Mapping) and g.get("conditionType") == GROUP_READY_CONDITION
               for g in (pod.get("spec") or {}).get("readinessGates") or [])


def readiness_updates(leaders: Iterable[Mapping[str, Any]],
                      workers: Iterable[Mapping[str, Any]],
                      confirmed: Collection[str] = ()) -> list[GroupReadiness]:
    """The leaders whose ``group-ready`` condition differs from their worker StatefulSet's
    readiness (True while it is ready, False otherwise; only leaders with the gate), judged
    as group readiness is (``readiness.worker_statefulset_ready``, ``confirmed`` by pods)."""
    by_name = {str(meta_of(s).get("name")): s for s in workers}
    out: list[GroupReadiness] = []
    for leader in leaders:
        if deleting(leader) or not _has_gate(leader):
            continue
        sts = by_name.get(host_name(leader))
        ready = sts is not None and not deleting(sts) and worker_statefulset_ready(sts, confirmed)
        if _condition(leader) != ("True" if ready else "False"):
            if not ready and _condition(leader) is None:
                continue  # absent counts as not ready: nothing to write yet
            out.append(GroupReadiness(leader, ready))
    return out


def group_ready_condition(ready: bool, now: dt.datetime) -> dict[str, Any]:
    return {"type": GROUP_READY_CONDITION, "status": "True" if ready else "False",
            "lastTransitionTime": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "reason": "WorkersReady" if ready else "WorkersNotReady"}


# ------------------------------------------------------------------------------ retained groups


def release_scaled_down(lws: LWS, pods: Iterable[Mapping[str, Any]],
                        current_key: str) -> set[str]:
    """The group indices of retained (exhausted) groups to release: those of another revision
    than the current one (the rollout replaced them), and on scale-down the surplus of retained
    groups over the gated leaders of their revision left to hold back, oldest first, once the
    Deployment has all the live leaders it wants."""
    pods = list(pods)
    retained = sorted((p for p in pods if is_leader(p) and exhausted(p)), key=_age_order)
    if not retained:
        return set()
    leaders = [p for p in pods if is_leader(p) and not deleting(p)]
    out = {_group(p) for p in retained if revision_of(p) != current_key}
    current = [p for p in retained if revision_of(p) == current_key]
    gated_now = sum(1 for p in leaders if gated(p) and revision_of(p) == current_key)
    if len(leaders) >= spec_replicas(lws) and len(current) > gated_now:
        out |= {_group(p) for p in current[:len(current) - gated_now]}
    return out
