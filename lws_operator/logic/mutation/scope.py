"""Whether our pod webhook serves a pod: the API server's matching rules, read from the
configuration (beyond upstream).

A pod the pod webhook never saw stays unmutated for ever (``logic.mutation.unmutated``); the
operator may recreate it (``logic.mutation.recreation``), but only where a recreated pod goes
through the webhook, or it would delete pods that come back as they were. Whether the API server
calls a webhook for a pod's creation is decided from the webhook's entry of its
MutatingWebhookConfiguration alone: its ``rules`` must cover pod CREATE, its ``namespaceSelector``
must select the pod's namespace and its ``objectSelector`` the pod's labels (the labels the
StatefulSet gives the pod, which are those of the unmutated pod: the webhook never added any). This
module answers that from the entry, as data, and says why not when it does not.

It answers "no" whenever it cannot be sure, since a wrong "yes" costs pods:

* a ``namespaceSelector`` reading a namespace label other than ``kubernetes.io/metadata.name``
  (which the API server sets on every namespace to its name): the operator does not read
  namespaces, so it cannot tell;
* ``matchConditions`` (CEL expressions the API server evaluates): not evaluated here;
* an unknown selector operator, or a rule of a scope other than namespaced resources.

The failure policy does not change the answer: with ``Fail`` a creation the webhook cannot
answer is refused and the StatefulSet tries again, with ``Ignore`` it is admitted unmutated once
more, and the recreation's attempts are bounded for that case (``logic.mutation.recreation``).
Whether the webhook *answers* (the listener serves a certificate the caBundle trusts) is the
admission runtime's to tell (``admission.runtime.WebhookRuntime.pod_webhook``): it hands over an
entry only then.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

NAMESPACE_NAME_LABEL: Final = "kubernetes.io/metadata.name"


@dataclass(frozen=True)
class Scope:
    """The verdict: whether the webhook serves the pod, and if not, why (a clause that reads
    after "the pod webhook ...")."""

    serves: bool
    why: str = ""


SERVES: Final = Scope(True)


def _requirement(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool | None:
    """One ``matchExpressions`` entry against ``labels``; None for an unknown operator."""
    key = str(expr.get("key") or "")
    values = [str(v) for v in expr.get("values") or []]
    operator = expr.get("operator")
    if operator == "In":
        return key in labels and labels[key] in values
    if operator == "NotIn":
        return key not in labels or labels[key] not in values
    if operator == "Exists":
        return key in labels
    if operator == "DoesNotExist":
        return key not in labels
    return None


def selector_keys(selector: Mapping[str, Any] | None) -> frozenset[str]:
    """The label keys a label selector reads."""
    selector = selector or {}
    return frozenset([*(str(k) for k in selector.get("matchLabels") or {}),
                      *(str(e.get("key") or "") for e in selector.get("matchExpressions") or [])])


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool | None:
    """Whether the label selector selects an object with ``labels`` (an absent or empty
    selector selects everything, as the API server's webhook selectors do); None when it
    cannot be evaluated (an unknown operator)."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(str(key)) != str(value):
            return False
    verdict: bool | None = True
    for expr in selector.get("matchExpressions") or []:
        one = _requirement(expr, labels)
        if one is False:
            return False
        if one is None:
            verdict = None
    return verdict


def _covers(values: Sequence[Any] | None, wanted: str) -> bool:
    return any(v in ("*", wanted) for v in values or [])


def rule_covers_pod_create(rule: Mapping[str, Any]) -> bool:
    """Whether a webhook rule covers the creation of a pod (core/v1 ``pods``, no
    subresource)."""
    resources = rule.get("resources") or []
    return (_covers(rule.get("apiGroups"), "") and _covers(rule.get("apiVersions"), "v1")
            and _covers(rule.get("operations"), "CREATE")
            and any(r in ("*", "pods", "*/*") for r in resources)
            and rule.get("scope", "*") in ("*", "Namespaced"))


def pod_scope(hook: Mapping[str, Any] | None, namespace: str,
              pod_labels: Mapping[str, str]) -> Scope:
    """Whether the webhook entry ``hook`` (None: not registered, or not answering) is called
    for the creation of a pod with ``pod_labels`` in ``namespace``."""
    if hook is None:
        return Scope(False, "is not registered or not answering")
    if hook.get("matchConditions"):
        return Scope(False, "has matchConditions, which the operator does not evaluate")
    if not any(rule_covers_pod_create(r) for r in hook.get("rules") or []):
        return Scope(False, "has no rule for pod creation")
    ns_selector = hook.get("namespaceSelector")
    if selector_keys(ns_selector) - {NAMESPACE_NAME_LABEL}:
        return Scope(False, "has a namespaceSelector on namespace labels the operator does "
                            "not read")
    ns_verdict = selects(ns_selector, {NAMESPACE_NAME_LABEL: namespace})
    if ns_verdict is None:
        return Scope(False, "has a namespaceSelector the operator cannot evaluate")
    if not ns_verdict:
        return Scope(False, f"does not serve namespace {namespace} (its namespaceSelector)")
    object_verdict = selects(hook.get("objectSelector"), pod_labels)
    if object_verdict is None:
        return Scope(False, "has an objectSelector the operator cannot evaluate")
    if not object_verdict:
        return Scope(False, "leaves these pods out (its objectSelector)")
    return SERVES


def pod_webhook_entry(configuration: Mapping[str, Any] | None, name: str, *,
                      ca_bundle: str | None = None, url: str | None = None,
                      service: tuple[str, str] | None = None) -> Mapping[str, Any] | None:
    """The entry ``name`` of a MutatingWebhookConfiguration, if it reaches this operator: its
    caBundle is ``ca_bundle`` (base64, when given) and its client config is ``url`` or the
    Service ``service`` (namespace, name), whichever is given. None otherwise: the API server
    would call someone else, or could not trust our certificate."""
    if configuration is None:
        return None
    hook = next((h for h in configuration.get("webhooks") or [] if h.get("name") == name),
                None)
    if hook is None:
        return None
    client = hook.get("clientConfig") or {}
    if ca_bundle is not None and client.get("caBundle") != ca_bundle:
        return None
    if url is not None and client.get("url") != url:
        return None
    if service is not None:
        svc = client.get("service") or {}
        if (svc.get("namespace"), svc.get("name")) != service:
            return None
    return dict(hook)
