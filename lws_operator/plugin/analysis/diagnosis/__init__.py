"""Why a LeaderWorkerSet (or one group) is not Ready or not updated: ``kubectl lws why``.

The reason a rollout hangs is spread over pods, StatefulSets, PodGroups, Events, conditions and
the admission webhooks. This package reads them as plain dicts (``Scene``, filled by the plugin's
shell) and returns the findings in the order a user should act on them: what stops everything
else first (the controller not running, the webhook unreachable, pods that cannot be created),
then, group by group, the first thing that holds that group back, from the most fundamental (a
group stopped for good by its restart budget; a scheduling gate, since a gated pod is not even
tried by the scheduler; a gang whose minimum cannot be placed together) to the least (pods
scheduled but not Ready). One finding per group: the first cause, with the evidence for it and,
where there is one, the command that fixes it.

Several causes are this operator's own features, absent from the upstream Go controller
(the documented restart budget and backoff, the ``group-replacement`` scheduling gate and the
``group-ready`` readiness gate, native gang scheduling, ``RolloutStalled``, ``PodsNotMutated``,
the progress deadline's ``ProgressDeadlineExceeded``, the pause's ``RolloutPaused``);
their findings say so (``ours``), so a user of upstream's controller knows the advice does not
apply to it. A stalled rollout is detected here too (``logic.rollout.stall``) when the controller
did not write ``RolloutStalled``, so the diagnosis works over upstream's objects as well.

The package by concept: ``scene`` (what is read and returned, the causes' ranks), ``groups``,
``creation`` (what stops every object), ``rollout``, ``budgets``, ``scheduling``, ``readiness``
(causes of one group), ``report`` (``diagnose``, which puts them in order).
"""

from lws_operator.plugin.analysis.diagnosis.creation import Webhook, webhook_services, webhooks_for
from lws_operator.plugin.analysis.diagnosis.groups import (
    Group,
    current_revision,
    find_group,
    group_size,
    groups_of,
)
from lws_operator.plugin.analysis.diagnosis.report import diagnose
from lws_operator.plugin.analysis.diagnosis.scene import (
    DISRUPTION_BUDGET_USED,
    EVICTIONS_REFUSED,
    FAILED_CREATE,
    GROUP_INCOMPLETE,
    GROUP_READY_GATE,
    NOT_OBSERVED,
    POD_GROUP_INCOMPLETE,
    PODS_NOT_MUTATED,
    PODS_NOT_READY,
    PROGRESS_DEADLINE_EXCEEDED,
    RANK,
    RESTART_BUDGET_EXHAUSTED,
    ROLLED_BACK,
    ROLLOUT_PAUSED,
    ROLLOUT_STALLED,
    SCHEDULING_GATED,
    UNSCHEDULABLE,
    WEBHOOK_UNREACHABLE,
    Diagnosis,
    EventFact,
    Finding,
    Scene,
    condition,
    event_fact,
    selector_matches,
)

__all__ = [
    "DISRUPTION_BUDGET_USED", "EVICTIONS_REFUSED", "FAILED_CREATE", "GROUP_INCOMPLETE",
    "GROUP_READY_GATE", "NOT_OBSERVED", "PODS_NOT_MUTATED", "PODS_NOT_READY",
    "POD_GROUP_INCOMPLETE", "PROGRESS_DEADLINE_EXCEEDED", "RANK", "RESTART_BUDGET_EXHAUSTED",
    "ROLLED_BACK", "ROLLOUT_PAUSED", "ROLLOUT_STALLED", "SCHEDULING_GATED", "UNSCHEDULABLE",
    "WEBHOOK_UNREACHABLE",
    "Diagnosis", "EventFact", "Finding", "Group", "Scene", "Webhook", "condition",
    "current_revision", "diagnose", "event_fact", "find_group", "group_size", "groups_of",
    "selector_matches", "webhook_services", "webhooks_for",
]
