"""Why a LeaderWorkerSet (or one group) is not Ready or not updated: ``kubectl lws why``.

The reason a rollout hangs is spread over pods, StatefulSets, PodGroups, Events, conditions and
the admission webhooks. This module reads them as plain dicts (``Scene``, filled by the plugin's
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
the progress deadline's ``ProgressDeadlineExceeded``);
their findings say so (``ours``), so a user of upstream's controller knows the advice does not
apply to it. A stalled rollout is detected here too (``logic.rollout.stall``) when the controller
did not write ``RolloutStalled``, so the diagnosis works over upstream's objects as well.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final
from urllib.parse import urlsplit

from lws_operator.api.constants import (
    CONDITION_AVAILABLE,
    CONDITION_DEGRADED,
    CONDITION_PROGRESSING,
    CONDITION_UPDATE_IN_PROGRESS,
    CONDITION_WORKLOAD_SCHEDULING_CREATED,
    GROUP_KEY_LABEL,
    GROUP_READY_CONDITION,
    GROUP_REPLACEMENT_GATE,
    KIND,
    MAX_DISRUPTED_GROUPS_ANNOTATION,
    MUTATE_LWS_PATH,
    MUTATE_POD_PATH,
    NAME_LABEL,
    PROGRESS_DEADLINE_ANNOTATION,
    REASON_EVICTION_REFUSED,
    REASON_PROGRESS_DEADLINE_EXCEEDED,
    REASON_ROLLED_BACK,
    RECOVER_ANNOTATION,
    ROLLBACK_ON_DEADLINE_ANNOTATION,
    ROLLED_BACK_FROM_ANNOTATION,
    SIZE_ANNOTATION,
    VALIDATE_LWS_PATH,
    VALIDATE_POD_PATH,
    VOLCANO_GROUP_NAME_ANNOTATION,
)
from lws_operator.api.disruption import budget_of
from lws_operator.api.view import (
    count_of,
    deleting,
    group_index,
    is_leader,
    labels,
    lws_view,
    revision_of,
)
from lws_operator.logic.disruption.budget import disrupted_groups
from lws_operator.logic.failures.restart_budget import exhausted
from lws_operator.logic.mutation.unmutated import REASON_PODS_NOT_MUTATED
from lws_operator.logic.objects.meta import epoch_seconds, host_name, meta_of, name_of
from lws_operator.logic.rollout.stall import (
    DEFAULT_GRACE_SECONDS,
    REASON_ROLLOUT_STALLED,
    find_stall,
    stall_message,
)
from lws_operator.logic.status.readiness import containers_ready, pod_running_and_ready

# The causes, in the order they are acted on (a lower rank is reported first).
NOT_OBSERVED: Final = "NotObserved"
WEBHOOK_UNREACHABLE: Final = "WebhookUnreachable"
PODS_NOT_MUTATED: Final = REASON_PODS_NOT_MUTATED
FAILED_CREATE: Final = "FailedCreate"
RESTART_BUDGET_EXHAUSTED: Final = "RestartBudgetExhausted"
SCHEDULING_GATED: Final = "SchedulingGated"
POD_GROUP_INCOMPLETE: Final = "PodGroupIncomplete"
PROGRESS_DEADLINE_EXCEEDED: Final = REASON_PROGRESS_DEADLINE_EXCEEDED
ROLLOUT_STALLED: Final = REASON_ROLLOUT_STALLED
UNSCHEDULABLE: Final = "Unschedulable"
GROUP_READY_GATE: Final = "GroupReadyGate"
PODS_NOT_READY: Final = "PodsNotReady"
GROUP_INCOMPLETE: Final = "GroupIncomplete"
EVICTIONS_REFUSED: Final = "EvictionsRefused"
DISRUPTION_BUDGET_USED: Final = "DisruptionBudgetUsed"
ROLLED_BACK: Final = REASON_ROLLED_BACK
RANK: Final[Mapping[str, int]] = {cause: i for i, cause in enumerate((
    NOT_OBSERVED, WEBHOOK_UNREACHABLE, PODS_NOT_MUTATED, FAILED_CREATE,
    RESTART_BUDGET_EXHAUSTED, SCHEDULING_GATED, POD_GROUP_INCOMPLETE,
    PROGRESS_DEADLINE_EXCEEDED, ROLLOUT_STALLED,
    UNSCHEDULABLE, GROUP_READY_GATE, PODS_NOT_READY, GROUP_INCOMPLETE, EVICTIONS_REFUSED,
    DISRUPTION_BUDGET_USED, ROLLED_BACK))}

OUR_PATHS: Final = frozenset({MUTATE_LWS_PATH, VALIDATE_LWS_PATH, MUTATE_POD_PATH,
                              VALIDATE_POD_PATH})
# A failure Event older than this says nothing about now (Events live an hour by default).
RECENT_SECONDS: Final = 600.0
NOT_OURS_UPSTREAM: Final = "lws-operator only: the upstream Go controller has no {what}"


@dataclass(frozen=True)
class Finding:
    """One reason, as the user reads it: what (``cause``, ``summary``), where (``group``), the
    evidence (one line per pod, object or Event), the command that fixes it (``fix``, empty
    where there is none) and what to do otherwise (``hint``)."""

    cause: str
    summary: str
    group: str | None = None
    evidence: tuple[str, ...] = ()
    fix: str = ""
    hint: str = ""
    ours: str = ""  # which feature of ours this is about ("" when upstream has it too)
    blocking: bool = True

    def as_dict(self) -> dict[str, Any]:
        return {"cause": self.cause, "summary": self.summary, "group": self.group,
                "blocking": self.blocking, "evidence": list(self.evidence), "fix": self.fix,
                "hint": self.hint,
                "onlyLwsOperator": NOT_OURS_UPSTREAM.format(what=self.ours) if self.ours
                else ""}


@dataclass(frozen=True)
class Scene:
    """What the shell read, as the API returned it. ``endpoint_slices`` maps ``namespace/name``
    of a Service to its EndpointSlices, or to None when the Service does not exist;
    ``namespace_labels`` None means the namespace could not be read (every namespaceSelector is
    then taken to match)."""

    lws: Mapping[str, Any]
    pods: Sequence[Mapping[str, Any]] = ()
    statefulsets: Sequence[Mapping[str, Any]] = ()
    deployment: Mapping[str, Any] | None = None
    pod_groups: Sequence[Mapping[str, Any]] = ()
    volcano_groups: Sequence[Mapping[str, Any]] = ()
    events: Sequence[Mapping[str, Any]] = ()
    webhook_configurations: Sequence[Mapping[str, Any]] = ()
    namespace_labels: Mapping[str, str] | None = None
    endpoint_slices: Mapping[str, Sequence[Mapping[str, Any]] | None] = field(
        default_factory=dict)  # a Service left out: unknown (not read)
    now: float = 0.0
    stall_grace: float = DEFAULT_GRACE_SECONDS  # the controller's default


@dataclass(frozen=True)
class Diagnosis:
    name: str
    namespace: str
    group: str | None
    ready: bool
    updated: bool
    summary: str
    findings: tuple[Finding, ...]

    @property
    def blocked(self) -> bool:
        return any(f.blocking for f in self.findings)

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "namespace": self.namespace, "group": self.group,
                "ready": self.ready, "updated": self.updated, "blocked": self.blocked,
                "summary": self.summary, "findings": [f.as_dict() for f in self.findings]}


# ------------------------------------------------------------------------------ small readers


def condition(obj: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def _true(obj: Mapping[str, Any] | None, kind: str) -> bool:
    return (condition(obj, kind) or {}).get("status") == "True"


def _spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


def _index_order(index: str | None) -> tuple[int, int, str]:
    value = count_of(index)
    return (0, value, "") if value is not None else (1, 0, index or "")


def selector_matches(selector: Mapping[str, Any] | None, have: Mapping[str, str]) -> bool:
    """A ``LabelSelector`` (``matchLabels``, ``matchExpressions``) against labels; an absent or
    empty selector matches everything, as the API server reads one."""
    if not selector:
        return True
    for key, value in (selector.get("matchLabels") or {}).items():
        if have.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr.get("key"), expr.get("operator"), expr.get("values") or []
        if op == "In" and have.get(key) not in values:
            return False
        if op == "NotIn" and key in have and have[key] in values:
            return False
        if op == "Exists" and key not in have:
            return False
        if op == "DoesNotExist" and key in have:
            return False
    return True


@dataclass(frozen=True)
class EventFact:
    """An Event of either API (``v1`` or ``events.k8s.io/v1``) reduced to what is read here."""

    kind: str
    name: str
    uid: str
    reason: str
    type: str
    message: str
    time: float | None
    count: int


def event_fact(event: Mapping[str, Any]) -> EventFact:
    about = event.get("involvedObject") or event.get("regarding") or {}
    stamps = [event.get(k) for k in ("lastTimestamp", "eventTime", "firstTimestamp")]
    series = event.get("series") or {}
    stamps.insert(0, series.get("lastObservedTime"))
    when = next((t for t in (epoch_seconds(s) for s in stamps) if t is not None), None)
    if when is None:
        when = epoch_seconds(meta_of(event).get("creationTimestamp"))
    count = count_of(event.get("count")) or count_of(series.get("count")) or 1
    return EventFact(str(about.get("kind") or ""), str(about.get("name") or ""),
                     str(about.get("uid") or ""), str(event.get("reason") or ""),
                     str(event.get("type") or ""),
                     str(event.get("message") or event.get("note") or ""), when, count)


def _age(now: float, since: float | None) -> str:
    if since is None or now <= 0:
        return ""
    seconds = max(0, int(now - since))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def _pod_scheduled(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return condition(pod, "PodScheduled")


def _gates(pod: Mapping[str, Any]) -> list[str]:
    return [str(g.get("name")) for g in _spec(pod).get("schedulingGates") or []
            if isinstance(g, Mapping) and g.get("name")]


# ------------------------------------------------------------------------------ groups


@dataclass
class Group:
    """The pods of one group (its ``group-index`` label), leader first."""

    index: str
    pods: list[Mapping[str, Any]] = field(default_factory=list)

    @property
    def leader(self) -> Mapping[str, Any] | None:
        live = [p for p in self.pods if is_leader(p) and not deleting(p)]
        return live[0] if live else next((p for p in self.pods if is_leader(p)), None)

    @property
    def live(self) -> list[Mapping[str, Any]]:
        return [p for p in self.pods if not deleting(p)]

    @property
    def key(self) -> str:
        return str(labels(self.leader or (self.pods[0] if self.pods else None)).get(
            GROUP_KEY_LABEL) or "")


def groups_of(pods: Iterable[Mapping[str, Any]]) -> list[Group]:
    """The set's groups by index (numeric order, then Hash indices), pods leader first."""
    by_index: dict[str, Group] = {}
    for pod in pods:
        index = group_index(pod)
        if index is None:
            continue
        by_index.setdefault(index, Group(index)).pods.append(pod)
    out = sorted(by_index.values(), key=lambda g: _index_order(g.index))
    for group in out:
        group.pods.sort(key=lambda p: (not is_leader(p), _index_order(
            labels(p).get("leaderworkerset.sigs.k8s.io/worker-index")), name_of(p)))
    return out


