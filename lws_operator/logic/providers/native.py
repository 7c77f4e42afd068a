"""Native gang scheduling (``spec.scheduling``, ``logic.placement.gang``): Kubernetes' Workload and
PodGroup kinds (``scheduling.k8s.io/v1beta1``).

No member pod may exist before its Workload (and the whole-set PodGroup): until then the pass
ends after ``WorkloadSchedulingCreated=False`` is written, and looks again after
``SCHEDULING_RETRY`` seconds. Leaders carry a scheduling gate until their PodGroups exist; a
group whose workers joined another PodGroup than their leader's (upgrade skew) is recreated by
deleting its leader; PodGroups nothing needs any more are deleted. The facts of the condition
(``ok``, ``reason``, ``message``) are ``admit``'s value, which the pass hands to the status step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import (
    EVENT_ACTION_CREATE,
    EVENT_ACTION_DELETE,
    EVENT_TYPE_NORMAL,
    REASON_GROUPS_PROGRESSING,
    REASON_RECREATE_GROUP,
    SCHEDULING_LEVEL_LABEL,
)
from lws_operator.api.view import group_index
from lws_operator.logic.failures.restart import Recreation
from lws_operator.logic.failures.writes import delete_leader
from lws_operator.logic.hash_mode.hash_groups import Admission
from lws_operator.logic.objects.events import Event, failed_create
from lws_operator.logic.objects.meta import labels_of, meta_of, name_of
from lws_operator.logic.objects.owners import owned_by
from lws_operator.logic.placement import gang
from lws_operator.logic.placement.writes import ungate
from lws_operator.logic.reconcile.plan import (
    EMPTY,
    GONE_OR_CHANGED_SKIP,
    Action,
    Common,
    Create,
    Delete,
    Patch,
    Plan,
    Planned,
    Policy,
    Then,
    group,
)
from lws_operator.logic.reconcile.snapshot import Observed
from lws_operator.logic.status.writes import status_patch

API = gang.SCHEDULING_API_VERSION
SCHEDULING_RETRY = 10.0

Facts = dict[str, Any]


def _facts(ok: bool, reason: str, message: str) -> Facts:
    return {"ok": ok, "reason": reason, "message": message}


def not_ready(obs: Observed, facts: Facts) -> Plan:
    """The WorkloadSchedulingCreated condition alone (when it differs), and the pass ends."""
    observed: dict[str, Any] = obs.body.get("status") or {}
    status = gang.apply_condition(dict(observed), gang.scheduling_condition(
        observed.get("conditions") or [], now=obs.now, generation=obs.lws.generation, **facts))
    actions = () if status == observed else (status_patch(obs, status),)
    return Plan(actions, stop=True, requeue_after=SCHEDULING_RETRY)


def _source(obs: Observed) -> tuple[gang.Source | None, Facts | None, str]:
    """Where the PodGroups take their templates from, or the facts of why nothing may
    proceed; with the condition's message when all is well."""
    if not obs.options.native_scheduling:
        return None, _facts(False, gang.REASON_API_NOT_AVAILABLE,
                            "the API server does not serve scheduling.k8s.io/v1beta1 Workload "
                            "and PodGroup (enable the GenericWorkload feature gate)"), ""
    desired = gang.desired_workload(obs.body, obs.leaders)
    if desired is None:  # a parent controller owns the Workload
        source, why = gang.find_parent_workload(obs.body, obs.workloads.values())
        if source is None:
            return None, _facts(False, gang.REASON_PARENT_NOT_READY, why), ""
        return source, None, (f"PodGroups instantiate template {source.parent_template} of the "
                              f"parent's Workload {source.workload}")
    name = name_of(desired)
    return gang.Source(name), None, f"Workload {name} is created"


