"""The writes several steps share, as plan actions: the LeaderWorkerSet's restart counts and
status, a group's leader deleted to recreate the group, a failure Event."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import (
    EVENT_ACTION_CREATE,
    EVENT_TYPE_WARNING,
    GROUP_RESTART_COUNTED_ANNOTATION,
    GROUP_RESTART_COUNTS_ANNOTATION,
    REASON_FAILED_CREATE,
)
from lws_operator.logic.failures.restart import Recreation
from lws_operator.logic.failures.restart_budget import counted_for, read_counted, render_counts
from lws_operator.logic.objects.events import Event
from lws_operator.logic.objects.meta import meta_of
from lws_operator.logic.placement import gang
from lws_operator.logic.reconcile.plan import (
    CONFLICT_STOPS,
    GONE_OR_CHANGED_SKIP,
    Common,
    Delete,
    Patch,
    core,
    lws_target,
)
from lws_operator.logic.reconcile.snapshot import Observed


def failed_create(note: str) -> Event:
    """A FailedCreate Warning; ``{reason}`` in ``note`` becomes the API server's reason."""
    return Event(REASON_FAILED_CREATE, EVENT_TYPE_WARNING, EVENT_ACTION_CREATE, note)


def counts_patch(obs: Observed, counts: Mapping[str, int],
                 counted: Mapping[str, str] | None = None) -> Patch:
    """The restart counts annotation and, in the same write, the counted leaders (``counted``,
    else the recorded ones of the keys ``counts`` keeps), guarded by resourceVersion. A 409
    ends the pass: someone else wrote the set, decide again on the newer object."""
    value = render_counts(counts) if counts else None
    leaders = counted_for(counts, read_counted(obs.body) if counted is None else counted)
    had_leaders = GROUP_RESTART_COUNTED_ANNOTATION in obs.lws.annotations
    annotations: dict[str, Any] = {GROUP_RESTART_COUNTS_ANNOTATION: value}
    if leaders or had_leaders:
        annotations[GROUP_RESTART_COUNTED_ANNOTATION] = render_counts(leaders) if leaders \
            else None
    return Patch(lws_target(obs.lws.namespace), obs.lws.name,
                 {"metadata": {"resourceVersion": obs.lws.resource_version,
                               "annotations": annotations}},
                 common=Common(policy=CONFLICT_STOPS))


def status_patch(obs: Observed, status: Mapping[str, Any],
                 events: tuple[Event, ...] = ()) -> Patch:
    """The whole status, guarded by the resourceVersion it was computed from; a failure fails
    the pass (the work queue's backoff retries it)."""
    return Patch(lws_target(obs.lws.namespace), obs.lws.name,
                 {"metadata": {"resourceVersion": obs.lws.resource_version}, "status": status},
                 subresource="status", common=Common(events=events))


def delete_leader(obs: Observed, recreation: Recreation,
                  events: tuple[Event, ...] = (),
                  related: Mapping[str, Any] | None = None) -> Delete:
    """Foreground-delete a group's leader, guarded by its UID; nothing (no Event) if it is
    gone or is another incarnation."""
    namespace = obs.lws.namespace
    return Delete(core(namespace, "pods", "Pod"), recreation.leader, recreation.leader_uid,
                  propagation="Foreground",
                  common=Common(events=events, related=related, policy=GONE_OR_CHANGED_SKIP,
                                group=recreation.group,
                                log=f"deleting leader {namespace}/{recreation.leader} of group "
                                    f"{recreation.group}: {recreation.why or recreation.note}"))


def ungate(leader: Mapping[str, Any]) -> Patch:
    """Lift our scheduling gate from a leader (guarded by resourceVersion; gone or changed
    since: the watch event brings the pass that decides again)."""
    meta = meta_of(leader)
    return Patch(core(str(meta.get("namespace")), "pods", "Pod"), str(meta.get("name")),
                 {"metadata": {"resourceVersion": meta.get("resourceVersion")},
                  "spec": {"schedulingGates": gang.gates_without_ours(leader) or None}},
                 common=Common(policy=GONE_OR_CHANGED_SKIP))