def find_group(groups: Sequence[Group], wanted: str) -> Group | None:
    """``wanted`` as the user typed it: a group index, a Hash group key (or its prefix), or the
    name of one of the group's pods."""
    for group in groups:
        if wanted == group.index or any(name_of(p) == wanted for p in group.pods):
            return group
    prefixed = [g for g in groups if g.key and g.key.startswith(wanted)]
    return prefixed[0] if len(prefixed) == 1 else None


def group_size(scene: Scene, group: Group) -> int:
    raw = meta_of(group.leader).get("annotations", {}).get(SIZE_ANNOTATION) \
        if group.leader else None
    return count_of(raw) or lws_view(scene.lws).size


def _leader_owner(scene: Scene) -> Mapping[str, Any] | None:
    """The leader Deployment (Hash) or StatefulSet (Ordinal), named after the set."""
    name = lws_view(scene.lws).name
    return scene.deployment or next((s for s in scene.statefulsets if name_of(s) == name), None)


def current_revision(scene: Scene) -> str:
    """The revision the leader owner creates leaders on now ('' before it exists)."""
    owner = _leader_owner(scene)
    template = _spec(owner).get("template") if owner else None
    return revision_of(template) if isinstance(template, Mapping) else ""


# ------------------------------------------------------------------------------ set-level causes


