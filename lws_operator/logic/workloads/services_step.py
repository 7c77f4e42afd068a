"""Step: the headless Services (upstream's pod Reconcile (pod_controller.go), the LWS docs'
subdomain policy): the shared one named
after the set, or one per replica named after its leader's host name, created when absent. A
leader being deleted or still gated gets none yet."""

from __future__ import annotations

from lws_operator.logic.objects.events import failed_create
from lws_operator.logic.objects.meta import host_name, meta_of
from lws_operator.logic.placement import gang
from lws_operator.logic.reconcile.plan import (
    CREATE_IF_ABSENT,
    Action,
    Common,
    Create,
    Plan,
    Policy,
    Then,
    core,
)
from lws_operator.logic.reconcile.snapshot import Observed
from lws_operator.logic.workloads.services import (
    replica_service,
    shared_service,
    wants_replica_service,
    wants_shared_service,
)


def step(obs: Observed) -> Plan:
    target = core(obs.lws.namespace, "services", "Service")
    actions: list[Action] = []
    if wants_shared_service(obs.body) and obs.lws.name not in obs.services:
        failure = failed_create("Failed to create headless service for error: {reason}")
        actions.append(Create(target, shared_service(obs.body), common=Common(
            policy=Policy(conflict=Then.SKIP, failure=failure))))
    if wants_replica_service(obs.body):
        actions += [Create(target, replica_service(obs.body, pod),
                           common=Common(policy=CREATE_IF_ABSENT))
                    for pod in obs.leaders
                    if not (meta_of(pod).get("deletionTimestamp") or gang.gated(pod)
                            or host_name(pod) in obs.services)]
    return Plan(tuple(actions))
