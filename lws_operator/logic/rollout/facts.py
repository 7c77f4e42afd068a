"""The stall facts of a snapshot, judged once per pod object (``logic.reconcile.memo.Memo.
select``: kept while the pod is the same object)."""

from __future__ import annotations

from lws_operator.logic.reconcile.snapshot import Obj, Observed
from lws_operator.logic.rollout.stall import unschedulable


def unschedulable_pods(obs: Observed) -> tuple[Obj, ...]:
    """The ``pods`` the scheduler could not place (``stall.unschedulable``)."""
    return obs.memo.select("unschedulable", obs.pods, unschedulable)
