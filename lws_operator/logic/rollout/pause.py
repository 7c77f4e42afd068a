"""Pause and resume a rollout (beyond upstream, which has neither: upstream issue #506).

``lws-operator.dev/paused: "true"`` on a LeaderWorkerSet holds its rollout where it stands, as
``spec.paused`` holds a Deployment's: an operator wants to look at the first upgraded groups
before the rest follow. Removing the annotation (or ``"false"``) resumes it. What a paused set
does, and why:

* **No further group is taken down or surged.** Ordinal groups: the leader StatefulSet's
  partition never falls and its replicas stay (:func:`hold`), whatever the pacing would do
  next; the surge already running stays (removing it would take a serving group down). Hash
  groups: the leader Deployment is paused itself (``logic.hash_mode``), so the Deployment
  controller starts no replacement.
* **Scaling still works**, as for a paused Deployment: a change of ``spec.replicas`` adds or
  removes groups (the highest ordinals, as a StatefulSet scales), keeping the surge as it is.
* **New groups are on the revision already running.** A paused Deployment whose template
  changed creates no new ReplicaSet, so a scale-up goes to the old ones; mid-rollout it scales
  old and new proportionally. A StatefulSet's partition cannot split the new ordinals between
  two revisions (ordinals at and above it take the update revision), so while a rollout is
  unfinished a scale-up raises the partition over the new ordinals: they start on the leader
  StatefulSet's current revision, the one known to work, and the rollout replaces them like
  any other group once resumed. At rest (every group on the current revision) the partition
  is left alone: both revisions are the same one.
* **A set paused before its template changes starts the new revision nowhere.** The revision
  is recorded as always (a ControllerRevision; the leader StatefulSet's template carries it, so
  its controller creates its own revision too), but the partition is set at the replicas, so
  no pod of the new revision is created, not even a surge; a group recreated meanwhile (a
  failure) comes back on the current revision, below the partition. Resuming starts the
  rollout exactly as an unpaused template change would have.
* A set created paused is created as usual: there is no earlier revision to hold it on.
* **The progress deadline does not run while paused** (``logic.rollout.deadline_step``), as a
  Deployment's does not; resuming restarts its clock (:func:`resumed_at`). A deadline exceeded
  before the pause is cleared by it: the rollout is judged afresh from the resume.
* **The status says so**: ``Progressing`` turns ``Unknown`` with reason ``RolloutPaused`` (a
  paused Deployment's ``Progressing`` is ``Unknown``, reason ``DeploymentPaused``) while an
  update is in progress, and ``True`` with reason ``RolloutResumed`` from the first pass after
  the resume until the update ends (or another overlay, a stall or the deadline, replaces it).
  That condition's time is the resume time the deadline counts from: no hidden memory
  (docs/architecture.md), an operator restart or a new leader reads the same. A Normal Event
  marks each change.

Other overlays on ``Progressing`` (``logic.rollout.stall``'s stall, the deadline) are not
decided while paused: a paused rollout is not expected to progress.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from lws_operator.api.constants import (
    CONDITION_PROGRESSING,
    CONDITION_UPDATE_IN_PROGRESS,
    EVENT_ACTION_UPDATE,
    EVENT_TYPE_NORMAL,
    PAUSED_ANNOTATION,
    REASON_ROLLOUT_PAUSED,
    REASON_ROLLOUT_RESUMED,
)
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import lws_view
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import epoch_seconds
from lws_operator.logic.rollout.pacing import RolloutDecision, RolloutSnapshot

PAUSED_MESSAGE = (f"Rollout paused ({PAUSED_ANNOTATION}): no group is replaced or surged "
                  "until it is resumed (kubectl lws rollout resume {name})")
RESUMED_MESSAGE = "Rollout resumed"


def paused(obj: LWS) -> bool:
    """Whether the set's rollout is paused (``api.view.paused``)."""
    return lws_view(obj).paused


def _recorded(snapshot: RolloutSnapshot) -> int | None:
    sts = snapshot.leader_sts
    raw = sts.replicas_annotation if sts is not None else None
    return int(raw) if raw is not None and raw.isdigit() else None


