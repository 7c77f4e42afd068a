"""The readiness facts of a snapshot that several steps read, derived once for the same objects
(``logic.reconcile.memo``)."""

from __future__ import annotations

from lws_operator.logic.reconcile.snapshot import Observed
from lws_operator.logic.status.readiness import confirmed_by_pods


def confirmed_workers(obs: Observed) -> frozenset[str]:
    """The names of the set's StatefulSets that its pods show ready before their status does
    (``readiness.confirmed_by_pods``): empty unless a StatefulSet is not ready by its status,
    and compared by value in memo keys, so a worker's change that confirms nothing new keeps
    what was derived from it."""
    return obs.memo.get("confirmed workers", (obs.statefulsets, obs.pods),
                        lambda: confirmed_by_pods(obs.statefulsets, obs.pods))
