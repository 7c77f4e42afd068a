"""Safe readers of Kubernetes object metadata, for objects as the API sends them (dicts).

Observed objects can be partial (a cache entry, a tombstone, a test's hand-made pod); these never
raise on a missing or malformed ``metadata``, which every layer relies on. The metadata and
label readers are ``api.view``'s (one implementation); the pod predicates (``is_leader``,
``group_index``, ``revision_of``, ``deleting``) live there too.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from lws_operator.api.view import labels, metadata


def meta_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``obj.metadata``, or an empty mapping (``api.view.metadata``)."""
    return metadata(obj)


def labels_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``obj.metadata.labels``, or an empty mapping (``api.view.labels``)."""
    return labels(obj)


def name_of(obj: Mapping[str, Any] | None) -> str:
    """``obj.metadata.name``, or ``""``."""
    name = meta_of(obj).get("name")
    return name if isinstance(name, str) else ""


def controller_ref(obj: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    """``obj``'s controlling owner reference (the API allows at most one), or None."""
    return next((r for r in meta_of(obj).get("ownerReferences") or () if r.get("controller")),
                None)


def host_name(leader_pod: Mapping[str, Any]) -> str:
    """A leader's host name, which names its worker StatefulSet (so its workers), its
    per-replica Service and its DNS record. A StatefulSet pod's host name is its pod name; a
    Hash-mode leader's is ``<lws>-<first 8 characters of its group key>``, set by the pod webhook
    because a Deployment's pod names are random."""
    spec = leader_pod.get("spec")
    hostname = spec.get("hostname") if isinstance(spec, Mapping) else None
    return hostname if isinstance(hostname, str) and hostname else name_of(leader_pod)


def epoch_seconds(value: Any) -> float | None:
    """An RFC 3339 timestamp as the API writes it (``creationTimestamp``, a condition's
    ``lastTransitionTime``) in seconds since the epoch; None when absent or malformed."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
