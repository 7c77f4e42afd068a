"""When a pod, a worker StatefulSet or a whole group counts as ready or updated (upstream's
readiness helpers (pod_utils.go)).

The rollout pacing (upstream's rollingUpdateParameters), the status counters (its updateStatus) and
the `LeaderReady` startup policy
all ask these same questions; answering them in one place keeps the three in agreement, which is
what users observe: a group the status calls ready is exactly a group the rollout may advance past.
They read plain API dicts (as a watch cache holds them) and never fail on missing fields, because a
freshly created object has no status yet.

Definitions kept from upstream, quirks included:
* "pod ready" looks only at the `Ready` condition; "running and ready" also requires phase
  `Running` (a Ready pod in phase `Succeeded`, say, is not serving).
* A worker StatefulSet is ready when `spec.replicas == status.availableReplicas` and
  `status.currentRevision == status.updateRevision`. Both revisions empty counts as equal (that is
  how upstream's integration helpers mark a StatefulSet ready), and `readyReplicas` is not read.
  A missing `spec.replicas` is taken as 1, the API server's default; a missing
  `status.availableReplicas` as 0 (the field is omitted when zero).
* A group of size 1 has no worker StatefulSet: its readiness and revision are the leader's alone.
  With size > 1 a missing worker StatefulSet makes the group neither ready nor updated.

One departure, on purpose: a worker StatefulSet also counts as ready when its pods show it
(``ready_by_pods``) before its status does. Upstream waits for kube-controller-manager to count
the pods up in the StatefulSet's status, a sync that came 0.3 to 1 s after the last worker turned
Ready in the benchmark's rollouts (a saturated controller manager), and a rollout with maxSurge
waits that long before each group it moves on to. The pods are what the status would report:
every replica the StatefulSet wants, of this incarnation (its UID), running and Ready, on the
revision its status has settled on (``currentRevision == updateRevision``, the status having
observed the spec's generation), with no ``minReadySeconds`` to wait out. Anything less, and the
status decides as upstream's does. Callers pass the names of the worker StatefulSets so
confirmed (``confirmed_by_pods``) as ``confirmed``; without it they judge as upstream.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from lws_operator.api.constants import CONTROLLER_REVISION_HASH_LABEL
from lws_operator.api.view import StatefulSetView, deleting, revision_of
from lws_operator.logic.objects.meta import controller_ref, labels_of, meta_of, name_of


def _condition_true(pod: Mapping[str, Any], condition_type: str) -> bool:
    for condition in (pod.get("status") or {}).get("conditions") or ():
        if isinstance(condition, Mapping) and condition.get("type") == condition_type:
            return condition.get("status") == "True"
    return False


def pod_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's `Ready` condition is True (what `LeaderReady` waits for)."""
    return _condition_true(pod, "Ready")


def containers_ready(pod: Mapping[str, Any]) -> bool:
    """The pod's `ContainersReady` condition is True: ready but for readiness gates (what
    `LeaderReady` waits for on a Hash-mode leader, whose `group-ready` gate needs its workers)."""
    return _condition_true(pod, "ContainersReady")


def pod_running_and_ready(pod: Mapping[str, Any]) -> bool:
    """Phase `Running` and `Ready=True` (what status and rollout count)."""
    return (pod.get("status") or {}).get("phase") == "Running" and pod_ready(pod)


def statefulset_ready(sts: Mapping[str, Any]) -> bool:
    """All desired replicas available and no revision change pending."""
    view = StatefulSetView.of(sts)
    status = view.status
    available = status.get("availableReplicas") or 0
    return bool(
        view.replicas == available
        and (status.get("currentRevision") or "") == (status.get("updateRevision") or "")
    )


def ready_by_pods(sts: Mapping[str, Any],
                  pod_named: Callable[[str], Mapping[str, Any] | None]) -> bool:
    """Whether the pods of ``sts`` (``pod_named`` finds a pod of its namespace by name) show it
    ready before its status does (module docstring)."""
    if deleting(sts):
        return False
    view = StatefulSetView.of(sts)
    spec, status = view.spec, view.status
    revision = status.get("updateRevision")
    if not revision or status.get("currentRevision") != revision:
        return False
    meta = meta_of(sts)
    if status.get("observedGeneration") != meta.get("generation") or spec.get("minReadySeconds"):
        return False
    uid = meta.get("uid")
    name = name_of(sts)
    start = int((spec.get("ordinals") or {}).get("start") or 0)
    for ordinal in range(start, start + view.replicas):
        pod = pod_named(f"{name}-{ordinal}")
        if pod is None or deleting(pod) or not pod_running_and_ready(pod):
            return False
        owner = controller_ref(pod)
        if owner is None or owner.get("uid") != uid \
                or labels_of(pod).get(CONTROLLER_REVISION_HASH_LABEL) != revision:
            return False
    return True


def confirmed_by_pods(statefulsets: Iterable[Mapping[str, Any]],
                      pods: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """The names of the ``statefulsets`` that are not ready by their status but are by their
    pods (``ready_by_pods``), with ``pods`` those of their namespace (a set's pods will do)."""
    waiting = [s for s in statefulsets if not statefulset_ready(s)]
    if not waiting:
        return frozenset()  # the steady state: decided without indexing the pods
    by_name = {name_of(p): p for p in pods}
    return frozenset(name_of(s) for s in waiting if ready_by_pods(s, by_name.get))


def worker_statefulset_ready(sts: Mapping[str, Any], confirmed: Collection[str] = ()) -> bool:
    """Ready by its status, or named in ``confirmed`` (``confirmed_by_pods``)."""
    return statefulset_ready(sts) or (bool(confirmed) and name_of(sts) in confirmed)


def revision_key(obj: Mapping[str, Any] | None) -> str:
    """The object's `template-revision-hash` label, empty when absent (``api.view.revision_of``)."""
    return revision_of(obj)


def group_ready(leader: Mapping[str, Any], worker_sts: Mapping[str, Any] | None, size: int,
                confirmed: Collection[str] = ()) -> bool:
    """The leader is running and ready and, for size > 1, its worker StatefulSet is ready
    (``worker_statefulset_ready``: by its status, or by its pods when named in ``confirmed``)."""
    if not pod_running_and_ready(leader):
        return False
    if size == 1:
        return True
    return worker_sts is not None and worker_statefulset_ready(worker_sts, confirmed)


def group_updated(
    leader: Mapping[str, Any],
    worker_sts: Mapping[str, Any] | None,
    size: int,
    current_key: str,
) -> bool:
    """The leader and, for size > 1, its worker StatefulSet carry the current revision key.

    Readiness plays no part: a group being recreated on the new revision is already updated."""
    if revision_key(leader) != current_key:
        return False
    if size == 1:
        return True
    return worker_sts is not None and revision_key(worker_sts) == current_key
