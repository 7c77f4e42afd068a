"""What the diagnosis reads and returns: the causes in the order they are acted on, the
``Scene`` the shell fills, the ``Finding`` and ``Diagnosis`` it returns, and the small readers
every cause shares (conditions, label selectors, Events, ages)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from lws_operator.api.constants import (
    KIND,
    MUTATE_LWS_PATH,
    MUTATE_POD_PATH,
    REASON_PROGRESS_DEADLINE_EXCEEDED,
    REASON_ROLLED_BACK,
    REASON_ROLLOUT_PAUSED,
    REASON_ROLLOUT_STALLED,
    VALIDATE_LWS_PATH,
    VALIDATE_POD_PATH,
)
from lws_operator.api.view import count_of, lws_view
from lws_operator.logic.mutation.unmutated import REASON_PODS_NOT_MUTATED
from lws_operator.logic.objects.meta import epoch_seconds, meta_of
from lws_operator.logic.rollout.stall import DEFAULT_GRACE_SECONDS

# The causes, in the order they are acted on (a lower rank is reported first).
NOT_OBSERVED: Final = "NotObserved"
WEBHOOK_UNREACHABLE: Final = "WebhookUnreachable"
PODS_NOT_MUTATED: Final = REASON_PODS_NOT_MUTATED
FAILED_CREATE: Final = "FailedCreate"
RESTART_BUDGET_EXHAUSTED: Final = "RestartBudgetExhausted"
SCHEDULING_GATED: Final = "SchedulingGated"
POD_GROUP_INCOMPLETE: Final = "PodGroupIncomplete"
ROLLOUT_PAUSED: Final = REASON_ROLLOUT_PAUSED
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
    ROLLOUT_PAUSED, PROGRESS_DEADLINE_EXCEEDED, ROLLOUT_STALLED,
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


def condition(obj: Mapping[str, Any] | None, kind: str) -> Mapping[str, Any] | None:
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def condition_true(obj: Mapping[str, Any] | None, kind: str) -> bool:
    return (condition(obj, kind) or {}).get("status") == "True"


def spec_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    spec = obj.get("spec")
    return spec if isinstance(spec, Mapping) else {}


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


def age_since(now: float, since: float | None) -> str:
    if since is None or now <= 0:
        return ""
    seconds = max(0, int(now - since))
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m"
    return f"{seconds // 3600}h"


def pod_scheduled(pod: Mapping[str, Any]) -> Mapping[str, Any] | None:
    return condition(pod, "PodScheduled")


def scheduling_gates(pod: Mapping[str, Any]) -> list[str]:
    return [str(g.get("name")) for g in spec_of(pod).get("schedulingGates") or []
            if isinstance(g, Mapping) and g.get("name")]


def kubectl(scene: Scene, *words: str) -> str:
    view = lws_view(scene.lws)
    return " ".join(["kubectl", *words, "-n", view.namespace])

def recent_events(scene: Scene, reason: str) -> list[EventFact]:
    """The set's Events of ``reason`` younger than ``RECENT_SECONDS``, newest first."""
    view = lws_view(scene.lws)
    return sorted(
        (f for f in map(event_fact, scene.events)
         if f.reason == reason and f.kind == KIND and f.name == view.name
         and not (f.time is not None and scene.now and scene.now - f.time > RECENT_SECONDS)),
        key=lambda f: -(f.time or 0))
