"""Set-level causes about the rollout itself: paused by the user, held at its progress
deadline, stalled for capacity, or rolled back by the operator."""

from __future__ import annotations

from lws_operator.api.constants import (
    CONDITION_PROGRESSING,
    CONDITION_UPDATE_IN_PROGRESS,
    PAUSED_ANNOTATION,
    PROGRESS_DEADLINE_ANNOTATION,
    REASON_PROGRESS_DEADLINE_EXCEEDED,
    REASON_ROLLED_BACK,
    REASON_ROLLOUT_STALLED,
    ROLLBACK_ON_DEADLINE_ANNOTATION,
    ROLLED_BACK_FROM_ANNOTATION,
)
from lws_operator.api.view import lws_view
from lws_operator.logic.rollout.stall import find_stall, stall_message
from lws_operator.plugin.analysis.diagnosis.scene import (
    PROGRESS_DEADLINE_EXCEEDED,
    ROLLED_BACK,
    ROLLOUT_PAUSED,
    ROLLOUT_STALLED,
    Finding,
    Scene,
    age_since,
    condition,
    condition_true,
    kubectl,
    recent_events,
)


def rollout_paused(scene: Scene) -> list[Finding]:
    """The pause (``logic.rollout.pause``): read from the annotation, so it is named whether or
    not the controller has written its condition yet (or runs at all). It blocks while an update
    is in progress (the rollout waits for the resume); at rest it is only a warning, since the
    next template change will not roll."""
    view = lws_view(scene.lws)
    if not view.paused:
        return []
    updating = condition_true(scene.lws, CONDITION_UPDATE_IN_PROGRESS)
    evidence = [f"annotation {PAUSED_ANNOTATION}=true"]
    cond = condition(scene.lws, CONDITION_PROGRESSING)
    if cond and cond.get("reason") == ROLLOUT_PAUSED:
        evidence.append(f"condition Progressing={cond.get('status')} RolloutPaused since "
                        f"{cond.get('lastTransitionTime')}")
    summary = ("the rollout is paused: no further group is replaced or surged until it is "
               "resumed" if updating else "the set is paused: a template change will not roll "
               "out until it is resumed")
    return [Finding(ROLLOUT_PAUSED, summary, evidence=tuple(evidence),
                    fix=kubectl(scene, "lws", "rollout", "resume", view.name),
                    hint="look at the groups already on the new revision first "
                         f"({kubectl(scene, 'lws', 'tree', view.name)}); a scale of "
                         "spec.replicas is followed while paused",
                    ours="rollout pause", blocking=updating)]


def deadline_exceeded(scene: Scene) -> list[Finding]:
    """Our progress deadline (``logic.rollout.deadline``): the rollout is held on a revision whose
    groups never became Ready; a new template resumes it."""
    view = lws_view(scene.lws)
    cond = condition(scene.lws, CONDITION_PROGRESSING)
    if not cond or cond.get("reason") != REASON_PROGRESS_DEADLINE_EXCEEDED:
        return []
    opt_in = kubectl(scene, "annotate", "leaderworkerset", view.name,
                      ROLLBACK_ON_DEADLINE_ANNOTATION + "=true")
    rollback = "" if view.annotations.get(ROLLBACK_ON_DEADLINE_ANNOTATION) == "true" else (
        f"; to have the operator roll back on the deadline next time: {opt_in}")
    return [Finding(PROGRESS_DEADLINE_EXCEEDED, "the rollout passed its progress deadline and "
                    "is held: no group of the new revision became Ready in time, and no "
                    "further group is taken down",
                    evidence=(f"condition Progressing=False ProgressDeadlineExceeded since "
                              f"{cond.get('lastTransitionTime')}: {cond.get('message')}",),
                    hint="fix the template (the pods' Events and logs of the new revision say "
                         "why they are not Ready) or revert it (kubectl apply the previous "
                         "manifest): a new revision resumes the rollout. To let this revision "
                         "roll on as it is, remove the deadline: "
                         + kubectl(scene, "annotate", "leaderworkerset", view.name,
                                    PROGRESS_DEADLINE_ANNOTATION + "-") + rollback,
                    ours="progress deadline")]


def rollout_stalled(scene: Scene, current: str) -> list[Finding]:
    view = lws_view(scene.lws)
    cond = condition(scene.lws, CONDITION_PROGRESSING)
    fix = (kubectl(scene, "patch", "leaderworkerset", view.name, "--type=merge", "-p",
                    "'{\"spec\":{\"rolloutStrategy\":{\"rollingUpdateConfiguration\":"
                    "{\"maxUnavailable\":\"100%\"}}}}'") if not view.hashed else "")
    hint = ("update in two steps (first the template with the smaller request, then "
            "spec.replicas), or raise maxUnavailable above the scale-up delta"
            + ("" if view.hashed else " (in Ordinal mode maxUnavailable 100% recovers in one "
               "step: the fix)"))
    if cond and cond.get("reason") == REASON_ROLLOUT_STALLED:
        return [Finding(ROLLOUT_STALLED, "the rollout is stalled: pods of the new revision "
                        "cannot be scheduled while the groups not yet replaced hold the capacity",
                        evidence=(f"condition Progressing=False RolloutStalled since "
                                  f"{cond.get('lastTransitionTime')}: {cond.get('message')}",),
                        fix=fix, hint=hint, ours="RolloutStalled condition")]
    if not condition_true(scene.lws, CONDITION_UPDATE_IN_PROGRESS) or not current:
        return []
    stall = find_stall(scene.pods, current, scene.now, scene.stall_grace)
    if not stall.stalled:
        return []
    return [Finding(ROLLOUT_STALLED, "the rollout is stalled: pods of the new revision cannot "
                    "be scheduled (found by kubectl lws; the controller reports no stall)",
                    evidence=(stall_message(stall),), fix=fix, hint=hint)]


def rolled_back(scene: Scene) -> list[Finding]:
    """A recent ``RolledBack`` Event: the operator put the last fully Ready revision's templates
    back because a rollout made no progress by its deadline (``logic.rollout.deadline``). Not
    blocking: the set rolls back out by itself; the user should know their template was replaced."""
    view = lws_view(scene.lws)
    rollbacks = recent_events(scene, REASON_ROLLED_BACK)
    if not rollbacks:
        return []
    latest = rollbacks[0]
    age = age_since(scene.now, latest.time)
    evidence = [f"Event RolledBack{f' {age} ago' if age else ''}: {latest.message}"]
    bad = view.annotations.get(ROLLED_BACK_FROM_ANNOTATION)
    if bad:
        evidence.append(f"annotation {ROLLED_BACK_FROM_ANNOTATION}={bad}")
    return [Finding(ROLLED_BACK, "the operator rolled the templates back to the last fully Ready "
                    "revision: the rollout made no progress by its deadline",
                    evidence=tuple(evidence),
                    hint="the set now runs (or rolls back out to) the restored templates; fix "
                         "the template that stalled before applying it again (the same one "
                         "again is held at the deadline, not rolled back a second time)",
                    ours="progress deadline's rollback", blocking=False)]
