"""Rollout stall detection: a rollout that cannot progress says so (beyond upstream).

The resource deadlock of upstream issue #717 and the LWS docs' "Combined Template
Update and Scale-Up": halving per-group resources while scaling up on a full
cluster leaves the new groups Pending because the old groups hold the capacity, while the
controller waits for a new group to be ready before it replaces an old one. Upstream reports
nothing; the LeaderWorkerSet just stays ``Progressing``. Here, when a rollout is in progress and
pods of the current revision have been unschedulable for longer than a grace period, the
``Progressing`` condition turns ``False`` with reason ``RolloutStalled`` and a Warning Event names
the cause and the LWS docs' two remedies. A normal slow rollout has no unschedulable pod, so it
raises no alarm; a pod briefly unschedulable (a gang forming, capacity about to free up) is
covered by the grace period.

The stall is an overlay on the status upstream's updateStatus (leaderworkerset_controller.go)
computes: :func:`unstall_view` hides our own
``RolloutStalled`` from that computation (so it neither flaps nor emits its events again), and
:func:`apply_stall` puts it back when the stall persists.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.api.constants import (
    CONDITION_PROGRESSING,
    CONDITION_UPDATE_IN_PROGRESS,
    EVENT_ACTION_UPDATE,
    EVENT_TYPE_WARNING,
    MESSAGE_GROUPS_PROGRESSING,
    REASON_GROUPS_PROGRESSING,
    REASON_PROGRESS_DEADLINE_EXCEEDED,
    REASON_ROLLOUT_PAUSED,
    REASON_ROLLOUT_RESUMED,
    REASON_ROLLOUT_STALLED,
)
from lws_operator.api.view import deleting, revision_of
from lws_operator.logic.mutation.unmutated import REASON_PODS_NOT_MUTATED
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import epoch_seconds, meta_of

# The overlays on ``Progressing``: ours, the unmutated pods', the progress deadline's
# (``logic.rollout.deadline``) and the pause's (``logic.rollout.pause``).
_OVERLAYS = frozenset({REASON_ROLLOUT_STALLED, REASON_PODS_NOT_MUTATED,
                       REASON_PROGRESS_DEADLINE_EXCEEDED, REASON_ROLLOUT_PAUSED,
                       REASON_ROLLOUT_RESUMED})
DEFAULT_GRACE_SECONDS = 60.0


def _unschedulable_since(pod: Mapping[str, Any]) -> tuple[float, str] | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if (cond.get("type") == "PodScheduled" and cond.get("status") == "False"
                and cond.get("reason") == "Unschedulable"):
            since = epoch_seconds(cond.get("lastTransitionTime"))
            if since is not None:
                return since, str(cond.get("message") or "")
    return None


def unschedulable(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` reports the scheduler could not place it, since a known time (what
    ``find_stall`` reads of a pod beyond its revision and deletion)."""
    return _unschedulable_since(pod) is not None


@dataclass(frozen=True)
class Stall:
    """Unschedulable pods of the current revision: those past the grace period (stalled), and
    the seconds until the next one gets there (when to look again)."""

    stalled: tuple[tuple[str, str], ...]  # (pod name, scheduler message)
    recheck_after: float | None


NO_STALL = Stall((), None)


def find_stall(pods: Iterable[Mapping[str, Any]], current_key: str, now: float,
               grace: float = DEFAULT_GRACE_SECONDS) -> Stall:
    stalled: list[tuple[str, str]] = []
    recheck: float | None = None
    for pod in pods:
        if deleting(pod) or revision_of(pod) != current_key:
            continue
        found = _unschedulable_since(pod)
        if found is None:
            continue
        since, message = found
        remaining = since + grace - now
        if remaining <= 0:
            stalled.append((str(meta_of(pod).get("name")), message))
        else:
            recheck = remaining if recheck is None else min(recheck, remaining)
    return Stall(tuple(sorted(stalled)), recheck)


def stall_message(stall: Stall) -> str:
    name, reason = stall.stalled[0]
    count = len(stall.stalled)
    return (
        f"Rollout stalled: {count} pod{'s' if count != 1 else ''} of the new revision cannot be "
        f"scheduled (e.g. {name}: {reason or 'Unschedulable'}) while the groups not yet replaced "
        "hold the capacity. Update in two steps (first the template with the smaller resource "
        "request, then spec.replicas), or raise maxUnavailable above the scale-up delta "
        "(in Ordinal mode 100% recovers in one step)."
    )


def _progressing(conditions: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == CONDITION_PROGRESSING), None)


def unstall_view(status: Mapping[str, Any] | None) -> dict[str, Any]:
    """The observed status with our ``RolloutStalled`` (or ``PodsNotMutated``, the overlay of
    ``logic.mutation.unmutated``, ``ProgressDeadlineExceeded``, ``logic.rollout.deadline``'s, or
    ``RolloutPaused``/``RolloutResumed``, ``logic.rollout.pause``'s) shown as the
    ``Progressing=True`` it overrides, for upstream's updateStatus computation."""
    view = dict(status or {})
    conditions = [dict(c) for c in view.get("conditions") or []]
    for cond in conditions:
        if cond.get("type") == CONDITION_PROGRESSING and cond.get("reason") in _OVERLAYS:
            cond.update(status="True", reason=REASON_GROUPS_PROGRESSING,
                        message=MESSAGE_GROUPS_PROGRESSING)
    if conditions:
        view["conditions"] = conditions
    return view


def apply_stall(desired: dict[str, Any], observed: Mapping[str, Any] | None, stall: Stall,
                now: str) -> tuple[dict[str, Any], tuple[Event, ...]]:
    """Overlay the stall on the desired status: ``Progressing=False/RolloutStalled`` while a
    rollout is in progress and pods are stalled; the Warning Event only when it starts."""
    conditions = [dict(c) for c in desired.get("conditions") or []]
    updating = any(c.get("type") == CONDITION_UPDATE_IN_PROGRESS and c.get("status") == "True"
                   for c in conditions)
    if not updating or not stall.stalled:
        return desired, ()
    message = stall_message(stall)
    before = _progressing((observed or {}).get("conditions") or [])
    already = before is not None and before.get("reason") == REASON_ROLLOUT_STALLED
    for cond in conditions:
        if cond.get("type") == CONDITION_PROGRESSING:
            cond.update(status="False", reason=REASON_ROLLOUT_STALLED, message=message)
            if already and before is not None:
                cond["lastTransitionTime"] = before.get("lastTransitionTime")
                cond["message"] = before.get("message") or message  # no rewrite per pass
            else:
                cond["lastTransitionTime"] = now
    out = {**desired, "conditions": conditions}
    if already:
        return out, ()
    return out, (Event(REASON_ROLLOUT_STALLED, EVENT_TYPE_WARNING, EVENT_ACTION_UPDATE, message),)
