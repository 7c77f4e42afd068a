"""Pods the pod webhook never saw: left out and reported, never a traceback loop (beyond upstream).

The pod webhook gives every pod of a LeaderWorkerSet its identity at creation: a leader its
``group-index`` and ``group-key`` labels, a worker its ``worker-index`` label, every pod the LWS
environment. A pod created while the webhook did not serve it (an install that confines the
webhooks with a namespaceSelector which leaves its namespace out, a registration deleted or not
applied yet) has none of that, and never gets it: admission happens once. Such a pod cannot be
placed in a group (no Service, no worker StatefulSet, no place in the status counts), and passes
used to fail on it, one ``has no group-index label`` traceback per pass, while the user saw a
LeaderWorkerSet that simply never started.

So these pods are left out of every decision (:func:`split`), and the LeaderWorkerSet says why
it is stuck: ``Progressing=False`` with reason ``PodsNotMutated`` and a message naming the pod
webhook, the namespace and the remedy, and one Warning Event when that starts. Nothing is
retried on a timer, since such a pod cannot change by itself; the remedy (delete the pods once
the webhook serves the namespace, so their StatefulSet recreates them through it) brings the
pod events of the next passes.

The condition is an overlay on the status upstream's updateStatus computes, like the rollout
stall's (``logic.rollout.stall``):
``stall.unstall_view`` hides it from that computation, :func:`apply_unmutated` puts it back
while such pods remain, and once they are gone ``Progressing`` is upstream's updateStatus's again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from lws_operator.api.constants import (
    CONDITION_PROGRESSING,
    EVENT_ACTION_UPDATE,
    EVENT_TYPE_WARNING,
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    NAME_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.api.view import deleting, is_leader
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import labels_of, meta_of

REASON_PODS_NOT_MUTATED: Final = "PodsNotMutated"
POD_WEBHOOK: Final = "mpod.kb.io"  # upstream's name for the pod mutating webhook (pod_webhook.go)


def missing_labels(pod: Mapping[str, Any]) -> tuple[str, ...]:
    """The labels the pod webhook gives every pod like ``pod`` that ``pod`` lacks; empty for a
    pod it admitted, and for a pod of no LeaderWorkerSet. A pod without ``worker-index`` is a
    worker (the webhook labels every worker), one with ``worker-index: "0"`` a leader."""
    labels = labels_of(pod)
    if NAME_LABEL not in labels:
        return ()
    if WORKER_INDEX_LABEL not in labels:
        return (WORKER_INDEX_LABEL,)
    if is_leader(pod):
        return tuple(k for k in (GROUP_INDEX_LABEL, GROUP_KEY_LABEL) if k not in labels)
    return ()


def split(pods: Iterable[dict[str, Any]]
          ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The pods the webhook admitted, which the pass decides on, and those it never saw (the
    same objects, in their order)."""
    admitted: list[dict[str, Any]] = []
    unmutated: list[dict[str, Any]] = []
    for pod in pods:
        (unmutated if missing_labels(pod) else admitted).append(pod)
    return admitted, unmutated


def not_mutated_message(namespace: str, pods: Iterable[Mapping[str, Any]],
                        note: str | None = None) -> str | None:
    """What the condition and the Event say about the live (not terminating) pods among
    ``pods`` that the webhook never saw, ending with ``note`` (what the operator does about
    them: ``logic.mutation.recreation``); None when there is none."""
    live = sorted((str(meta_of(p).get("name") or ""), missing_labels(p)) for p in pods
                  if missing_labels(p) and not deleting(p))
    if not live:
        return None
    name, missing = live[0]
    count = len(live)
    return (
        f"{count} pod{'s' if count != 1 else ''} of this LeaderWorkerSet "
        f"(e.g. {name}, without label {missing[0]}) were created without the pod webhook "
        f"{POD_WEBHOOK}: it does not serve namespace {namespace} (its namespaceSelector or "
        "objectSelector leaves the pods out, or it is not registered), so they cannot form a "
        "group. Make the webhook serve this namespace, then delete these pods: their "
        "StatefulSet recreates them through it." + (f" {note}" if note else "")
    )


def apply_unmutated(desired: dict[str, Any], observed: Mapping[str, Any] | None,
                    namespace: str, pods: Iterable[Mapping[str, Any]], now: str,
                    others: tuple[Event, ...] = (), note: str | None = None,
                    ) -> tuple[dict[str, Any], tuple[Event, ...]]:
    """Overlay ``Progressing=False``, reason ``PodsNotMutated``, on the desired status while
    pods of the LeaderWorkerSet were created without the webhook; the Warning Event only when
    that starts. Returns the status and the pass's Events for ``Progressing``: ``others``
    (the rollout stall's) pass through, except while this overlay shows, since theirs could
    never be seen and would be decided again on every pass. Once no such pod is left, the
    desired ``Progressing`` stands, with a transition time of now if its status changes.
    ``note``: the message's last sentence (``not_mutated_message``)."""
    conditions = [dict(c) for c in desired.get("conditions") or []]
    before = next((c for c in (observed or {}).get("conditions") or []
                   if c.get("type") == CONDITION_PROGRESSING), None)
    already = before is not None and before.get("reason") == REASON_PODS_NOT_MUTATED
    message = not_mutated_message(namespace, pods, note)
    index = next((i for i, c in enumerate(conditions)
                  if c.get("type") == CONDITION_PROGRESSING), None)
    if message is None:
        if already and before is not None and index is not None:
            cond = conditions[index]
            cond["lastTransitionTime"] = (before.get("lastTransitionTime")
                                          if cond.get("status") == before.get("status") else now)
            return {**desired, "conditions": conditions}, others
        return desired, others
    cond = {"type": CONDITION_PROGRESSING, "status": "False",
            "reason": REASON_PODS_NOT_MUTATED, "message": message,
            "lastTransitionTime": (before.get("lastTransitionTime")
                                   if before is not None and before.get("status") == "False"
                                   else now),
            "observedGeneration": int(desired.get("observedGeneration") or 0)}
    if index is None:
        conditions.append(cond)
    else:
        conditions[index] = cond
    out = {**desired, "conditions": conditions}
    if already:
        return out, ()
    return out, (Event(REASON_PODS_NOT_MUTATED, EVENT_TYPE_WARNING, EVENT_ACTION_UPDATE, message),)