def _kubectl(scene: Scene, *words: str) -> str:
    view = lws_view(scene.lws)
    return " ".join(["kubectl", *words, "-n", view.namespace])


def _not_observed(scene: Scene, operator_ns: str | None) -> list[Finding]:
    view = lws_view(scene.lws)
    observed = count_of(view.status.get("observedGeneration"))
    if observed is None or observed >= view.generation:
        return []
    where = f" (kubectl get pods -n {operator_ns})" if operator_ns else ""
    return [Finding(
        NOT_OBSERVED,
        f"the controller has not processed generation {view.generation} yet (status is of "
        f"generation {observed})",
        hint=f"check that the operator is running{where}; its log says why a pass fails")]


@dataclass(frozen=True)
class Webhook:
    configuration: str
    kind: str
    name: str
    path: str
    failure_policy: str
    service: str | None  # namespace/name
    url: str | None


def _object_labels(scene: Scene, path: str) -> Mapping[str, str]:
    """What a webhook's objectSelector sees: the set's labels, or a pod's (its template's and
    the set's name label, which every pod of the set carries)."""
    view = lws_view(scene.lws)
    if path not in (MUTATE_POD_PATH, VALIDATE_POD_PATH):
        return labels(scene.lws)
    template = labels(view.worker_template)
    return {**template, NAME_LABEL: view.name}


def webhooks_for(scene: Scene) -> list[Webhook]:
    """The LeaderWorkerSet and pod webhooks (upstream's paths, so upstream's registrations too)
    whose namespaceSelector takes the set's namespace."""
    out: list[Webhook] = []
    for config in scene.webhook_configurations:
        for hook in config.get("webhooks") or []:
            client = hook.get("clientConfig") or {}
            service = client.get("service")
            url = client.get("url")
            path = str(service.get("path") or "") if isinstance(service, Mapping) \
                else urlsplit(str(url or "")).path
            if path not in OUR_PATHS:
                continue
            if scene.namespace_labels is not None and not selector_matches(
                    hook.get("namespaceSelector"), scene.namespace_labels):
                continue
            if not selector_matches(hook.get("objectSelector"), _object_labels(scene, path)):
                continue
            out.append(Webhook(
                name_of(config), str(config.get("kind") or ""), str(hook.get("name") or ""),
                path, str(hook.get("failurePolicy") or "Fail"),
                f"{service.get('namespace')}/{service.get('name')}"
                if isinstance(service, Mapping) else None,
                str(url) if url else None))
    return out


def webhook_services(scene: Scene) -> list[str]:
    """The ``namespace/name`` of every Service our webhooks call (for the shell to read)."""
    return sorted({h.service for h in webhooks_for(scene) if h.service})


def _ready_endpoints(slices: Sequence[Mapping[str, Any]]) -> int:
    """Endpoints ready to serve; ``ready`` unset counts as ready (the EndpointSlice API)."""
    total = 0
    for slice_ in slices:
        for endpoint in slice_.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is not False:
                total += len(endpoint.get("addresses") or []) or 1
    return total


def _owned_names(scene: Scene) -> set[str]:
    name = lws_view(scene.lws).name
    names = {name, *(name_of(s) for s in scene.statefulsets), *(name_of(p) for p in scene.pods)}
    return names


def _recent_failures(scene: Scene) -> list[EventFact]:
    """Warning ``FailedCreate`` Events of recent minutes about the set, its StatefulSets, its
    Deployment or the Deployment's ReplicaSets."""
    name = lws_view(scene.lws).name
    owned = _owned_names(scene)
    out = []
    for fact in map(event_fact, scene.events):
        if fact.type != "Warning" or fact.reason != FAILED_CREATE:
            continue
        if fact.time is not None and scene.now and scene.now - fact.time > RECENT_SECONDS:
            continue
        if fact.name in owned or (fact.kind == "ReplicaSet" and fact.name.startswith(name + "-")):
            out.append(fact)
    return sorted(out, key=lambda f: -(f.time or 0))


def _webhook_call_failed(message: str) -> bool:
    return "failed calling webhook" in message or ("webhook" in message and (
        "no endpoints available" in message or "connection refused" in message))


