"""Set-level causes that stop everything else: the controller has not observed the set, the
admission webhooks cannot be called, pods were admitted without the pod webhook, objects cannot be
created. They rank before any group's cause: no group progresses while one of them holds."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from lws_operator.api.constants import (
    CONDITION_PROGRESSING,
    MUTATE_POD_PATH,
    NAME_LABEL,
    VALIDATE_POD_PATH,
)
from lws_operator.api.view import count_of, labels, lws_view
from lws_operator.logic.mutation.unmutated import REASON_PODS_NOT_MUTATED
from lws_operator.logic.objects.meta import name_of
from lws_operator.plugin.analysis.diagnosis.scene import (
    FAILED_CREATE,
    NOT_OBSERVED,
    OUR_PATHS,
    PODS_NOT_MUTATED,
    RECENT_SECONDS,
    WEBHOOK_UNREACHABLE,
    EventFact,
    Finding,
    Scene,
    condition,
    event_fact,
    selector_matches,
    spec_of,
)


def not_observed(scene: Scene, operator_ns: str | None) -> list[Finding]:
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


def recent_failures(scene: Scene) -> list[EventFact]:
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


def webhook_findings(scene: Scene, failures: list[EventFact], settled: bool) -> list[Finding]:
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


def failed_creates(scene: Scene, failures: list[EventFact]) -> list[Finding]:
    """Failures to create pods or StatefulSets other than webhook calls (a quota, a policy),
    on objects still short of what they want."""
    short = {name_of(s) for s in scene.statefulsets
             if count_of((s.get("status") or {}).get("replicas")) is not None
             and (count_of((s.get("status") or {}).get("replicas")) or 0)
             < (count_of(spec_of(s).get("replicas")) or 0)}
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


def pods_not_mutated(scene: Scene) -> list[Finding]:
    cond = condition(scene.lws, CONDITION_PROGRESSING)
    if not cond or cond.get("reason") != REASON_PODS_NOT_MUTATED:
        return []
    return [Finding(PODS_NOT_MUTATED, "pods were created without the pod webhook",
                    evidence=(str(cond.get("message") or ""),),
                    hint="make the pod webhook serve this namespace, then delete those pods "
                         "so their StatefulSet recreates them through it",
                    ours="PodsNotMutated condition")]
