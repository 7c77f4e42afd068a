"""The failure writes several steps share, as plan actions: the LeaderWorkerSet's restart counts
(the failures and release steps, Hash admission, the end of a pass) and a group's leader deleted
to recreate the group (the failures step, the native scheduler provider)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lws_operator.api.constants import (
    GROUP_RESTART_COUNTED_ANNOTATION,
    GROUP_RESTART_COUNTS_ANNOTATION,
)
from lws_operator.logic.failures.restart import Recreation
from lws_operator.logic.failures.restart_budget import counted_for, read_counted, render_counts
from lws_operator.logic.objects.events import Event
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
