"""Kubernetes Events as data: the pure layer decides them, the shell records them."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Event:
    """An Event to record on the LeaderWorkerSet (``events.k8s.io/v1`` fields)."""

    reason: str
    type: str
    action: str
    note: str
