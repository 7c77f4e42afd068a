"""Step: let retained pods go (``logic.failures.restart_budget.plan_release``): clear the counts of
recovered groups, then remove our cleanup finalizer; the pass ends there (the watch events
of those writes bring the next one)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import EVENT_ACTION_DELETE, EVENT_TYPE_NORMAL
from lws_operator.logic.failures.restart_budget import (
    REASON_GROUP_RECOVERED,
    Release,
    read_counts,
    without_finalizer,
)
from lws_operator.logic.failures.writes import counts_patch
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import meta_of, name_of
from lws_operator.logic.reconcile.plan import (
    Action,
    Common,
    Patch,
    Plan,
    Policy,
    Record,
    Then,
    core,
)
from lws_operator.logic.reconcile.snapshot import Observed

# A pod gone is released; a pod changed since is released by a pass soon after.
_FINALIZER = Policy(not_found=Then.SKIP, conflict=Then.REQUEUE)


def release_plan(obs: Observed | None, release: Release) -> Plan:
    """The writes of ``release``; ``obs`` is None once the LeaderWorkerSet is gone (no counts
    to clear, nothing to record an Event on)."""
    actions: list[Action] = []
    if obs is not None and release.clear_counts:
        counts = read_counts(obs.body)
        remaining = {k: v for k, v in counts.items() if k not in release.clear_counts}
        if remaining != counts:
            actions.append(counts_patch(obs, remaining))
    actions += [_without_finalizer(pod) for pod in release.pods]
    if obs is not None:
        actions += [Record(Event(
            REASON_GROUP_RECOVERED, EVENT_TYPE_NORMAL, EVENT_ACTION_DELETE,
            f"Recovering group of leader pod {leader}: restart count cleared, retained pods "
            "released")) for leader in release.recovered]
    return Plan(tuple(actions), stop=True)


def _without_finalizer(pod: Mapping[str, Any]) -> Patch:
    meta = meta_of(pod)
    return Patch(core(str(meta.get("namespace")), "pods", "Pod"), name_of(pod),
                 {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                               "finalizers": without_finalizer(pod) or None}},
                 common=Common(policy=_FINALIZER))
