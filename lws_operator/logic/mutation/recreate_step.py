"""Step: recreate the set's unmutated pods once the pod webhook serves them
(``logic.mutation.recreation`` decides which group, if any): delete them with UID preconditions, so
their StatefulSet creates them again through the webhook. The decision's state goes into the
set's ``Memory`` (``Remember``) and, with when to look again, to the status step, whose
condition message reads its note (the step's value, ``Recreating``)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from lws_operator.logic.mutation import recreation
from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.logic.reconcile.plan import (
    EMPTY,
    GONE_OR_CHANGED_SKIP,
    Action,
    Common,
    Delete,
    Plan,
    Planned,
    Record,
    core,
)
from lws_operator.logic.reconcile.snapshot import Observed, Recreation, Remember


@dataclass(frozen=True)
class Recreating:
    """The recreation's state after this pass (None: none), and when it asks to look again."""

    state: Recreation | None = None
    requeue: float | None = None


NOTHING = Recreating()


def step(obs: Observed) -> Planned[Recreating]:
    held = obs.memory.recreation
    unmutated = obs.unmutated_pods
    if not unmutated and held is None:
        return Planned(EMPTY, NOTHING)  # nearly every pass: every pod admitted, none held
    key = (obs.lws.namespace, obs.lws.name)
    others = len(obs.options.recreating - {key})
    decision = recreation.decide(obs.lws.namespace, obs.lws.name, unmutated, obs.all_pods,
                                 obs.statefulsets, obs.options.pod_webhook, held, others,
                                 obs.clock)
    target = core(obs.lws.namespace, "pods", "Pod")
    actions: list[Action] = []
    for i, pod in enumerate(decision.delete):
        actions.append(Delete(
            target, name_of(pod), str(meta_of(pod).get("uid")),
            common=Common(
                events=decision.events if i == 0 else (), policy=GONE_OR_CHANGED_SKIP,
                log=(f"deleting pod {name_of(pod)} (created without the pod webhook) so that "
                     "its StatefulSet recreates it through the webhook"),
                group=decision.group)))
    if not decision.delete:
        actions.extend(Record(e) for e in decision.events)
    value = Recreating(decision.state, decision.requeue_after)
    if decision.state == held:
        return Planned(Plan(tuple(actions)), value)
    # Kept for the next passes, and the sets in flight (``controllers.leaderworkerset``).
    remember = Remember(replace(obs.memory, recreation=decision.state))
    return Planned(Plan(tuple(actions), carry=remember), value)