def _webhook_findings(scene: Scene, failures: list[EventFact], settled: bool) -> list[Finding]:
    out: list[Finding] = []
    called = [f for f in failures if _webhook_call_failed(f.message)]
    evidence = [f"{f.kind} {f.name}: {f.message} (x{f.count})" for f in called]
    for hook in webhooks_for(scene):
        if hook.service is None or hook.service not in scene.endpoint_slices:
            continue  # called by URL, or its endpoints could not be read
        slices = scene.endpoint_slices[hook.service]
        if slices is not None and _ready_endpoints(slices):
            continue
        what = "does not exist" if slices is None else "has no ready endpoints"
        refuse = hook.failure_policy != "Ignore"
        summary = (f"webhook {hook.name} ({hook.kind} {hook.configuration}) calls Service "
                   f"{hook.service}, which {what}")
        ns = hook.service.split("/", 1)[0]
        hint = (f"the operator's pods behind Service {hook.service} are not serving: check "
                f"them (kubectl get pods -n {ns}); if the operator was uninstalled, remove the "
                f"stale registration (kubectl delete {hook.kind.lower()} {hook.configuration})")
        if refuse:
            consequence = ("pods of this set cannot be created" if "pod" in hook.path
                           else "LeaderWorkerSets cannot be created or changed")
        else:
            consequence = "pods are admitted without it (failurePolicy Ignore)"
        out.append(Finding(
            WEBHOOK_UNREACHABLE, f"{summary}: {consequence}",
            evidence=(f"{hook.kind} {hook.configuration} webhook {hook.name} path {hook.path}, "
                      f"failurePolicy {hook.failure_policy}", *evidence),
            hint=hint, blocking=refuse and (bool(called) or not settled)))
        evidence = []
    if evidence:  # calls failed, but no Service of ours to blame (a URL, or someone else's)
        out.append(Finding(
            WEBHOOK_UNREACHABLE, "admission webhook calls fail: pods of this set cannot be "
            "created", evidence=tuple(evidence),
            hint="the webhook named in the message must be reachable from the API server; "
                 "check the operator is running and its webhook certificate is valid"))
    return out


def _failed_creates(scene: Scene, failures: list[EventFact]) -> list[Finding]:
    """Failures to create pods or StatefulSets other than webhook calls (a quota, a policy),
    on objects still short of what they want."""
    short = {name_of(s) for s in scene.statefulsets
             if count_of((s.get("status") or {}).get("replicas")) is not None
             and (count_of((s.get("status") or {}).get("replicas")) or 0)
             < (count_of(_spec(s).get("replicas")) or 0)}
    name = lws_view(scene.lws).name
    seen: set[str] = set()
    evidence = []
    for fact in failures:
        if _webhook_call_failed(fact.message) or fact.name in seen:
            continue
        if fact.kind == "StatefulSet" and fact.name not in short:
            continue
        seen.add(fact.name)
        evidence.append(f"{fact.kind} {fact.name}: {fact.message} (x{fact.count})")
    if not evidence:
        return []
    return [Finding(FAILED_CREATE, f"objects of {name} cannot be created",
                    evidence=tuple(evidence),
                    hint="the Event's message names what refused the request (a "
                         "ResourceQuota, a LimitRange, a policy); fix that, the controllers "
                         "retry by themselves")]


def _pods_not_mutated(scene: Scene) -> list[Finding]:
    cond = condition(scene.lws, CONDITION_PROGRESSING)
    if not cond or cond.get("reason") != REASON_PODS_NOT_MUTATED:
        return []
    return [Finding(PODS_NOT_MUTATED, "pods were created without the pod webhook",
                    evidence=(str(cond.get("message") or ""),),
                    hint="make the pod webhook serve this namespace, then delete those pods "
                         "so their StatefulSet recreates them through it",
                    ours="PodsNotMutated condition")]


def _deadline_exceeded(scene: Scene) -> list[Finding]:
    """Our progress deadline (``logic.rollout.deadline``): the rollout is held on a revision whose
    groups never became Ready; a new template resumes it."""
    view = lws_view(scene.lws)
    cond = condition(scene.lws, CONDITION_PROGRESSING)
    if not cond or cond.get("reason") != REASON_PROGRESS_DEADLINE_EXCEEDED:
        return []
    opt_in = _kubectl(scene, "annotate", "leaderworkerset", view.name,
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
                         + _kubectl(scene, "annotate", "leaderworkerset", view.name,
                                    PROGRESS_DEADLINE_ANNOTATION + "-") + rollback,
                    ours="progress deadline")]


