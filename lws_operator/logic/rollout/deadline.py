"""Progress deadline: a rollout that makes no progress for too long stops (beyond upstream).

Kubernetes Deployments have ``progressDeadlineSeconds``; upstream's LeaderWorkerSet has nothing,
so a template that never becomes Ready rolls on as far as maxUnavailable and maxSurge allow and
then hangs, with those groups out of service. A set opts in with the annotation
``lws-operator.dev/progress-deadline-seconds``; progress is counted in groups: a group of the
current revision becoming Ready. When a rollout goes that long without progress:

* ``Progressing`` turns ``False`` with reason ``ProgressDeadlineExceeded`` (an overlay on the
  status upstream's updateStatus computes, like ``logic.rollout.stall``'s ``RolloutStalled``, which
  it outranks), with one Warning Event when it starts;
* the rollout is held: the leader StatefulSet's partition and replicas stay where they are, so
  no further group is taken down and no surge is removed (groups already recreated on the bad
  revision stay as they are); a scale of ``spec.replicas`` is still followed;
* with ``lws-operator.dev/rollback-on-deadline: "true"``, the templates are put back to the last
  revision that was fully Ready (:func:`rollback_choice`, :func:`last_fully_ready`), once per
  bad revision; when no revision is known to have been, the hold stays and the condition's
  message says why.

While the set is paused (``logic.rollout.pause``) no deadline runs, as for a paused Deployment;
the resume is progress (its time, from the ``RolloutResumed`` condition, is a lower bound on the
last progress), and a deadline exceeded before the pause is judged afresh.

Once exceeded, the deadline stays exceeded for that revision (the condition names it) until the
templates change again (a fix or a revert starts a new rollout and the clock again), the update
ends, or the annotation is removed: unlike a Deployment's, a bad revision's group coming up for
a moment does not resume the rollout.

No hidden memory (docs/architecture.md): the time of the last progress is derived from objects
on every pass, so an operator restart or a new leader decides the same. It is the latest of

* when the rollout started: the ``lastTransitionTime`` of ``UpdateInProgress=True`` as the
  status step computes it this pass (upstream's rules replace that condition, with a new time,
  whenever the generation changes while an update is in progress, so a new template restarts the
  clock; before the status is first written for a generation, the time is the pass's ``now``);
* the time each group of the current revision that is Ready now became Ready: the latest Ready
  ``lastTransitionTime`` among its pods of that revision.

Nothing is stored for the deadline itself. The clock is an input (``now``), and the pass is
requeued at the deadline (``Deadline.recheck_after``), so it fires without any event.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from lws_operator.api.constants import (
    CONDITION_AVAILABLE,
    CONDITION_PROGRESSING,
    CONDITION_UPDATE_IN_PROGRESS,
    EVENT_ACTION_UPDATE,
    EVENT_TYPE_WARNING,
    GROUP_INDEX_LABEL,
    NAME_LABEL,
    PROGRESS_DEADLINE_ANNOTATION,
    REASON_PROGRESS_DEADLINE_EXCEEDED,
    REASON_ROLLED_BACK,
    ROLLBACK_ON_DEADLINE_ANNOTATION,
    ROLLED_BACK_FROM_ANNOTATION,
)
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import deleting, lws_view, revision_of
from lws_operator.logic.identity import history
from lws_operator.logic.identity.revision import restore_spec_patch
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import epoch_seconds, labels_of, meta_of, name_of
from lws_operator.logic.rollout.pacing import GroupState
from lws_operator.logic.status.set_status import GroupCounts, merge_conditions, select_conditions


def deadline_seconds(lws: LWS) -> int | None:
    """The set's progress deadline in seconds, or None when it has not opted in (or the value is
    not a positive integer: the webhook refuses that, so only a hand-made object has one)."""
    raw = lws_view(lws).annotations.get(PROGRESS_DEADLINE_ANNOTATION)
    if not isinstance(raw, str) or not raw.isdigit() or int(raw) < 1:
        return None
    return int(raw)


def rollback_enabled(lws: LWS) -> bool:
    return lws_view(lws).annotations.get(ROLLBACK_ON_DEADLINE_ANNOTATION) == "true"


@dataclass(frozen=True)
class Deadline:
    """The deadline decision of one pass.

    ``seconds`` None: not opted in (nothing else is set). ``last_progress``: epoch seconds of the
    last progress while a rollout is in progress, else None. ``recheck_after``: seconds until the
    deadline when it is still ahead (the pass is requeued then)."""

    seconds: int | None = None
    last_progress: float | None = None
    exceeded: bool = False
    recheck_after: float | None = None
    withheld: str = ""  # with the rollback opt-in: why there is no rollback (RollbackChoice)


OFF = Deadline()


def rollout_started(lws: LWS, counts: GroupCounts, now: str) -> str | None:
    """When the rollout in progress started: ``UpdateInProgress=True``'s lastTransitionTime in the
    conditions the status step computes this pass from ``lws``'s status, or None when no update
    is in progress (no overlay of ours touches ``UpdateInProgress``)."""
    view = lws_view(lws)
    conditions, _ = merge_conditions(view.status.get("conditions") or (),
                                     select_conditions(counts, view.replicas), view.generation,
                                     now)
    for cond in conditions:
        if cond.get("type") == CONDITION_UPDATE_IN_PROGRESS and cond.get("status") == "True":
            return str(cond.get("lastTransitionTime") or now)
    return None


def _ready_since(pod: Mapping[str, Any]) -> float | None:
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            return epoch_seconds(cond.get("lastTransitionTime"))
    return None


def groups_ready_since(lws_name: str, pods: Iterable[Mapping[str, Any]],
                       current_key: str) -> dict[int, float]:
    """Per group index, the latest time a pod of the current revision became Ready: when the
    group became Ready on that revision, if it is Ready now."""
    since: dict[int, float] = {}
    for pod in pods:
        labels = labels_of(pod)
        if (labels.get(NAME_LABEL) != lws_name or deleting(pod)
                or revision_of(pod) != current_key):
            continue
        raw = labels.get(GROUP_INDEX_LABEL)
        when = _ready_since(pod)
        if not isinstance(raw, str) or not raw.isdigit() or when is None:
            continue
        index = int(raw)
        since[index] = max(since.get(index, when), when)
    return since


def revision_born(revisions: Iterable[Mapping[str, Any]], current_key: str) -> str | None:
    """When the current revision's ControllerRevision was created: a new template is the start
    of its own rollout (as a Deployment's new ReplicaSet is progress), so a fix applied long
    after the update began is not judged by the bad revision's clock."""
    for revision in revisions:
        if revision_of(revision) == current_key and not deleting(revision):
            stamp = meta_of(revision).get("creationTimestamp")
            return str(stamp) if stamp else None
    return None


def decide(seconds: int | None, started: float | None, groups: Iterable[GroupState],
           ready_since: Mapping[int, float], now: float, stuck: bool = False,
           released_from: int | None = None) -> Deadline:
    """Whether the rollout in progress (started at ``started``, None: none is) has gone
    ``seconds`` without a group of the current revision becoming Ready: only groups Ready now
    count, with the time they became Ready. Exactly at the deadline it is exceeded.

    ``stuck``: the status already reports the deadline exceeded on the current revision
    (:func:`exceeded_on`); it stays exceeded until a new revision or the end of the update,
    so a group of a bad revision that comes up for a moment (a crash loop passing its readiness
    probe) neither releases the hold nor reports the deadline again and again.

    ``released_from``: the leader StatefulSet's partition. When groups from there on exist and
    every one of them is Ready on the current revision, the revision works and the next step is
    the controller's (move the partition, or remove the surge), so the deadline is not exceeded
    whatever the time: an operator that was down longer than the deadline (a restart, a leader
    change) must not find a good revision "stuck" and hold it for ever, since the hold would
    then keep it from ever progressing. Not when ``stuck``: the hold of a crash loop stays."""
    if seconds is None:
        return OFF
    if started is None:
        return Deadline(seconds)
    groups = tuple(groups)
    last = started
    for index, state in enumerate(groups):
        if state.ready and state.updated and index in ready_since:
            last = max(last, ready_since[index])
    remaining = last + seconds - now
    released = groups[released_from:] if released_from is not None else ()
    if not stuck and released and all(state.ready and state.updated for state in released):
        return Deadline(seconds, last)
    if remaining <= 0 or stuck:
        return Deadline(seconds, last, exceeded=True)
    return Deadline(seconds, last, recheck_after=remaining)


_ON_REVISION = re.compile(r"on revision (\S+);")


def exceeded_on(status: Mapping[str, Any] | None) -> str | None:
    """The revision key the observed status reports the deadline exceeded on (named in the
    condition's message, :func:`message`), or None."""
    cond = _progressing((status or {}).get("conditions") or [])
    if (cond is None or cond.get("status") != "False"
            or cond.get("reason") != REASON_PROGRESS_DEADLINE_EXCEEDED):
        return None
    found = _ON_REVISION.search(str(cond.get("message") or ""))
    return found.group(1) if found else None


def hold(planned: tuple[int, int], current: tuple[int, int], scaled: bool) -> tuple[int, int]:
    """The leader StatefulSet's (partition, replicas) while the deadline is exceeded: the
    partition never moves down (it may rise, which takes no group down), and the replicas stay
    where they are unless ``spec.replicas`` changed (``scaled``: a scale is followed)."""
    partition = max(planned[0], current[0])
    replicas = planned[1] if scaled else current[1]
    return partition, replicas


def message(deadline: Deadline, current_key: str) -> str:
    withheld = f"{deadline.withheld}. " if deadline.withheld else ""
    return (f"Rollout made no progress for {deadline.seconds}s: no group became ready on "
            f"revision {current_key}; the partition and surge are held. {withheld}Fix or "
            "revert the template (a new revision resumes the rollout)")


def exceeded_event(deadline: Deadline, current_key: str) -> Event:
    return Event(REASON_PROGRESS_DEADLINE_EXCEEDED, EVENT_TYPE_WARNING, EVENT_ACTION_UPDATE,
                 message(deadline, current_key))


def _progressing(conditions: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    return next((c for c in conditions if c.get("type") == CONDITION_PROGRESSING), None)


def apply_deadline(desired: dict[str, Any], observed: Mapping[str, Any] | None,
                   deadline: Deadline, current_key: str,
                   now: str) -> tuple[dict[str, Any], tuple[Event, ...]]:
    """Overlay ``Progressing=False/ProgressDeadlineExceeded`` on the desired status while the
    deadline is exceeded and an update is in progress; the Warning Event only when it starts
    (the condition is kept, time and message, while it lasts)."""
    conditions = [dict(c) for c in desired.get("conditions") or []]
    updating = any(c.get("type") == CONDITION_UPDATE_IN_PROGRESS and c.get("status") == "True"
                   for c in conditions)
    if not deadline.exceeded or not updating:
        return desired, ()
    before = _progressing((observed or {}).get("conditions") or [])
    # Exceeded on this very revision already: kept as it is. On an earlier one (a new template
    # that is stuck too), the condition names the new revision and warns again, so
    # ``exceeded_on`` reads back the revision that is held.
    already = before is not None and exceeded_on(observed) == current_key
    text = message(deadline, current_key)
    for cond in conditions:
        if cond.get("type") == CONDITION_PROGRESSING:
            cond.update(status="False", reason=REASON_PROGRESS_DEADLINE_EXCEEDED, message=text,
                        lastTransitionTime=now)
            if already and before is not None:
                cond["lastTransitionTime"] = before.get("lastTransitionTime") or now
                cond["message"] = before.get("message") or text
    out = {**desired, "conditions": conditions}
    if already:
        return out, ()
    return out, (exceeded_event(deadline, current_key),)


def _ever_available(lws: LWS) -> bool:
    """Whether the set was ever Available: upstream's status rules add the ``Available``
    condition only when it turns True and never remove it (a set that goes unready keeps it,
    False), so its mere presence says so, whatever its status now."""
    return any(c.get("type") == CONDITION_AVAILABLE
               for c in lws_view(lws).status.get("conditions") or () if isinstance(c, Mapping))


def last_fully_ready(lws: LWS, revisions: Iterable[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The alive revision the set was last fully Ready on (every group Ready on it, the update
    done), or None when no alive revision is known to have been:

    * the highest-numbered revision carrying ``lws-operator.dev/fully-ready-at``
      (``logic.identity.history``: written when an update is done, and numbers rise each time a
      revision becomes current, so the highest is the one the set was on last);
    * when no alive revision carries it, they all come from before the operator kept history
      (the upstream controller's, an earlier release's), which deleted every other revision once
      an update was done. Then of the revisions alive only the oldest (the lowest number) can
      have been fully Ready: any later one that was would have deleted it. The oldest numbered 2
      or more was created while another revision lived, which is gone now: deleted when the
      oldest's own update was done (or by hand). The oldest numbered 1 was created while no
      other revision lived: the set's first one (or one recreated after every revision was
      deleted). It was fully Ready if the set was ever Available (:func:`_ever_available`):
      before a later revision's update is done (which would have deleted it) the set is
      Available only on it.

    Known limits: a revision made current again (an undo) that never became fully Ready since
    still counts as fully Ready from its earlier time; and, of revisions from before the history,
    a user partition (canary) can make the set Available with groups of two revisions."""
    alive = history.ordered(r for r in revisions if revision_of(r))
    marked = next((r for r in alive if history.fully_ready_at(r) is not None), None)
    if marked is not None:
        return marked
    if not alive:
        return None
    oldest = alive[-1]
    return oldest if history.number(oldest) >= 2 or _ever_available(lws) else None


@dataclass(frozen=True)
class RollbackChoice:
    """The revision to roll back to, or (``target`` None) why there is none, as a sentence for
    the ``Progressing`` condition and the deadline's Warning."""

    target: Mapping[str, Any] | None
    withheld: str = ""


def rollback_choice(lws: LWS, revisions: Iterable[Mapping[str, Any]],
                    current_key: str) -> RollbackChoice:
    """Where a rollback from ``current_key`` goes: the last fully Ready revision
    (:func:`last_fully_ready`) when it is another one and the set was never rolled back from
    this one. Never to a revision not known to have been fully Ready: the rollout stays held
    instead. Once per bad revision: after a rollback, ``rolled-back-from`` names it, so a
    GitOps tool that puts the bad template back gets the hold, not a rollback loop."""
    view = lws_view(lws)
    if view.annotations.get(ROLLED_BACK_FROM_ANNOTATION) == current_key:
        return RollbackChoice(None, f"Not rolled back: rolled back from revision {current_key} "
                                    f"once already ({ROLLED_BACK_FROM_ANNOTATION})")
    target = last_fully_ready(lws, revisions)
    if target is None:
        return RollbackChoice(None, "Not rolled back: no earlier revision was ever fully Ready")
    if revision_of(target) == current_key:
        return RollbackChoice(None, f"Not rolled back: revision {current_key} is the last "
                                    "fully Ready revision itself")
    return RollbackChoice(target)


def rollback_target(lws: LWS, revisions: Iterable[Mapping[str, Any]],
                    current_key: str) -> Mapping[str, Any] | None:
    """The revision to roll back to, or None (:func:`rollback_choice`)."""
    return rollback_choice(lws, revisions, current_key).target


def rollback_body(lws: LWS, revision: Mapping[str, Any], current_key: str) -> dict[str, Any]:
    """The merge patch putting ``revision``'s templates back onto ``lws``, guarded by its
    resourceVersion, with the revision rolled back from recorded (:func:`rollback_target`).
    The controller-only fields of the live template are kept."""
    view = lws_view(lws)
    patch = restore_spec_patch(view.raw, dict(revision.get("data") or {}))
    return {"metadata": {"resourceVersion": view.resource_version,
                         "annotations": {ROLLED_BACK_FROM_ANNOTATION: current_key}},
            "spec": patch}


def rolled_back_event(lws: LWS, bad_key: str, revision: Mapping[str, Any],
                      deadline: Deadline) -> Event:
    return Event(REASON_ROLLED_BACK, EVENT_TYPE_WARNING, EVENT_ACTION_UPDATE,
                 f"Rolled back from revision {bad_key} to revision {revision_of(revision)} "
                 f"({name_of(revision)}): the rollout made no progress for {deadline.seconds}s")


def last_rolled_back_from(lws: LWS) -> str | None:
    """The revision the operator last rolled ``lws`` back from (what the rollback counter
    watches change), or None."""
    return lws_view(lws).annotations.get(ROLLED_BACK_FROM_ANNOTATION)
