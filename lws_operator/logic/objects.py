"""Safe readers of Kubernetes object metadata, for objects as the API sends them (dicts).

Observed objects can be partial (a cache entry, a tombstone, a test's hand-made pod); these never
raise on a missing or malformed ``metadata``, which every layer relies on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def meta_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``obj.metadata``, or an empty mapping."""
    meta = (obj or {}).get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def labels_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    """``obj.metadata.labels``, or an empty mapping."""
    labels = meta_of(obj).get("labels")
    return labels if isinstance(labels, Mapping) else {}


def name_of(obj: Mapping[str, Any] | None) -> str:
    """``obj.metadata.name``, or ``""``."""
    name = meta_of(obj).get("name")
    return name if isinstance(name, str) else ""
