"""Steps of Hash group identity only (``logic.hash_mode.hash_groups``); the pass runs them for
Hash sets alone.

* ``admit``: the restart counts that move to admitted leaders, then (without native gang
  scheduling, whose provider lifts gates once the PodGroups exist) the gates of the leaders
  admitted by the Hash ``prepare`` of ``logic.rollout.leader_step``, which the pass hands over.
* ``readiness``: each gated leader's ``group-ready`` condition follows its worker StatefulSet
  (strategic merge on the status subresource: the other conditions are the kubelet's).
"""

from __future__ import annotations

from lws_operator.logic.failures.writes import counts_patch
from lws_operator.logic.hash_mode.hash_groups import (
    Admission,
    group_ready_condition,
    readiness_updates,
)
from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.logic.placement import gang
from lws_operator.logic.placement.writes import ungate
from lws_operator.logic.reconcile.plan import (
    GONE_OR_CHANGED_SKIP,
    Action,
    Common,
    Patch,
    Plan,
    core,
)
from lws_operator.logic.reconcile.snapshot import Observed
from lws_operator.logic.status.facts import confirmed_workers


def admit(obs: Observed, admission: Admission) -> Plan:
    actions: list[Action] = []
    if admission.counts is not None:
        actions.append(counts_patch(obs, admission.counts))
    if gang.level_of(obs.body) is None:
        actions += [ungate(dict(leader)) for leader in admission.ungate]
    return Plan(tuple(actions))


def readiness(obs: Observed) -> Plan:
    return Plan(tuple(
        Patch(core(str(meta_of(change.leader).get("namespace")), "pods", "Pod"),
              name_of(change.leader),
              {"metadata": {"resourceVersion": meta_of(change.leader).get("resourceVersion")},
               "status": {"conditions": [group_ready_condition(change.ready, obs.moment)]}},
              strategic=True, subresource="status", common=Common(policy=GONE_OR_CHANGED_SKIP))
        for change in readiness_updates(obs.leaders, obs.statefulsets,
                                        confirmed_workers(obs))))
