"""Recording Kubernetes Events (``events.k8s.io/v1``) on LeaderWorkerSets and DisaggregatedSets.

Events are the user's window into what the controller did (``kubectl describe lws``) and
upstream's tests match their reason, type and note, so the fields follow upstream's events
(leaderworkerset_controller.go). Recording is
best effort: a failed Event write is logged and never fails the pass that decided it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import uuid
from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import EVENT_REPORTING_CONTROLLER
from lws_operator.kube.client import KubeClient
from lws_operator.logic.events import Event

log = logging.getLogger(__name__)


def _reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    return {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
            "name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion")}


class EventRecorder:
    """Writes Events regarding an object, optionally with a related object."""

    def __init__(self, kube: KubeClient, instance: str | None = None,
                 controller: str = EVENT_REPORTING_CONTROLLER) -> None:
        """``controller``: the Events' ``reportingController`` (upstream's recorder name:
        ``leaderworkerset``, or ``disaggregatedset`` for the DisaggregatedSet controller)."""
        self.kube = kube
        self.controller = controller
        self.instance = instance or os.environ.get("POD_NAME") or socket.gethostname()

    def body(self, regarding: Mapping[str, Any], event: Event,
             related: Mapping[str, Any] | None = None) -> dict[str, Any]:
        meta = regarding.get("metadata") or {}
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body: dict[str, Any] = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:16]}",
                         "namespace": meta.get("namespace")},
            "eventTime": now,
            "reportingController": self.controller,
            "reportingInstance": self.instance,
            "action": event.action,
            "reason": event.reason,
            "type": event.type,
            "note": event.note[:1024],
            "regarding": _reference(regarding),
        }
        if related is not None:
            body["related"] = _reference(related)
        return body

    async def record(self, regarding: Mapping[str, Any], event: Event,
                     related: Mapping[str, Any] | None = None) -> None:
        namespace = (regarding.get("metadata") or {}).get("namespace")
        try:
            await self.kube.request(
                "POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
                body=self.body(regarding, event, related))
        except Exception as exc:  # best effort: never fail a pass over an Event
            log.warning("could not record event %s %r: %s", event.reason, event.note, exc)
