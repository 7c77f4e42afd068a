"""How soon the news of one of a LeaderWorkerSet's worker pods or worker StatefulSets needs a
pass: at once, or with the pass that the next second brings anyway.

Every event of a set's pods used to wake a pass ``child_event_window`` (50 ms) later. Measured
with the benchmark (800 pods, create and rollout), that made about 5,000 passes out of 6,600
child events, since a set's pods start one by one under load: the window coalesced little, and
each pass costs the same whatever it brings. Most of those events are a worker pod being
created, bound to a node or turning Ready, and no decision waits on them:

* a group is Ready when its leader pod is Ready and its worker StatefulSet reports every
  replica ready (``readiness.group_ready``, as upstream): a worker's readiness reaches the
  controller through its StatefulSet's status turning ready, which wakes a pass as before;
* worker StatefulSets are created for leader pods, rollouts move on leader StatefulSets and
  group readiness, restarts and recreations start from a pod that failed, restarted or is
  being deleted, and gangs are released from gated pods: all of these stay prompt (below);
* what a routine worker event changes otherwise is the status counters (written up to ten
  seconds later anyway, ``status_pacing``), the group metrics, and conditions that judge over
  a minute or more (a stall, pods never mutated): a second later changes none of them.

So an event of a pod that is a worker (no leader label), not being deleted, not failed or
succeeded, with no container restarted and no scheduling gate, can wait: it joins a pass at most
``worker_event_window`` (a second) after it, and any prompt event meanwhile brings that pass
forward (``WorkQueue.add_soon`` keeps the earlier deadline). Nothing is ever dropped: the wait is
bounded and the pass reads the caches as they are then. Deletions never wait (the runtime adds
those at once).

The same holds for a worker StatefulSet that is not ready (``statefulset_can_wait``): its status
counts its pods up one by one as they start (a group of 8 moves it about ten times), and of all
that only its turning ready moves a decision (the group is Ready, a rollout goes on, a Hash
leader's gate is set). A ready one, one being deleted and the leader StatefulSet (whose status
and partition a rollout follows) stay prompt. A worker StatefulSet that stops being ready (a
worker lost its readiness) waits its second too: the group's readiness then only changes status,
conditions and metrics, and a restart or recreation starts from the pod's own event.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.api.view import deleting, is_leader
from lws_operator.logic.objects import name_of
from lws_operator.logic.readiness import statefulset_ready
from lws_operator.logic.restart import failure_trigger


def can_wait(pod: Mapping[str, Any]) -> bool:
    """Whether an event that added or changed ``pod`` may join a pass up to a second later
    (module docstring): a live worker that neither failed nor restarted and is not gated."""
    if is_leader(pod) or failure_trigger(pod):  # restarted or being deleted
        return False
    if (pod.get("spec") or {}).get("schedulingGates"):
        return False
    return (pod.get("status") or {}).get("phase") not in ("Failed", "Succeeded")


def statefulset_can_wait(sts: Mapping[str, Any], set_name: str) -> bool:
    """Whether an event that added or changed ``sts``, a StatefulSet of the LeaderWorkerSet
    ``set_name``, may join a pass up to a second later: a worker StatefulSet (not the one named
    after the set) that is neither ready nor being deleted (module docstring)."""
    return name_of(sts) != set_name and not deleting(sts) and not statefulset_ready(sts)
