"""The status write, as a plan action: the end of a pass writes it, and so does the native
scheduler provider when it must report before the pass ends."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.logic.objects.events import Event
from lws_operator.logic.reconcile.plan import Common, Patch, lws_target
from lws_operator.logic.reconcile.snapshot import Observed


def status_patch(obs: Observed, status: Mapping[str, Any],
                 events: tuple[Event, ...] = ()) -> Patch:
    """The whole status, guarded by the resourceVersion it was computed from; a failure fails
    the pass (the work queue's backoff retries it)."""
    return Patch(lws_target(obs.lws.namespace), obs.lws.name,
                 {"metadata": {"resourceVersion": obs.lws.resource_version}, "status": status},
                 subresource="status", common=Common(events=events))