def hold(rollout: RolloutDecision, snapshot: RolloutSnapshot) -> RolloutDecision:
    """The leader StatefulSet's partition and replicas while paused (module docstring): the
    replicas stay unless ``spec.replicas`` changed (then the new count plus the surge already
    running, no new one); the partition never falls, covers every ordinal when a new revision
    starts, and covers the new ordinals of a scale-up while a rollout is unfinished. The
    Events of moves not made are dropped."""
    sts = snapshot.leader_sts
    if sts is None:
        return rollout  # a new set: nothing to hold
    recorded = _recorded(snapshot)
    surge = max(0, sts.replicas - recorded) if recorded is not None else 0
    scaled = (recorded if recorded is not None else sts.replicas) != snapshot.replicas
    # Scaled: the new count, with the surge still running kept on top (never a new one: a
    # scale-up's ordinals take the surge's place, as upstream's pacing does).
    replicas = max(snapshot.replicas, min(sts.replicas, snapshot.replicas + surge)) if scaled \
        else sts.replicas
    partition = max(sts.partition, snapshot.lws_partition)
    unfinished = not all(state.updated for state in snapshot.groups[:sts.replicas])
    if snapshot.lws_updated or (unfinished and replicas > sts.replicas):
        partition = max(partition, replicas)
    if (partition, replicas) == (rollout.partition, rollout.replicas):
        return rollout
    return replace(rollout, partition=partition, replicas=replicas, events=(),
                   events_after_apply=())


def _progressing(conditions: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == CONDITION_PROGRESSING), None)


def _reason(status: Mapping[str, Any] | None) -> str | None:
    cond = _progressing((status or {}).get("conditions") or [])
    return None if cond is None else cond.get("reason")


def resumed_at(status: Mapping[str, Any] | None, now: float) -> float | None:
    """When the rollout of a set that is not paused now was last resumed, from its observed
    status: ``now`` when it still says ``RolloutPaused`` (this is the first pass since), the
    time of ``RolloutResumed`` while that stands; None otherwise."""
    cond = _progressing((status or {}).get("conditions") or [])
    if cond is None:
        return None
    if cond.get("reason") == REASON_ROLLOUT_PAUSED:
        return now
    if cond.get("reason") == REASON_ROLLOUT_RESUMED:
        return epoch_seconds(cond.get("lastTransitionTime"))
    return None


def apply_pause(desired: dict[str, Any], observed: Mapping[str, Any] | None, is_paused: bool,
                name: str, now: str) -> tuple[dict[str, Any], tuple[Event, ...]]:
    """Overlay ``Progressing`` on the desired status while an update is in progress:
    ``Unknown/RolloutPaused`` while paused, ``True/RolloutResumed`` after (module docstring).
    The time and message are kept while the reason stands; a Normal Event when it starts."""
    conditions = [dict(c) for c in desired.get("conditions") or []]
    updating = any(c.get("type") == CONDITION_UPDATE_IN_PROGRESS and c.get("status") == "True"
                   for c in conditions)
    before = _progressing((observed or {}).get("conditions") or [])
    was = None if before is None else before.get("reason")
    if not updating or not (is_paused or was in (REASON_ROLLOUT_PAUSED, REASON_ROLLOUT_RESUMED)):
        return desired, ()
    if is_paused:
        status, reason, text = "Unknown", REASON_ROLLOUT_PAUSED, PAUSED_MESSAGE.format(name=name)
    else:
        status, reason, text = "True", REASON_ROLLOUT_RESUMED, RESUMED_MESSAGE
    kept = before is not None and was == reason
    for cond in conditions:
        if cond.get("type") == CONDITION_PROGRESSING:
            cond.update(status=status, reason=reason, message=text, lastTransitionTime=now)
            if kept and before is not None:
                cond["lastTransitionTime"] = before.get("lastTransitionTime") or now
    out = {**desired, "conditions": conditions}
    if kept:
        return out, ()
    return out, (Event(reason, EVENT_TYPE_NORMAL, EVENT_ACTION_UPDATE, text),)
