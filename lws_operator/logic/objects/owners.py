"""Controller ownerReferences: the ones the operator writes on the objects it creates, and
whether an object is controlled by a given owner."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import API_VERSION, KIND
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import lws_view
from lws_operator.logic.objects.meta import meta_of


def controller_reference(owner: Mapping[str, Any], api_version: str,
                         kind: str) -> dict[str, Any]:
    """A controller ownerReference to ``owner`` that blocks its foreground deletion.

    Raises ValueError when the owner has no name or uid: the API server would reject the reference,
    and an object created without its owner would never be garbage-collected."""
    metadata = meta_of(owner)
    name, uid = metadata.get("name"), metadata.get("uid")
    if not name or not uid:
        raise ValueError(f"owner {kind} {name or '<unnamed>'} has no name or uid")
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def lws_reference(lws: LWS) -> dict[str, Any]:
    """The controller ownerReference of an object owned by the LeaderWorkerSet itself."""
    return controller_reference(lws_view(lws).raw, API_VERSION, KIND)


def pod_reference(pod: Mapping[str, Any]) -> dict[str, Any]:
    """The controller ownerReference of an object owned by a leader pod."""
    return controller_reference(pod, "v1", "Pod")


def owned_by(obj: Mapping[str, Any], owner: Mapping[str, Any]) -> bool:
    """Whether ``owner`` (by UID) is ``obj``'s controller."""
    uid = (owner.get("metadata") or {}).get("uid")
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("controller") and r.get("uid") == uid for r in refs)