def _rollout_stalled(scene: Scene, current: str) -> list[Finding]:
    view = lws_view(scene.lws)
    cond = condition(scene.lws, CONDITION_PROGRESSING)
    fix = (_kubectl(scene, "patch", "leaderworkerset", view.name, "--type=merge", "-p",
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
    if not _true(scene.lws, CONDITION_UPDATE_IN_PROGRESS) or not current:
        return []
    stall = find_stall(scene.pods, current, scene.now, scene.stall_grace)
    if not stall.stalled:
        return []
    return [Finding(ROLLOUT_STALLED, "the rollout is stalled: pods of the new revision cannot "
                    "be scheduled (found by kubectl lws; the controller reports no stall)",
                    evidence=(stall_message(stall),), fix=fix, hint=hint)]


def _recent(scene: Scene, reason: str) -> list[EventFact]:
    """The set's Events of ``reason`` younger than ``RECENT_SECONDS``, newest first."""
    view = lws_view(scene.lws)
    return sorted(
        (f for f in map(event_fact, scene.events)
         if f.reason == reason and f.kind == KIND and f.name == view.name
         and not (f.time is not None and scene.now and scene.now - f.time > RECENT_SECONDS)),
        key=lambda f: -(f.time or 0))


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


def _evictions_refused(scene: Scene) -> list[Finding]:
    """Recent ``EvictionRefused`` Events on the set: a drain (or another evictor) is waiting on
    the group disruption budget (``logic.disruption.budget``). Not blocking: the set is not held
    back, the evictor is, until the disrupted groups are Ready again. Without a recent refusal, a
    budget used up (as many groups disrupted as it allows) is said too: the next eviction of a
    healthy group will be refused."""
    view = lws_view(scene.lws)
    refusals = _recent(scene, REASON_EVICTION_REFUSED)
    budget = _disrupted(scene)
    raise_it = _kubectl(scene, "annotate", "leaderworkerset", view.name, "--overwrite",
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
    age = _age(scene.now, latest.time)
    evidence = [f"Event EvictionRefused{f' {age} ago' if age else ''}: {latest.message}"]
    if budget is not None:
        evidence.append(_disrupted_line(*budget))
    return [Finding(EVICTIONS_REFUSED, "evictions refused by the group disruption budget: an "
                    "evictor (kubectl drain, an autoscaler) waits for disrupted groups to be "
                    "Ready again", evidence=tuple(evidence),
                    hint=f"the evictor retries on its own; to let more groups go at once, raise "
                         f"the budget ({raise_it})",
                    ours="group disruption budget", blocking=False)]


def _rolled_back(scene: Scene) -> list[Finding]:
    """A recent ``RolledBack`` Event: the operator put the last fully Ready revision's templates
    back because a rollout made no progress by its deadline (``logic.rollout.deadline``). Not
    blocking: the set rolls back out by itself; the user should know their template was replaced."""
    view = lws_view(scene.lws)
    rollbacks = _recent(scene, REASON_ROLLED_BACK)
    if not rollbacks:
        return []
    latest = rollbacks[0]
    age = _age(scene.now, latest.time)
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


# ------------------------------------------------------------------------------ group causes


def _exhausted(scene: Scene, group: Group) -> Finding | None:
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
             f"{_kubectl(scene, 'annotate', 'pod', leader_name, RECOVER_ANNOTATION + '=true')}"
             "): its count is cleared and the group starts again with a fresh budget",
        ours="restart budget (maxGroupRestarts)")


def _template_gates(scene: Scene) -> set[str]:
    view = lws_view(scene.lws)
    out: set[str] = set()
    for template in (view.worker_template, view.leader_template or {}):
        out.update(_gates(template))
    return out


def _tearing_down(groups: Sequence[Group]) -> list[str]:
    """Hash groups some pod of which still exists while their leader is terminating or gone."""
    return [g.index for g in groups if g.pods and (
        g.leader is None or deleting(g.leader)) and not (g.leader and exhausted(g.leader))]


def _ours_gate_hint(scene: Scene, group: Group, groups: Sequence[Group]) -> tuple[str, str]:
    """Why the controller has not lifted our ``group-replacement`` gate yet: (hint, evidence)."""
    view = lws_view(scene.lws)
    created = condition(scene.lws, CONDITION_WORKLOAD_SCHEDULING_CREATED)
    if view.scheduling_level in ("replica", "role"):
        detail = ""
        if created and created.get("status") == "False":
            detail = (f"; condition {CONDITION_WORKLOAD_SCHEDULING_CREATED}=False "
                      f"{created.get('reason')}: {created.get('message')}")
        return ("the LWS controller lifts it once the group's PodGroups exist (gang "
                "scheduling)", f"the group's PodGroups are not there yet{detail}")
    if view.hashed:
        retained = [g.index for g in groups if g.leader is not None and exhausted(g.leader)]
        if retained:
            return ("recover the exhausted group (kubectl lws recover) or scale down",
                    f"held back by group(s) {', '.join(retained)} that exhausted their "
                    "restart budget")
        down = [i for i in _tearing_down(groups) if i != group.index]
        if down and view.group_replacement_policy != "Immediate":
            return ("the LWS controller lifts it once the groups being torn down are gone "
                    "(groupReplacementPolicy PostTermination)",
                    f"waiting for group(s) {', '.join(down)} to finish terminating")
        ungated = sum(1 for g in groups if g.leader is not None and not deleting(g.leader)
                      and GROUP_REPLACEMENT_GATE not in _gates(g.leader)
                      and revision_of(g.leader) == revision_of(group.leader))
        if ungated >= view.replicas:
            return ("it stays gated: at most spec.replicas groups of a revision are ungated; "
                    "a scale-down removes it first",
                    f"{ungated} groups of its revision already run (replicas {view.replicas})")
    return ("the LWS controller lifts it when it admits the group; if it does not, check the "
            "operator is running", "")


def _gated(scene: Scene, group: Group, groups: Sequence[Group]) -> Finding | None:
    pods = [p for p in group.live if _gates(p)]
    if not pods:
        return None
    in_template = _template_gates(scene)
    gates = sorted({g for p in pods for g in _gates(p)},
                   key=lambda g: (g == GROUP_REPLACEMENT_GATE, g))
    gate = gates[0]  # a foreign gate first: ours is lifted by us, theirs only by them
    evidence = [f"pod {name_of(p)}: schedulingGates {', '.join(_gates(p))}" for p in pods]
    view = lws_view(scene.lws)
    if gate == GROUP_REPLACEMENT_GATE:
        hint, why = _ours_gate_hint(scene, group, groups)
        if why:
            evidence.append(why)
        return Finding(SCHEDULING_GATED,
                       f"group {group.index} is held by the {gate} scheduling gate: the "
                       "scheduler does not try to place it yet",
                       group.index, tuple(evidence), hint=hint,
                       ours="group-replacement scheduling gate")
    if gate in in_template:
        return Finding(SCHEDULING_GATED,
                       f"group {group.index} is held by the scheduling gate {gate}, which the "
                       "pod template sets: nothing lifts it",
                       group.index, tuple(evidence),
                       fix=_kubectl(scene, "edit", "leaderworkerset", view.name),
                       hint=f"remove {gate} from the template's spec.schedulingGates (a new "
                            "template rolls the groups), or have whatever expects it lift it "
                            "from each pod")
    return Finding(SCHEDULING_GATED,
                   f"group {group.index} is held by the scheduling gate {gate}, added by "
                   "another admission controller",
                   group.index, tuple(evidence),
                   hint=f"the controller that owns {gate} (a queueing or quota system) must "
                        "lift it; LWS does not")


def _scheduler_message(scene: Scene, pod: Mapping[str, Any],
                       facts: Sequence[EventFact]) -> str:
    cond = _pod_scheduled(pod) or {}
    if cond.get("message"):
        return str(cond["message"])
    uid = str(meta_of(pod).get("uid") or "")
    for fact in facts:
        if fact.reason == "FailedScheduling" and fact.kind == "Pod" and (
                fact.name == name_of(pod) and (not uid or not fact.uid or fact.uid == uid)):
            return fact.message
    return ""


def _unscheduled(pod: Mapping[str, Any]) -> bool:
    return not _spec(pod).get("nodeName") and not deleting(pod)


def _unschedulable(pod: Mapping[str, Any], facts: Sequence[EventFact]) -> bool:
    if not _unscheduled(pod) or _gates(pod):
        return False
    cond = _pod_scheduled(pod)
    if cond is not None:
        return cond.get("status") == "False" and cond.get("reason") != "SchedulingGated"
    uid = str(meta_of(pod).get("uid") or "")
    return any(f.reason == "FailedScheduling" and f.name == name_of(pod)
               and (not f.uid or f.uid == uid) for f in facts)


def _unscheduled_evidence(scene: Scene, pods: Iterable[Mapping[str, Any]],
                          facts: Sequence[EventFact]) -> list[str]:
    out = []
    for pod in pods:
        message = _scheduler_message(scene, pod, facts)
        since = epoch_seconds((_pod_scheduled(pod) or {}).get("lastTransitionTime"))
        age = _age(scene.now, since)
        out.append(f"pod {name_of(pod)}" + (f" (for {age})" if age else "") + ": "
                   + (message or "not scheduled yet, no message from the scheduler"))
    return out


def _min_count(group: Mapping[str, Any]) -> int | None:
    policy = _spec(group).get("schedulingPolicy") or {}
    gang = policy.get("gang") if isinstance(policy, Mapping) else None
    return count_of(gang.get("minCount")) if isinstance(gang, Mapping) else None


def _native_pod_group(pod: Mapping[str, Any]) -> str | None:
    sg = _spec(pod).get("schedulingGroup")
    name = sg.get("podGroupName") if isinstance(sg, Mapping) else None
    return str(name) if name else None


def _pod_group_finding(scene: Scene, group: Group, facts: Sequence[EventFact],
                       ) -> Finding | None:
    """A gang (native PodGroup ``gang.minCount``, or volcano ``minMember``) of which this group
    has unscheduled members and which has fewer than its minimum placed."""
    members = [p for p in group.live if _unscheduled(p) and not _gates(p)]
    if not members:
        return None
    native = {g_name: g for g in scene.pod_groups if (g_name := name_of(g))}
    volcano = {name_of(g): g for g in scene.volcano_groups}
    for pod in members:
        native_name = _native_pod_group(pod)
        annotations = meta_of(pod).get("annotations") or {}
        volcano_name = annotations.get(VOLCANO_GROUP_NAME_ANNOTATION) \
            if _spec(pod).get("schedulerName") == "volcano" else None
        if native_name:
            live = native.get(native_name)
            peers = [p for p in scene.pods if _native_pod_group(p) == native_name
                     and not deleting(p)]
            kind, name, minimum = "PodGroup", native_name, _min_count(live) if live else None
            ours = "native gang scheduling (spec.scheduling)"
        elif volcano_name:
            live = volcano.get(str(volcano_name))
            peers = [p for p in scene.pods if not deleting(p) and (meta_of(p).get(
                "annotations") or {}).get(VOLCANO_GROUP_NAME_ANNOTATION) == volcano_name]
            kind, name = "volcano PodGroup", str(volcano_name)
            minimum = count_of(_spec(live).get("minMember")) if live else None
            ours = ""
        else:
            continue
        placed = sum(1 for p in peers if _spec(p).get("nodeName"))
        evidence: list[str] = []
        if live is None:
            summary = f"{kind} {name} does not exist: the scheduler holds its pods until it does"
            hint = "the LWS controller creates it; if it does not, check the operator is running"
            created = condition(scene.lws, CONDITION_WORKLOAD_SCHEDULING_CREATED)
            if created and created.get("status") == "False":
                evidence.append(f"condition {CONDITION_WORKLOAD_SCHEDULING_CREATED}=False "
                                f"{created.get('reason')}: {created.get('message')}")
        else:
            if minimum is None or placed >= minimum:
                continue
            summary = (f"{kind} {name} needs {minimum} pods placed together and has {placed}: "
                       "the scheduler places none until all fit")
            hint = ("free capacity for the whole gang, or make the group smaller; the "
                    "scheduler's message says what is missing")
            status = live.get("status") or {}
            if status.get("phase"):
                evidence.append(f"{kind} {name}: phase {status.get('phase')}, running "
                                f"{status.get('running', 0)}")
            for cond in status.get("conditions") or []:
                if cond.get("message"):
                    evidence.append(f"{kind} {name}: {cond.get('type')} {cond.get('reason')}: "
                                    f"{cond.get('message')}")
        evidence += _unscheduled_evidence(scene, [p for p in peers if _unscheduled(p)][:4],
                                          facts)
        return Finding(POD_GROUP_INCOMPLETE, f"group {group.index}: {summary}", group.index,
                       tuple(evidence), hint=hint, ours=ours)
    return None


def _unschedulable_finding(scene: Scene, group: Group, facts: Sequence[EventFact],
                           current: str) -> Finding | None:
    pods = [p for p in group.live if _unschedulable(p, facts)]
    if not pods:
        return None
    count = len(pods)
    rollout = (" (blocking the rollout)" if current and revision_of(pods[0]) == current
               and _true(scene.lws, CONDITION_UPDATE_IN_PROGRESS) else "")
    return Finding(UNSCHEDULABLE,
                   f"group {group.index}: {count} pod{'s' if count != 1 else ''} cannot be "
                   f"scheduled{rollout}",
                   group.index, tuple(_unscheduled_evidence(scene, pods, facts)),
                   hint="the scheduler's message says what no node offers: add capacity, or "
                        "lower the template's requests or constraints "
                        f"({_kubectl(scene, 'edit', 'leaderworkerset', lws_view(scene.lws).name)})")


def _not_ready_line(scene: Scene, pod: Mapping[str, Any]) -> str:
    status = pod.get("status") or {}
    parts = [f"phase {status.get('phase') or 'Pending'}"]
    node = _spec(pod).get("nodeName")
    if node:
        parts.append(f"on {node}")
    for cs in [*(status.get("initContainerStatuses") or []),
               *(status.get("containerStatuses") or [])]:
        state = cs.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting:
            parts.append(f"container {cs.get('name')} waiting: {waiting.get('reason')}"
                         + (f" ({waiting.get('message')})" if waiting.get("message") else ""))
        elif terminated and not cs.get("ready"):
            parts.append(f"container {cs.get('name')} terminated: {terminated.get('reason')} "
                         f"exit {terminated.get('exitCode')}")
        elif not cs.get("ready"):
            parts.append(f"container {cs.get('name')} not ready")
        if count_of(cs.get("restartCount")):
            parts.append(f"{cs.get('restartCount')} restarts")
    if not status.get("containerStatuses"):
        parts.append("containers not started")
    ready = condition(pod, "Ready")
    since = epoch_seconds((ready or {}).get("lastTransitionTime")) \
        or epoch_seconds((_pod_scheduled(pod) or {}).get("lastTransitionTime")) \
        or epoch_seconds(meta_of(pod).get("creationTimestamp"))
    age = _age(scene.now, since)
    return f"pod {name_of(pod)} not Ready" + (f" for {age}" if age else "") + ": " + \
        ", ".join(parts)


def _has_group_ready_gate(pod: Mapping[str, Any]) -> bool:
    return any(isinstance(g, Mapping) and g.get("conditionType") == GROUP_READY_CONDITION
               for g in _spec(pod).get("readinessGates") or [])


def _group_ready_gate(scene: Scene, group: Group) -> Finding | None:
    leader = group.leader
    if leader is None or deleting(leader) or not _has_group_ready_gate(leader):
        return None
    if not containers_ready(leader) or _true(leader, GROUP_READY_CONDITION):
        return None
    workers = [p for p in group.live if not is_leader(p)]
    not_ready = [p for p in workers if not pod_running_and_ready(p)]
    gate = condition(leader, GROUP_READY_CONDITION)
    evidence = [f"leader pod {name_of(leader)}: containers ready, readiness gate "
                f"{GROUP_READY_CONDITION} is "
                + (f"{gate.get('status')} ({gate.get('reason')})" if gate else "not set yet")]
    size = group_size(scene, group)
    evidence.append(f"{len(workers) - len(not_ready)} of {size - 1} workers Ready")
    evidence += [_not_ready_line(scene, p) for p in not_ready]
    if not not_ready and len(workers) >= size - 1:
        hint = ("every worker is Ready, so the LWS controller should set the gate: check the "
                "operator is running")
    else:
        hint = ("the LWS controller sets the gate once the group's worker StatefulSet is "
                "ready; the workers above are what it waits for")
    return Finding(GROUP_READY_GATE,
                   f"group {group.index}: leader {name_of(leader)} is not Ready because its "
                   f"{GROUP_READY_CONDITION} readiness gate waits for the whole group",
                   group.index, tuple(evidence), hint=hint, ours="group-ready readiness gate")


def _not_ready(scene: Scene, group: Group, current: str) -> Finding | None:
    pods = [p for p in group.live if _spec(p).get("nodeName") and not pod_running_and_ready(p)]
    if not pods:
        return None
    updating = _true(scene.lws, CONDITION_UPDATE_IN_PROGRESS)
    on_new = bool(current) and revision_of(pods[0]) == current
    count = len(pods)
    summary = (f"group {group.index}: {count} pod{'s' if count != 1 else ''} scheduled but "
               "not Ready")
    view = lws_view(scene.lws)
    if updating and on_new:
        summary += (f"; the rollout to revision {current} replaces the next group only once "
                    "this one is Ready")
        return Finding(PODS_NOT_READY, summary, group.index,
                       tuple(_not_ready_line(scene, p) for p in pods),
                       fix=_kubectl(scene, "edit", "leaderworkerset", view.name),
                       hint="if the new template is at fault (an image that never starts, a "
                            "failing probe), fix it: the next template replaces this group")
    return Finding(PODS_NOT_READY, summary, group.index,
                   tuple(_not_ready_line(scene, p) for p in pods),
                   hint=f"look at the pods ({_kubectl(scene, 'describe', 'pod', name_of(pods[0]))}"
                        "): image pulls, probes, crashes")


def _incomplete(scene: Scene, group: Group) -> Finding | None:
    size = group_size(scene, group)
    live = group.live
    if group.leader is None or deleting(group.leader) or len(live) >= size:
        return None
    view = lws_view(scene.lws)
    return Finding(GROUP_INCOMPLETE,
                   f"group {group.index} has {len(live)} of its {size} pods",
                   group.index,
                   (f"startupPolicy {view.startup_policy}: workers are created "
                    + ("once the leader is Ready" if view.startup_policy == "LeaderReady"
                       else "with the leader"),),
                   hint="the worker StatefulSet creates the missing pods; if it does not, look "
                        "at its Events ("
                        f"{_kubectl(scene, 'describe', 'statefulset', host_name(group.leader))})")


def _group_finding(scene: Scene, group: Group, groups: Sequence[Group],
                   facts: Sequence[EventFact], current: str) -> Finding | None:
    """The first cause holding ``group`` back, or None."""
    return (_exhausted(scene, group) or _gated(scene, group, groups)
            or _pod_group_finding(scene, group, facts)
            or _unschedulable_finding(scene, group, facts, current)
            or _group_ready_gate(scene, group) or _not_ready(scene, group, current)
            or _incomplete(scene, group))


# ------------------------------------------------------------------------------ the diagnosis


def _settled(scene: Scene, groups: Sequence[Group], current: str) -> tuple[bool, bool, str]:
    """(ready, updated, one-line summary) of the set."""
    view = lws_view(scene.lws)
    status = view.status
    replicas = view.replicas
    ready_n = count_of(status.get("readyReplicas")) or 0
    updated_n = count_of(status.get("updatedReplicas")) or 0
    ready = _true(scene.lws, CONDITION_AVAILABLE) and ready_n >= replicas
    updated = not _true(scene.lws, CONDITION_UPDATE_IN_PROGRESS) and updated_n >= replicas
    parts = [f"{ready_n}/{replicas} groups ready", f"{updated_n}/{replicas} updated"]
    if current:
        parts[-1] += f" to revision {current}"
    owner = _leader_owner(scene)
    partition = ((_spec(owner).get("updateStrategy") or {}).get("rollingUpdate") or {}).get(
        "partition") if owner and not view.hashed else None
    if not updated and count_of(partition):
        parts.append(f"partition {partition}")
    state = ("Ready and updated" if ready and updated else "Ready, rollout in progress"
             if ready else "not Ready")
    return ready, updated, f"{state}: " + ", ".join(parts)


def _group_settled(scene: Scene, group: Group, current: str) -> tuple[bool, bool, str]:
    size = group_size(scene, group)
    live = group.live
    ready = (group.leader is not None and not deleting(group.leader) and len(live) >= size
             and all(pod_running_and_ready(p) for p in live))
    updated = bool(live) and (not current or all(revision_of(p) == current for p in live))
    ready_pods = sum(1 for p in live if pod_running_and_ready(p))
    revisions = sorted({revision_of(p) for p in group.pods if revision_of(p)})
    state = ("Ready and updated" if ready and updated else "Ready, not updated" if ready
             else "not Ready")
    return ready, updated, (f"{state}: {ready_pods}/{size} pods ready, revision "
                            f"{', '.join(revisions) or 'unknown'}"
                            + (f" (current {current})" if current and not updated else ""))


def diagnose(scene: Scene, group: str | None = None) -> Diagnosis:
    """The findings for the set, or for one ``group`` (its index, Hash key or a pod name).

    Raises ``LookupError`` when ``group`` names no group of the set."""
    view = lws_view(scene.lws)
    groups = groups_of(scene.pods)
    current = current_revision(scene)
    facts = [event_fact(e) for e in scene.events]
    chosen: Group | None = None
    if group is not None:
        chosen = find_group(groups, group)
        if chosen is None:
            raise LookupError(f"LeaderWorkerSet {view.name} has no group {group!r}")
        ready, updated, summary = _group_settled(scene, chosen, current)
    else:
        ready, updated, summary = _settled(scene, groups, current)
    settled = ready and updated
    failures = _recent_failures(scene)
    operator_ns = next((s.split("/", 1)[0] for s in webhook_services(scene)), None)
    findings: list[Finding] = [
        *_not_observed(scene, operator_ns), *_webhook_findings(scene, failures, settled),
        *_pods_not_mutated(scene), *_failed_creates(scene, failures)]
    if chosen is None:
        findings += _deadline_exceeded(scene)
        findings += _rollout_stalled(scene, current)
        findings += _evictions_refused(scene)
        findings += _rolled_back(scene)
    for each in ([chosen] if chosen is not None else groups):
        found = _group_finding(scene, each, groups, facts, current)
        if found is not None:
            findings.append(found)
    if chosen is None and not findings and not ready:
        leaders = sum(1 for g in groups if g.leader is not None and not deleting(g.leader))
        if leaders < view.replicas:
            owner = "deployment" if view.hashed else "statefulset"
            findings.append(Finding(
                GROUP_INCOMPLETE,
                f"{view.replicas - leaders} of {view.replicas} groups have no leader pod yet",
                hint="the leader StatefulSet or Deployment creates them; look at its Events "
                     f"({_kubectl(scene, 'describe', owner, view.name)})"))
    order = {g.index: i for i, g in enumerate(groups)}
    findings.sort(key=lambda f: (RANK.get(f.cause, len(RANK)), not f.blocking,
                                 order.get(f.group or "", -1)))
    return Diagnosis(view.name, view.namespace, chosen.index if chosen else None, ready,
                     updated, summary, tuple(findings))
