"""What ``kubectl lws recover`` and ``kubectl lws restart`` act on, and when they must refuse.

* **recover** (LWS docs, "Recover an Exhausted Group"): a group stopped after exhausting its
  restart budget comes back when its retained leader pod is annotated
  ``leaderworkerset.sigs.k8s.io/recover=true``; the controller then clears the group's count and
  releases its pods. Only a leader marked ``group-restart-budget-exhausted`` can be recovered
  (the retained leader is terminating, held by the cleanup finalizer).
* **restart**: a deliberate group recreation, done as the controller recreates a failed group
  (``logic.failures.writes.delete_leader``): delete the leader pod with foreground propagation and
  a UID precondition, so the workers (owned through the worker StatefulSet) go with it and the
  leader StatefulSet (or Deployment) creates the group anew. A leader already terminating, or an
  exhausted group (whose retained leader a deletion would not bring back), is refused.

A group is named as ``kubectl lws tree`` shows it: its ``group-index`` label (the ordinal, or in
Hash mode the key's first characters), or in Hash mode its full group key.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from lws_operator.api.constants import GROUP_KEY_LABEL, NAME_LABEL, RECOVER_ANNOTATION
from lws_operator.api.view import annotations_of, deleting, group_index, is_leader, labels
from lws_operator.logic.failures.restart_budget import exhausted


def group_leaders(pods: Iterable[Mapping[str, Any]], lws_name: str,
                  group: str) -> list[Mapping[str, Any]]:
    """The leader pods of ``group`` of set ``lws_name`` (more than one while one is replaced),
    live ones first."""
    found = [p for p in pods
             if is_leader(p) and labels(p).get(NAME_LABEL) == lws_name
             and group in (group_index(p), labels(p).get(GROUP_KEY_LABEL))]
    return sorted(found, key=deleting)


def recover_target(leaders: Sequence[Mapping[str, Any]], group: str) -> Mapping[str, Any]:
    """The exhausted leader to annotate; ``ValueError`` says why there is none."""
    if not leaders:
        raise ValueError(f"group {group} has no leader pod")
    for leader in leaders:
        if exhausted(leader):
            if str(annotations_of(leader).get(RECOVER_ANNOTATION, "")).lower() == "true":
                raise ValueError(f"group {group} is being recovered already (its leader "
                                 f"carries {RECOVER_ANNOTATION}=true)")
            return leader
    raise ValueError(f"group {group} has not exhausted its restart budget (its leader is not "
                     "marked group-restart-budget-exhausted): nothing to recover")


def restart_target(leaders: Sequence[Mapping[str, Any]], group: str) -> Mapping[str, Any]:
    """The live leader to delete; ``ValueError`` says why there is none."""
    if not leaders:
        raise ValueError(f"group {group} has no leader pod")
    if any(exhausted(p) for p in leaders):
        raise ValueError(f"group {group} exhausted its restart budget and is stopped: use "
                         "`kubectl lws recover` to bring it back")
    live = [p for p in leaders if not deleting(p)]
    if not live:
        raise ValueError(f"group {group} is being recreated already (its leader is "
                         "terminating)")
    return live[0]


def recover_patch(leader: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch that asks for recovery, guarded by the leader's resourceVersion."""
    meta = leader.get("metadata") or {}
    return {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                         "annotations": {RECOVER_ANNOTATION: "true"}}}


def restart_delete_options(leader: Mapping[str, Any]) -> dict[str, Any]:
    """DeleteOptions as the controller deletes a leader: foreground, this incarnation only."""
    meta = leader.get("metadata") or {}
    return {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Foreground",
            "preconditions": {"uid": meta.get("uid")}}
