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
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.api.view import StatefulSetView, revision_of


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


def revision_key(obj: Mapping[str, Any] | None) -> str:
    """The object's `template-revision-hash` label, empty when absent (``api.view.revision_of``)."""
    return revision_of(obj)


def group_ready(leader: Mapping[str, Any], worker_sts: Mapping[str, Any] | None, size: int) -> bool:
    """The leader is running and ready and, for size > 1, its worker StatefulSet is ready."""
    if not pod_running_and_ready(leader):
        return False
    if size == 1:
        return True
    return worker_sts is not None and statefulset_ready(worker_sts)


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
