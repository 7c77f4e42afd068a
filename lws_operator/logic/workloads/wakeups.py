"""How soon the news of one of a LeaderWorkerSet's worker pods or worker StatefulSets needs a
pass: at once, or with the pass that the next second brings anyway.

Every event of a set's pods used to wake a pass ``child_event_window`` (50 ms) later. In the
benchmark that made nearly a pass per child event (docs/performance.md, "Wakeups"),
since a set's pods start one by one under load: the window coalesced little, and
each pass costs the same whatever it brings. Most of those events are a worker pod being
created, bound to a node or turning Ready, and no decision waits on them:

* a group is Ready when its leader pod is Ready and its worker StatefulSet reports every
  replica ready (``readiness.group_ready``, as upstream), or its pods show that before its
  status does (``readiness.ready_by_pods``): the event of the worker that completes its
  StatefulSet so (``completes_workers``) wakes a pass at once, and so does the StatefulSet's
  status turning ready; the workers before it change no decision;
* worker StatefulSets are created for leader pods, rollouts move on leader StatefulSets and
  group readiness, restarts and recreations start from a pod that failed, restarted or is
  being deleted, and gangs are released from gated pods: all of these stay prompt (below);
* what a routine worker event changes otherwise is the status counters (written seconds
  later anyway, ``logic.status.pacing``), the group metrics, and conditions that judge over
  a minute or more (a stall, pods never mutated): a second later changes none of them.

So an event of a pod that is a worker (no leader label), not being deleted, not failed or
succeeded, with no container restarted and no scheduling gate, can wait: it joins a pass at most
``worker_event_window`` (a second) after it, and any prompt event meanwhile brings that pass
forward (``WorkQueue.add_soon`` keeps the earlier deadline). Nothing is ever dropped: the wait is
bounded and the pass reads the caches as they are then. Deletions never wait (the runtime adds
those at once), but for those of a torn-down group's workers (below).

The news of a group being torn down can wait as well (``torn_down``): once a worker
StatefulSet is gone or being deleted (its leader was deleted, by a rollout, a recreation, a
scale-down or a user, and the garbage collector followed), its pods' deletions are the end of
what has been decided already. A rollout replaces every group so, and those events (a pod marked
deleting, then deleted, for every worker) started a large share of a benchmark run's passes
(docs/performance.md, "Wakeups"). The worker StatefulSet's own
deletion, which the group's replacement waits for (they share a name), stays prompt; so does a
worker whose StatefulSet is there and live (a user deleted that one pod: its group may be
recreated), and a pod our cleanup finalizer retains.

The same holds for a worker StatefulSet that is not ready (``statefulset_can_wait``): its status
counts its pods up one by one as they start (a group of 8 moves it about ten times), and of all
that only its turning ready moves a decision (the group is Ready, a rollout goes on, a Hash
leader's gate is set). A ready one, one being deleted and the leader StatefulSet (whose status
and partition a rollout follows) stay prompt. A worker StatefulSet that stops being ready (a
worker lost its readiness) waits its second too: the group's readiness then only changes status,
conditions and metrics, and a restart or recreation starts from the pod's own event.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from lws_operator.api.view import deleting, is_leader
from lws_operator.logic.failures.restart import failure_trigger
from lws_operator.logic.failures.restart_budget import is_retained
from lws_operator.logic.objects.meta import controller_ref, name_of
from lws_operator.logic.objects.owners import owned_by
from lws_operator.logic.status.readiness import ready_by_pods, statefulset_ready


def can_wait(pod: Mapping[str, Any]) -> bool:
    """Whether an event that added or changed ``pod`` may join a pass up to a second later
    (module docstring): a live worker that neither failed nor restarted and is not gated."""
    if is_leader(pod) or failure_trigger(pod):  # restarted or being deleted
        return False
    if (pod.get("spec") or {}).get("schedulingGates"):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded")


def completes_workers(sts: Mapping[str, Any] | None,
                      pod_named: Callable[[str], Mapping[str, Any] | None]) -> bool:
    """Whether every pod the StatefulSet ``sts`` wants (the worker whose event this is among
    them) shows it ready before its status does (``readiness.ready_by_pods``; ``pod_named``
    finds a pod of its namespace, as the cache holds it after the event): its group is Ready
    now, and a rollout may move on, so that event must not wait. The caller asks only for a
    worker that is running and Ready itself (the cheap test, made before any lookup)."""
    return sts is not None and not statefulset_ready(sts) and ready_by_pods(sts, pod_named)


def statefulset_can_wait(sts: Mapping[str, Any], set_name: str) -> bool:
    """Whether an event that added or changed ``sts``, a StatefulSet of the LeaderWorkerSet
    ``set_name``, may join a pass up to a second later: a worker StatefulSet (not the one named
    after the set) that is neither ready nor being deleted (module docstring)."""
    return name_of(sts) != set_name and not deleting(sts) and not statefulset_ready(sts)


def controller_name(obj: Mapping[str, Any]) -> str | None:
    """The name of the StatefulSet that controls ``obj`` (a worker pod's worker StatefulSet)."""
    owner = controller_ref(obj)
    if owner is None or owner.get("kind") != "StatefulSet":
        return None
    return str(owner.get("name") or "") or None


def torn_down(pod: Mapping[str, Any], event_type: str | None,
              worker_sts: Mapping[str, Any] | None) -> bool:
    """Whether an event of ``pod`` (``event_type``: ``DELETED`` for its removal) is a worker of
    a group being torn down, which may join a pass up to a second later (module docstring):
    the worker is deleted or being deleted, not retained by our finalizer, is controlled by a
    StatefulSet, and that StatefulSet, ``worker_sts`` (looked up by name by the caller), is gone,
    being deleted, or a new incarnation of that name (another UID)."""
    if is_leader(pod) or is_retained(pod) or not (event_type == "DELETED" or deleting(pod)):
        return False
    if controller_name(pod) is None:
        return False  # no StatefulSet of its own to judge the group by
    return worker_sts is None or deleting(worker_sts) or not owned_by(pod, worker_sts)
