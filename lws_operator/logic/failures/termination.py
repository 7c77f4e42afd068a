"""Pod termination policy (LWS docs, "Pod Termination Policy"): which worker StatefulSets
to delete now so that a group's workers stop together with its leader.

A worker StatefulSet is owned by its leader pod, so by default (``Sequential``) the garbage
collector deletes it only once the leader pod is gone: a group whose pods take their whole
``terminationGracePeriodSeconds`` to stop needs two grace periods to go away, and its
replacement waits for both. With ``Parallel``, as soon as a leader is terminating (whoever
deleted it: a recreation, the StatefulSet controller in a scale-down or rollout, an eviction, a
user) its worker StatefulSet is deleted with foreground propagation, so leader and workers stop
concurrently; when the LeaderWorkerSet itself is being deleted, every worker StatefulSet is.

The replacement leader of a rebuilt group never gets a worker StatefulSet while the previous one
still exists (they share the name; the controller creates only absent ones), so a new group
never starts next to the old group's terminating workers. A worker StatefulSet owned by an
earlier incarnation of a live leader is stale and is deleted too, so the new group need not wait
for the garbage collector to notice.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import deleting, is_leader, lws_view
from lws_operator.logic.objects.meta import controller_ref, meta_of

PARALLEL = "Parallel"


def parallel(lws: LWS | None) -> bool:
    return lws is not None and lws_view(lws).pod_termination_policy == PARALLEL


def _leader_owner(sts: Mapping[str, Any]) -> Mapping[str, Any] | None:
    owner = controller_ref(sts)
    return owner if owner is not None and owner.get("kind") == "Pod" else None


def worker_sets_to_stop(lws: LWS | None, pods: Iterable[Mapping[str, Any]],
                        statefulsets: Iterable[Mapping[str, Any]], *,
                        lws_deleting: bool = False) -> list[Mapping[str, Any]]:
    """The worker StatefulSets to delete (foreground, by UID) this pass; [] unless Parallel."""
    if not parallel(lws):
        return []
    leaders = {str(meta_of(p).get("name")): p for p in pods if is_leader(p)}
    out = []
    for sts in statefulsets:
        owner = _leader_owner(sts)
        if owner is None or deleting(sts):
            continue  # the leader StatefulSet, or already going
        leader = leaders.get(str(owner.get("name")))
        if (lws_deleting or leader is None
                or meta_of(leader).get("uid") != owner.get("uid")
                or deleting(leader)):
            out.append(sts)
    return out
