"""Kubernetes Events as data: the pure layer decides them, the shell records them."""

from __future__ import annotations

from dataclasses import dataclass

from lws_operator.api.constants import EVENT_ACTION_CREATE, EVENT_TYPE_WARNING, REASON_FAILED_CREATE


@dataclass(frozen=True)
class Event:
    """An Event to record on the LeaderWorkerSet (``events.k8s.io/v1`` fields)."""

    reason: str
    type: str
    action: str
    note: str


def failed_create(note: str) -> Event:
    """A FailedCreate Warning; ``{reason}`` in ``note`` becomes the API server's reason."""
    return Event(REASON_FAILED_CREATE, EVENT_TYPE_WARNING, EVENT_ACTION_CREATE, note)
