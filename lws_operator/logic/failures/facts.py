"""The failure facts of a snapshot, judged once per pod object: the steps of several features
read them (``logic.reconcile.memo.Memo.select`` keeps a judgement while the pod is the same
object, so the snapshots of a set built over the same pods share it)."""

from __future__ import annotations

from lws_operator.logic.failures.restart import failure_trigger
from lws_operator.logic.failures.restart_budget import exhausted, is_retained
from lws_operator.logic.reconcile.snapshot import Obj, Observed


def failure_triggers(obs: Observed) -> tuple[Obj, ...]:
    """The ``pods`` that restarted or are deleting (``restart.failure_trigger``)."""
    return obs.memo.select("failure triggers", obs.pods, failure_trigger)


def retained_pods(obs: Observed) -> tuple[Obj, ...]:
    """The ``pods`` our cleanup finalizer retains (``restart_budget.is_retained``)."""
    return obs.memo.select("retained", obs.pods, is_retained)


def exhausted_leaders(obs: Observed) -> tuple[Obj, ...]:
    """The leaders marked as having exhausted their group's restart budget
    (``restart_budget.exhausted``), judged once per leader object: the same tuple while the
    leaders are the same objects."""
    return obs.memo.select("exhausted leaders", obs.leader_pods, exhausted)
