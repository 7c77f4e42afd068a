"""Step: a worker StatefulSet for every leader pod that needs one (upstream's pod Reconcile
(pod_controller.go)).

Exclusive placement puts a group's workers in its leader's topology domain, which is a label
of the leader's node; no cache holds nodes (watching every node would cost more than the one
GET per new group), so the step asks the runner to read the nodes it lacks
(``logic.reconcile.plan.Read``) and is asked again with them. The request is the one the controller
always made, per leader that gets a worker StatefulSet in this pass; it is made before the creates
instead of between them. The set's revisions are handed over by the pass (the revision step's);
a leader whose revision is not among them yet is looked at again shortly, which the step's value
asks of the status step.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import (
    EVENT_ACTION_CREATE,
    EVENT_TYPE_NORMAL,
    REASON_GROUPS_PROGRESSING,
)
from lws_operator.api.view import group_index, revision_of
from lws_operator.logic.identity.history import revision_for_key
from lws_operator.logic.identity.revision import apply_revision
from lws_operator.logic.objects.events import Event, failed_create
from lws_operator.logic.objects.meta import host_name, labels_of, meta_of, name_of
from lws_operator.logic.placement import gang
from lws_operator.logic.reconcile.plan import (
    EMPTY,
    Action,
    Common,
    Create,
    Plan,
    Planned,
    Policy,
    Read,
    Then,
    apps,
)
from lws_operator.logic.reconcile.snapshot import Obj, Observed
from lws_operator.logic.status.readiness import containers_ready, pod_ready
from lws_operator.logic.workloads.statefulsets import exclusive_topology_key, worker_statefulset

MISSING_REVISION_REQUEUE = 1.0


def node_path(name: str) -> str:
    return f"/api/v1/nodes/{name}"


def _ready_to_start(obs: Observed, pod: Obj) -> bool:
    """LeaderReady: a leader's workers wait for it (a Hash leader's group-ready gate waits
    for its workers, so there its containers must be ready instead)."""
    if obs.lws.startup_policy != "LeaderReady":
        return True
    return containers_ready(pod) if obs.lws.hashed else pod_ready(pod)


NOTHING: Planned[float | None] = Planned(EMPTY, None)


def step(obs: Observed, revisions: tuple[Mapping[str, Any], ...]) -> Planned[float | None]:
    if obs.lws.size == 1:
        return NOTHING
    existing = {name_of(s) for s in obs.statefulsets}
    exclusive = exclusive_topology_key(obs.body) is not None
    actions: list[Action] = []
    reads: list[Read] = []
    requeue: float | None = None
    for pod in obs.leaders:
        pod_name = name_of(pod)
        if meta_of(pod).get("deletionTimestamp") or host_name(pod) in existing:
            continue
        if gang.gated(pod) or not _ready_to_start(obs, pod):
            continue  # its PodGroups first (the gate is lifted once they exist), or LeaderReady
        revision = revision_for_key(revisions, revision_of(pod))
        if revision is None:
            requeue = MISSING_REVISION_REQUEUE
            continue
        node_labels: dict[str, str] | None = None
        if exclusive:
            node = (pod.get("spec") or {}).get("nodeName")
            if not node:
                continue  # placed once the leader is scheduled (its update wakes us)
            fetched = obs.fetched.get(node_path(str(node)))
            if fetched is None:
                reads.append(Read(node_path(str(node))))
                continue
            node_labels = dict(labels_of(fetched))
        revision_lws = apply_revision(obs.body, dict(revision.get("data") or {}))
        body = worker_statefulset(revision_lws, obs.body, pod, node_labels)
        actions.append(Create(
            apps(obs.lws.namespace, "statefulsets", "StatefulSet"), body, common=Common(
                events=(Event(REASON_GROUPS_PROGRESSING, EVENT_TYPE_NORMAL, EVENT_ACTION_CREATE,
                              f"Created worker statefulset for leader pod {pod_name}"),),
                related=pod, group=group_index(pod),
                policy=Policy(conflict=Then.SKIP, failure=failed_create(
                    f"Failed to create worker statefulset for leader pod {pod_name}: "
                    "{reason}")))))
    if reads:
        return Planned(Plan(reads=tuple(reads)), None)
    return Planned(Plan(tuple(actions)), requeue)