class NativeProvider:
    def prepare(self, obs: Observed) -> Plan:
        """The Workload: created, or its gang minimums brought up to date. A failure is
        collected for ``groups``, which ends the pass with it."""
        source, failure, _ = _source(obs)
        if failure is not None:
            return not_ready(obs, failure)
        desired = gang.desired_workload(obs.body, obs.leaders)
        if desired is None:
            return EMPTY
        assert source is not None
        name = name_of(desired)
        target = group(API, obs.lws.namespace, "workloads", "Workload")
        failed = failed_create(f"Failed to create Workload {name}: {{reason}}")
        live = obs.workloads.get(name)
        if live is None:
            created = Event(REASON_GROUPS_PROGRESSING, EVENT_TYPE_NORMAL, EVENT_ACTION_CREATE,
                            f"Created Workload {name}")
            return Plan((Create(target, desired, common=Common(events=(created,), policy=Policy(
                conflict=Then.SKIP, failure=failed, collect=True,
                reason_prefix=f"Workload {name}: "))),))
        if not owned_by(live, obs.body):
            return not_ready(obs, _facts(False, gang.REASON_WORKLOAD_CREATE_FAILED,
                                         f"Workload {name} exists but is not controlled by this "
                                         "LeaderWorkerSet"))
        patch = gang.workload_update(desired, live)
        if patch is None:
            return EMPTY
        return Plan((Patch(target, name, patch, common=Common(policy=Policy(
            conflict=Then.COLLECT, conflict_reason="conflict, retrying", failure=failed,
            collect=True, reason_prefix=f"Workload {name}: "))),))

    def groups(self, obs: Observed) -> Plan:
        """The PodGroups: created when missing (a failure is collected for ``admit``), the
        whole-set one's minCount kept up to date."""
        source, failure, _ = _source(obs)
        if failure is not None:
            return not_ready(obs, failure)
        if obs.collected:
            return not_ready(obs, _facts(False, gang.REASON_WORKLOAD_CREATE_FAILED,
                                         obs.collected[0]))
        assert source is not None
        existing = {name_of(g): g for g in obs.pod_groups}
        target = group(API, obs.lws.namespace, "podgroups", "PodGroup")
        actions: list[Action] = []
        for desired in gang.desired_pod_groups(obs.body, source, obs.leaders):
            name = name_of(desired)
            live = existing.get(name)
            if live is None:
                created = Event(REASON_GROUPS_PROGRESSING, EVENT_TYPE_NORMAL,
                                EVENT_ACTION_CREATE, f"Created PodGroup {name}")
                actions.append(Create(target, desired, common=Common(
                    events=(created,), policy=Policy(
                        conflict=Then.SKIP, collect=True, reason_prefix=f"{name}: ",
                        failure=failed_create(f"Failed to create PodGroup {name}: {{reason}}")))))
            elif (not meta_of(live).get("deletionTimestamp")
                  and labels_of(desired).get(SCHEDULING_LEVEL_LABEL) == "lws"
                  and gang.min_count_of(desired) != gang.min_count_of(live)
                  and gang.min_count_of(live) is not None):
                actions.append(Patch(target, name, {
                    "metadata": {"resourceVersion": meta_of(live).get("resourceVersion")},
                    "spec": {"schedulingPolicy": {"gang": {
                        "minCount": gang.min_count_of(desired)}}}}))
        return Plan(tuple(actions))

    def admit(self, obs: Observed, admission: Admission | None) -> Planned[Facts | None]:
        """Whether member pods may be created; the gates of the leaders whose PodGroups exist
        (of a Hash set, only those ``admission`` admits), mismatched groups recreated, stale
        PodGroups deleted. Its value: the facts of the condition."""
        source, failure, message = _source(obs)
        if failure is not None:
            return Planned(not_ready(obs, failure), None)
        assert source is not None
        existing = {name_of(g): g for g in obs.pod_groups}
        desired = [name_of(g) for g in gang.desired_pod_groups(obs.body, source, obs.leaders)]
        failed = [_failure(name, existing.get(name), obs.collected) for name in desired]
        reasons = [f for f in failed if f]
        ready = {n for n, g in existing.items() if not meta_of(g).get("deletionTimestamp")}
        if gang.level_of(obs.body) == "lws" and desired and desired[0] not in ready:
            return Planned(not_ready(obs, _facts(False, gang.REASON_POD_GROUP_CREATE_FAILED,
                                                 "; ".join(reasons))), None)
        workload = gang.workload_name(obs.body)
        actions: list[Action] = [
            ungate(leader) for leader in obs.leaders
            if gang.gated(leader) and not meta_of(leader).get("deletionTimestamp")
            and _may_ungate(obs, leader, admission)
            and set(gang.names_for_leader(obs.body, workload, leader)) <= ready]
        actions += [_recreate(obs, leader)
                    for leader in gang.mismatched_groups(obs.body, workload, list(obs.pods))]
        target = group(API, obs.lws.namespace, "podgroups", "PodGroup")
        actions += [Delete(target, name_of(stale), str(meta_of(stale).get("uid")), forget=stale,
                           common=Common(policy=GONE_OR_CHANGED_SKIP))
                    for stale in gang.stale_pod_groups(existing.values(), desired,
                                                       list(obs.pods))]
        facts = (_facts(False, gang.REASON_POD_GROUP_CREATE_FAILED, "; ".join(reasons))
                 if reasons else _facts(True, gang.REASON_CREATED, message))
        return Planned(Plan(tuple(actions)), facts)


def _failure(name: str, live: Mapping[str, Any] | None, collected: tuple[str, ...]) -> str:
    """Why PodGroup ``name`` is not there ('' when it is)."""
    found = next((c for c in collected if c.startswith(f"{name}: ")), None)
    if found is not None:
        return found
    if live is not None and meta_of(live).get("deletionTimestamp"):
        return f"{name} is still being deleted"
    return ""


def _may_ungate(obs: Observed, leader: Mapping[str, Any], admission: Admission | None) -> bool:
    """A Hash leader only once admitted (``logic.hash_mode.hash_groups``); an Ordinal one always."""
    if not obs.lws.hashed or admission is None:
        return True
    return str(meta_of(leader).get("uid")) in {str(meta_of(p).get("uid"))
                                                for p in admission.ungate}


def _recreate(obs: Observed, leader: Mapping[str, Any]) -> Delete:
    """Upgrade skew: a group whose workers joined another PodGroup than the leader's is
    recreated by deleting its leader, while none of its workers is scheduled."""
    name = name_of(leader)
    group_name = group_index(leader) or ""
    note = (f"Workers of leader pod {name} joined another PodGroup than the leader's; deleted "
            f"leader pod {name} to recreate group {group_name}")
    recreation = Recreation(leader=name, leader_uid=str(meta_of(leader).get("uid")),
                            trigger=name, group=group_name, why=note)
    return delete_leader(obs, recreation, (Event(REASON_RECREATE_GROUP, EVENT_TYPE_NORMAL,
                                                 EVENT_ACTION_DELETE, note),), leader)


PROVIDER = NativeProvider()
