"""Whether a set's rollout is complete, still going (and how far), paused, or failed: the pure half
of ``kubectl lws rollout status``, judged from what the API holds, as ``kubectl rollout status``
judges a Deployment from its status.

A LeaderWorkerSet (:func:`lws_verdict`):

* the controller has not observed the latest spec yet (``status.observedGeneration`` below
  ``metadata.generation``): progressing, whatever the rest says (it describes the old spec);
* ``Progressing=False`` with reason ``ProgressDeadlineExceeded`` (the operator's progress
  deadline, ``logic.rollout.deadline``): failed. So is a rollback the operator made on that
  deadline while we watched (the ``rolled-back-from`` annotation changed): the rollout that
  was asked for will not happen, even though the set then rolls back to a Ready revision;
* paused (the ``lws-operator.dev/paused: "true"`` annotation, or ``Progressing`` with reason
  ``RolloutPaused``): paused, and the caller keeps waiting, as kubectl does for a paused
  Deployment;
* ``Available=True``: complete (the controller sets it only once every group below
  ``spec.replicas`` is Ready and, from the partition up, updated; the counters may lag it by a
  few seconds, the conditions never do);
* otherwise progressing, with kubectl's three messages in its order (groups not updated yet,
  old groups still to go, updated groups not Ready) and the leader workload's step.

A DisaggregatedSet (:func:`ds_verdict`) is complete on ``Available=True`` at the observed
generation; its progress is per role (``status.roleStatuses``) and per slice (the coordinated
rollout's step, ``plugin.analysis.ds_rollout``); a child LeaderWorkerSet of the target revision
held at its own progress deadline fails it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from lws_operator.api.constants import (
    CONDITION_AVAILABLE,
    CONDITION_PROGRESSING,
    REASON_PROGRESS_DEADLINE_EXCEEDED,
    REASON_ROLLOUT_PAUSED,
    ROLLED_BACK_FROM_ANNOTATION,
)
from lws_operator.api.disaggregated import DisaggregatedSetView
from lws_operator.api.view import LeaderWorkerSetView, StatefulSetView, lws_view
from lws_operator.api.view import paused as is_paused
from lws_operator.plugin.analysis.ds_rollout import SliceRollout, progress_line

State = Literal["complete", "progressing", "paused", "failed"]
COMPLETE: Final[State] = "complete"
PROGRESSING: Final[State] = "progressing"
PAUSED: Final[State] = "paused"
FAILED: Final[State] = "failed"
Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Verdict:
    """Where the rollout stands: ``state`` and the line to print (kubectl's wording where
    kubectl has one). ``details``: further lines (a DisaggregatedSet's roles and slices)."""

    state: State
    message: str
    details: tuple[str, ...] = ()

    @property
    def finished(self) -> bool:
        """Whether waiting longer can change nothing: complete or failed."""
        return self.state in (COMPLETE, FAILED)


def condition(obj: Obj, kind: str) -> Mapping[str, Any] | None:
    for cond in (obj.get("status") or {}).get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def _true(obj: Obj, kind: str) -> bool:
    cond = condition(obj, kind)
    return cond is not None and cond.get("status") == "True"


def _count(status: Mapping[str, Any], key: str) -> int:
    value = status.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def observed_generation(obj: Obj) -> int | None:
    """``status.observedGeneration``; for a status written without it (the upstream controller
    writes none for a LeaderWorkerSet) the highest of its conditions'; None when neither says."""
    status = obj.get("status") or {}
    value = status.get("observedGeneration")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    seen: list[int] = [c["observedGeneration"] for c in status.get("conditions") or ()
                       if isinstance(c, Mapping) and isinstance(c.get("observedGeneration"), int)]
    return max(seen) if seen else None


def paused(obj: Obj) -> bool:
    """Held by the user: the annotation (``api.view.paused``), or the controller's
    ``RolloutPaused`` reason still standing."""
    cond = condition(obj, CONDITION_PROGRESSING)
    return is_paused(obj) or (cond is not None and cond.get("reason") == REASON_ROLLOUT_PAUSED)


def deadline_exceeded(obj: Obj) -> Mapping[str, Any] | None:
    """The ``Progressing=False/ProgressDeadlineExceeded`` condition, when the set has it."""
    cond = condition(obj, CONDITION_PROGRESSING)
    if cond is not None and cond.get("status") == "False" \
            and cond.get("reason") == REASON_PROGRESS_DEADLINE_EXCEEDED:
        return cond
    return None


def rolled_back_from(obj: Obj) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(ROLLED_BACK_FROM_ANNOTATION)
    return str(value) if value else None


def lws_step(view: LeaderWorkerSetView, workload: Obj | None) -> str:
    """The leader workload's step, which moves group by group while the set's own counters are
    written in batches: an Ordinal set's leader StatefulSet partition (groups from it up are on
    the new revision), surge and leader pods updated and ready; a Hash set's leader
    Deployment's updated groups."""
    if workload is None:
        return ""
    status = workload.get("status") or {}
    if view.hashed:
        return (f"leader Deployment: {_count(status, 'updatedReplicas')} updated, "
                f"{_count(status, 'replicas')} groups")
    sts = StatefulSetView.of(workload)
    surge = sts.replicas - view.replicas
    text = f"partition {sts.partition}"
    if surge > 0:
        text += f", {surge} surge group{'s' if surge != 1 else ''}"
    return (text + f": {_count(status, 'updatedReplicas')} of {sts.replicas} leader pods "
            f"updated, {_count(status, 'readyReplicas')} ready")


def lws_verdict(lws: Obj, workload: Obj | None = None,
                rolled_back_before: str | None = None) -> Verdict:
    """A LeaderWorkerSet's rollout (module docstring). ``workload``: its leader StatefulSet
    (Ordinal) or Deployment (Hash), for the step; ``rolled_back_before``: the
    ``rolled-back-from`` annotation when the watch began."""
    view = lws_view(lws)
    what = f'leaderworkerset "{view.name}"'
    observed = observed_generation(lws)
    if observed is None or observed < view.generation:
        return Verdict(PROGRESSING, f"Waiting for {what} spec update to be observed...")
    exceeded = deadline_exceeded(lws)
    if exceeded is not None:
        return Verdict(FAILED, f"{what} exceeded its progress deadline: "
                       f"{exceeded.get('message') or ''}".rstrip(": "))
    bad = rolled_back_from(lws)
    if bad is not None and bad != rolled_back_before:
        return Verdict(FAILED, f"{what} was rolled back by the operator: revision {bad} made "
                       "no progress by its deadline")
    status = lws.get("status") or {}
    replicas, updated = view.replicas, _count(status, "updatedReplicas")
    ready, total = _count(status, "readyReplicas"), _count(status, "replicas")
    step = lws_step(view, workload)
    suffix = f" ({step})" if step else ""
    if paused(lws):
        return Verdict(PAUSED, f"{what} rollout is paused: {min(updated, replicas)} of "
                       f"{replicas} groups updated, {ready} ready{suffix}; resume it with "
                       f"`kubectl lws rollout resume {view.name}`")
    if _true(lws, CONDITION_AVAILABLE):
        partition = view.rolling_update.partition
        staged = (f" (partitioned: groups from {partition} on are updated)"
                  if partition > 0 and not view.hashed else "")
        return Verdict(COMPLETE, f"{what} successfully rolled out{staged}")
    waiting = f"Waiting for {what} rollout to finish: "
    if updated < replicas:
        return Verdict(PROGRESSING, waiting + f"{updated} out of {replicas} groups have been "
                       f"updated{suffix}...")
    if total > updated:
        return Verdict(PROGRESSING, waiting + f"{total - updated} old groups are pending "
                       f"termination{suffix}...")
    return Verdict(PROGRESSING, waiting + f"{ready} of {updated} updated groups are "
                   f"ready{suffix}...")


def role_line(entry: Mapping[str, Any], want: int) -> str:
    """One role of ``status.roleStatuses`` against the groups it wants (all slices)."""
    return (f"{entry.get('name')}: {_count(entry, 'updatedReplicas')} of {want} groups "
            f"updated, {_count(entry, 'readyReplicas')} ready, {_count(entry, 'replicas')} "
            "in all")


def ds_verdict(ds: Obj, wants: Mapping[str, int], rollouts: Sequence[SliceRollout] = (),
               children: Sequence[Obj] = ()) -> Verdict:
    """A DisaggregatedSet's coordinated rollout. ``wants``: each spec role's groups over every
    slice (its target times the slices); ``rollouts``: each slice's rollout
    (``ds_rollout.slice_rollout``); ``children``: its child LeaderWorkerSets at the target
    revision (one held at its own progress deadline fails the set)."""
    view = DisaggregatedSetView.of(ds)
    what = f'disaggregatedset "{view.name}"'
    observed = observed_generation(ds)
    if observed is None or observed < view.generation:
        return Verdict(PROGRESSING, f"Waiting for {what} spec update to be observed...")
    for child in children:
        exceeded = deadline_exceeded(child)
        if exceeded is not None:
            name = (child.get("metadata") or {}).get("name")
            return Verdict(FAILED, f"{what}: leaderworkerset {name} exceeded its progress "
                           f"deadline: {exceeded.get('message') or ''}".rstrip(": "))
    statuses = {str(e.get("name")): e for e in (ds.get("status") or {}).get("roleStatuses") or ()
                if isinstance(e, Mapping)}
    roles = tuple(role_line(statuses.get(r.name, {"name": r.name}), wants.get(r.name, 0))
                  for r in view.roles)
    slices = tuple(progress_line(r) for r in rollouts if r.in_progress)
    if paused(ds):
        return Verdict(PAUSED, f"{what} rollout is paused; resume it with "
                       f"`kubectl lws rollout resume {view.name}`", roles + slices)
    if _true(ds, CONDITION_AVAILABLE):
        return Verdict(COMPLETE, f"{what} successfully rolled out")
    return Verdict(PROGRESSING, f"Waiting for {what} rollout to finish...", roles + slices)
