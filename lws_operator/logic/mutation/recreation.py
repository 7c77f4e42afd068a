"""Recreating the pods the pod webhook never saw, once it serves them (beyond upstream).

A pod created while the pod webhook did not serve it never gets its group labels and
environment (``logic.mutation.unmutated``), and its LeaderWorkerSet never becomes Ready. The remedy
is to delete it once the webhook serves its namespace: its StatefulSet recreates it, through the
webhook this time. The operator knows when that is (``logic.mutation.scope`` judges its own
webhook configuration, which the admission runtime reports), so it applies the remedy itself,
for the pods of the StatefulSets it owns, and only within bounds, since a wrong judgement would
delete pods that come back exactly as they were:

* never while the webhook does not serve the pods (``webhook_scope.pod_scope``), and only
  ``SETTLE`` seconds after it started serving (the API server reads a changed configuration a
  moment after it is written);
* one group at a time per set, and ``MAX_IN_FLIGHT`` groups at a time over all sets: a group
  is in flight from its deletion until its deleted pods are gone and ``SETTLE`` seconds have
  passed, so its StatefulSet has recreated them and the next pass sees how they came back;
* at most ``MAX_ATTEMPTS`` deletions per group: pods that come back unmutated again count the
  attempt, and after the last one the set records one Warning Event
  (``UnmutatedPodsNotRecreated``) and leaves the group alone. The attempts count for one view of
  the webhook (``PodWebhook.since``): a changed configuration starts them again, nothing else
  does, so no change of ours can start them again.

Each deletion records a Normal Event (``RecreatingUnmutatedPods``) and the ``PodsNotMutated``
condition's message says what the operator is doing (``Recreation.note``). The pods a
``Deployment`` controls (Hash leaders, through a ReplicaSet the operator does not watch) are
left to the user, as the condition's message says.

What is decided lives in ``Memory.recreation`` (``logic.reconcile.snapshot``, with ``Recreation``
and ``PodWebhook``, the data it keeps across passes): lost on a restart or a change of leader, which
only starts the attempts again under a webhook view that is new then.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from lws_operator.api.constants import (
    EVENT_ACTION_DELETE,
    EVENT_TYPE_NORMAL,
    EVENT_TYPE_WARNING,
)
from lws_operator.api.view import deleting
from lws_operator.logic.mutation.scope import pod_scope
from lws_operator.logic.mutation.unmutated import POD_WEBHOOK
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import labels_of, meta_of, name_of
from lws_operator.logic.objects.owners import owned_by
from lws_operator.logic.reconcile.snapshot import PodWebhook, Recreation

REASON_RECREATING: Final = "RecreatingUnmutatedPods"
REASON_NOT_RECREATED: Final = "UnmutatedPodsNotRecreated"
# Seconds after the webhook starts serving, and after each deletion, before the next one.
SETTLE: Final = 5.0
MAX_ATTEMPTS: Final = 3  # deletions per group and webhook view
MAX_IN_FLIGHT: Final = 4  # groups being recreated at once, over all sets

Obj = Mapping[str, Any]


@dataclass(frozen=True)
class Decision:
    """What a pass does: delete ``delete`` (the pods of ``group``, by UID), record ``events``,
    remember ``state``, look again after ``requeue_after``."""

    state: Recreation | None
    delete: tuple[Obj, ...] = ()
    group: str | None = None
    events: tuple[Event, ...] = ()
    requeue_after: float | None = None


def _order(group: str) -> tuple[int, str]:
    """Groups by their index (the name's last number), then by name."""
    found = re.search(r"(\d+)$", group)
    return (int(found.group(1)) if found else -1, group)


def groups_of(pods: Iterable[Obj], statefulsets: Sequence[Obj], lws_name: str
              ) -> dict[str, list[Obj]]:
    """The live ``pods`` that one of ``statefulsets`` (the set's own) controls, by group: a
    leader's group is named after the leader pod, a worker's after its worker StatefulSet
    (the same name for Ordinal groups). Other pods are not ours to delete."""
    groups: dict[str, list[Obj]] = {}
    for pod in pods:
        if deleting(pod):
            continue
        sts = next((s for s in statefulsets if owned_by(pod, s)), None)
        if sts is None:
            continue
        group = name_of(pod) if name_of(sts) == lws_name else name_of(sts)
        groups.setdefault(group, []).append(pod)
    return groups


def _uid(pod: Obj) -> str:
    return str(meta_of(pod).get("uid") or "")


def _names(pods: Iterable[Obj]) -> str:
    return ", ".join(sorted(name_of(p) for p in pods))


def _give_up(namespace: str, groups: Mapping[str, list[Obj]],
             state: Recreation) -> tuple[Recreation, list[Event]]:
    """``state`` with the groups that came back unmutated ``MAX_ATTEMPTS`` times given up, and
    the one warning Event that says so (none when no group is newly given up)."""
    attempts = dict(state.attempts)
    exhausted = sorted((g for g in groups if attempts.get(g, 0) >= MAX_ATTEMPTS
                        and g not in state.given_up), key=_order)
    if not exhausted:
        return state, []
    return replace(state, given_up=state.given_up | frozenset(exhausted)), [Event(
        REASON_NOT_RECREATED, EVENT_TYPE_WARNING, EVENT_ACTION_DELETE,
        f"The pods of group{'s' if len(exhausted) > 1 else ''} {', '.join(exhausted)} "
        f"came back without the pod webhook {POD_WEBHOOK} after {MAX_ATTEMPTS} "
        "recreations: the operator leaves them; check that the webhook serves namespace "
        f"{namespace}, then delete them")]


def decide(namespace: str, lws_name: str, unmutated: Sequence[Obj], all_pods: Sequence[Obj],
           statefulsets: Sequence[Obj], webhook: PodWebhook | None,
           state: Recreation | None, others_in_flight: int, clock: float) -> Decision:
    """The recreation a pass of the set makes (module docstring). ``unmutated``: the set's
    pods the webhook never saw; ``all_pods``: all its pods (to see deleted ones still
    terminating); ``others_in_flight``: the groups of other sets in flight."""
    groups = groups_of(unmutated, statefulsets, lws_name)
    if webhook is None:
        # Nothing is recreated now; what was in flight is over (nothing more will come of it).
        if state is None or (not state.in_flight and state.note is None):
            return Decision(state)
        return Decision(replace(state, group=None, deleted=frozenset(), note=None))
    served = {g: all(pod_scope(webhook.hook, namespace, labels_of(p)).serves for p in pods)
              for g, pods in groups.items()}
    if state is None or state.since != webhook.since:
        if not groups:
            return Decision(state)
        state = Recreation(webhook.since)
    if state.in_flight:
        present = {_uid(p) for p in all_pods}
        due = state.at + SETTLE
        if state.deleted & present or clock < due:
            return Decision(state, requeue_after=max(due - clock, 1.0))
        state = replace(state, group=None, deleted=frozenset())
    attempts = dict(state.attempts)
    state, events = _give_up(namespace, groups, state)
    given_up = sorted((g for g in groups if g in state.given_up), key=_order)
    candidates = sorted((g for g in groups
                         if served[g] and attempts.get(g, 0) < MAX_ATTEMPTS), key=_order)
    if not candidates:
        note = (f"The operator gave up recreating group{'s' if len(given_up) > 1 else ''} "
                f"{', '.join(given_up)} after {MAX_ATTEMPTS} attempts." if given_up else None)
        return Decision(replace(state, note=note), events=tuple(events))
    due = webhook.since + SETTLE
    if clock < due:
        note = ("The pod webhook serves them now: the operator recreates them, one group at "
                "a time.")
        return Decision(replace(state, note=note), events=tuple(events),
                        requeue_after=due - clock)
    if others_in_flight >= MAX_IN_FLIGHT:
        note = ("The pod webhook serves them now: the operator recreates them, one group at "
                "a time, once fewer than "
                f"{MAX_IN_FLIGHT} groups of other LeaderWorkerSets are being recreated.")
        return Decision(replace(state, note=note), events=tuple(events),
                        requeue_after=SETTLE)
    group = candidates[0]
    pods = tuple(sorted(groups[group], key=name_of))
    attempt = attempts.get(group, 0) + 1
    attempts[group] = attempt
    note = (f"The pod webhook serves them now: the operator is recreating group {group} "
            f"(attempt {attempt} of {MAX_ATTEMPTS}), one group at a time.")
    state = replace(state, attempts=tuple(sorted(attempts.items())), group=group,
                    deleted=frozenset(_uid(p) for p in pods), at=clock, note=note)
    events.append(Event(
        REASON_RECREATING, EVENT_TYPE_NORMAL, EVENT_ACTION_DELETE,
        f"Deleting {len(pods)} pod{'s' if len(pods) != 1 else ''} of group {group} "
        f"({_names(pods)}), created without the pod webhook {POD_WEBHOOK}, which serves "
        f"them now: their StatefulSet recreates them through it (attempt {attempt} of "
        f"{MAX_ATTEMPTS})"))
    return Decision(state, delete=pods, group=group, events=tuple(events),
                    requeue_after=SETTLE)

