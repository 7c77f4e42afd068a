"""Causes that are budgets at work: the group disruption budget refusing evictions (not
blocking: the evictor waits, not the set) and a group's restart budget exhausted (the group is
stopped until it is recovered)."""

from __future__ import annotations

from lws_operator.api.constants import (
    CONDITION_DEGRADED,
    MAX_DISRUPTED_GROUPS_ANNOTATION,
    REASON_EVICTION_REFUSED,
    RECOVER_ANNOTATION,
)
from lws_operator.api.disruption import budget_of
from lws_operator.api.view import is_leader, lws_view
from lws_operator.logic.disruption.budget import disrupted_groups
from lws_operator.logic.failures.restart_budget import exhausted
from lws_operator.logic.objects.meta import name_of
from lws_operator.plugin.analysis.diagnosis.groups import Group
from lws_operator.plugin.analysis.diagnosis.scene import (
    DISRUPTION_BUDGET_USED,
    EVICTIONS_REFUSED,
    RESTART_BUDGET_EXHAUSTED,
    Finding,
    Scene,
    age_since,
    condition,
    kubectl,
    recent_events,
)


def _disrupted(scene: Scene) -> tuple[int, tuple[str, ...]] | None:
    """The set's group disruption budget and the groups it counts as disrupted now (as the
    eviction webhook does from its caches, ``logic.disruption.budget``), or None without a
    budget."""
    view = lws_view(scene.lws)
    budget = budget_of(view.annotations, view.replicas)
    if budget is None:
        return None
    groups = disrupted_groups(scene.pods, view.replicas, view.size, view.hashed)
    return budget, tuple(sorted(groups, key=lambda g: (not g.isdigit(), int(g) if g.isdigit()
                                                       else 0, g)))


def _disrupted_line(budget: int, groups: tuple[str, ...]) -> str:
    shown = ", ".join(groups[:10]) + (", ..." if len(groups) > 10 else "")
    return (f"groups disrupted now: {len(groups)} of at most {budget}"
            + (f" ({shown})" if groups else ""))


def evictions_refused(scene: Scene) -> list[Finding]:
    """Recent ``EvictionRefused`` Events on the set: a drain (or another evictor) is waiting on
    the group disruption budget (``logic.disruption.budget``). Not blocking: the set is not held
    back, the evictor is, until the disrupted groups are Ready again. Without a recent refusal, a
    budget used up (as many groups disrupted as it allows) is said too: the next eviction of a
    healthy group will be refused."""
    view = lws_view(scene.lws)
    refusals = recent_events(scene, REASON_EVICTION_REFUSED)
    budget = _disrupted(scene)
    raise_it = kubectl(scene, "annotate", "leaderworkerset", view.name, "--overwrite",
                        f"{MAX_DISRUPTED_GROUPS_ANNOTATION}=<more>")
    if not refusals:
        if budget is None or len(budget[1]) < budget[0]:
            return []
        return [Finding(DISRUPTION_BUDGET_USED, "the group disruption budget is used up: an "
                        "eviction of a pod of a healthy group (kubectl drain, an autoscaler) "
                        "is refused until a disrupted group is Ready again",
                        evidence=(_disrupted_line(*budget),),
                        hint=f"evicting pods of the disrupted groups is still allowed; to let "
                             f"more groups go at once, raise the budget ({raise_it})",
                        ours="group disruption budget", blocking=False)]
    latest = refusals[0]
    age = age_since(scene.now, latest.time)
    evidence = [f"Event EvictionRefused{f' {age} ago' if age else ''}: {latest.message}"]
    if budget is not None:
        evidence.append(_disrupted_line(*budget))
    return [Finding(EVICTIONS_REFUSED, "evictions refused by the group disruption budget: an "
                    "evictor (kubectl drain, an autoscaler) waits for disrupted groups to be "
                    "Ready again", evidence=tuple(evidence),
                    hint=f"the evictor retries on its own; to let more groups go at once, raise "
                         f"the budget ({raise_it})",
                    ours="group disruption budget", blocking=False)]


def restart_budget_finding(scene: Scene, group: Group) -> Finding | None:
    leader = next((p for p in group.pods if is_leader(p) and exhausted(p)), None)
    if leader is None:
        return None
    view = lws_view(scene.lws)
    leader_name = name_of(leader)
    evidence = [f"leader pod {leader_name} is annotated group-restart-budget-exhausted "
                f"(maxGroupRestarts {view.max_group_restarts})"]
    degraded = condition(scene.lws, CONDITION_DEGRADED)
    if degraded and degraded.get("status") == "True":
        evidence.append(f"condition Degraded=True {degraded.get('reason')}: "
                        f"{degraded.get('message')}")
    return Finding(
        RESTART_BUDGET_EXHAUSTED,
        f"group {group.index} exhausted its restart budget: its pods are stopped and kept, "
        "and nothing restarts it until it is recovered",
        group.index, tuple(evidence),
        fix=f"kubectl lws recover {view.name} {group.index} -n {view.namespace}",
        hint=f"fix what made it fail, then recover it (the same as "
             f"{kubectl(scene, 'annotate', 'pod', leader_name, RECOVER_ANNOTATION + '=true')}"
             "): its count is cleared and the group starts again with a fresh budget",
        ours="restart budget (maxGroupRestarts)")
