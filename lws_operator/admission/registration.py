"""The Mutating/ValidatingWebhookConfiguration objects, rendered from one code path.

An in-cluster install registers the webhooks through the ``lws-webhook-service`` Service
(``webhooks/*.yaml`` are this module's output, and a unit test keeps them equal); ``make run``
registers the same objects with a ``https://127.0.0.1:<port>`` URL instead. Names, paths, rules and
selectors are upstream's (the webhook markers of leaderworkerset_webhook.go and pod_webhook.go), so
an install written for the Go controller and ours are interchangeable.

Every namespace is served, the operator's own and ``kube-system`` included, as upstream serves
them: a LeaderWorkerSet there must start like anywhere else (its pods admitted without the pod
webhook would come without their group labels and environment, and never form a group). The
pod webhooks stay out of every other pod's way through their objectSelector, not a
namespaceSelector: only pods labelled ``leaderworkerset.sigs.k8s.io/name`` reach them, and the
operator's own pods, CoreDNS and the rest of ``kube-system`` carry no such label, so a broken
webhook never stops the pods that could fix it. An install may still confine the webhooks to
some namespaces (the chart's ``webhook.namespaceSelectorExpressions``); a LeaderWorkerSet in a
namespace left out gets ``Progressing=False`` with reason ``PodsNotMutated`` and a Warning Event
(``logic.mutation.unmutated``).

The eviction webhook (``veviction.lws-operator.dev``, ours) enforces the group disruption budget
(``admission.eviction``); it is registered always, answers ``Ignore`` on failure and allows
every eviction of a pod whose LeaderWorkerSet has no budget.

The DisaggregatedSet webhook (``vdisaggregatedset.kb.io``, upstream's name and path) is registered
with the others, always: upstream's chart installs it only with ``enableDisaggregatedSet``, so a
default upstream install leaves the partition, name-length, placement and External checks
unenforced; here the DisaggregatedSet API is always served, and so are its checks (the chart can
still leave the registration out: ``webhook.validateDisaggregatedSets: false``).

Upstream's ``vpod.kb.io`` (``/validate--v1-pod``, pod CREATE and UPDATE) is not registered: its
validator allows every pod and checks nothing (pod_webhook.go), yet the API server built and
sent it an AdmissionReview of the whole pod for every LeaderWorkerSet pod created or updated:
one webhook call of two per pod created, half the admission process's work and the API server's
webhook work for pods. Leaving it out changes
no admission decision; the one difference a user can see is that an update of a LeaderWorkerSet
pod (a label, an annotation) no longer fails while the operator is down, as nothing about such
an update was ever checked. The path is still served, answering as before, so a configuration
written for the Go controller or by an earlier version of this chart keeps working until it is
replaced (``lws_operator.plugin.analysis.diagnosis`` still knows it).

``python -m lws_operator.admission.registration webhooks/`` rewrites the YAML files.
"""

from __future__ import annotations

import argparse
import base64
import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from lws_operator.api import disaggregated
from lws_operator.api.constants import (
    GROUP,
    MUTATE_LWS_PATH,
    MUTATE_POD_PATH,
    NAME_LABEL,
    PLURAL,
    VALIDATE_EVICTION_PATH,
    VALIDATE_LWS_PATH,
    VERSION,
)

MUTATING_CONFIGURATION = "lws-mutating-webhook-configuration"
VALIDATING_CONFIGURATION = "lws-validating-webhook-configuration"
WEBHOOK_SERVICE = "lws-webhook-service"
OPERATOR_NAMESPACE = "lws-system"
TIMEOUT_SECONDS = 10
_NAMESPACE_LABEL = "kubernetes.io/metadata.name"
# The group disruption budget's webhook (ours, ``admission.eviction``). Every eviction reaches
# it (an objectSelector cannot see the evicted pod's labels), so it must never be in the way:
# an operator down or slow lets evictions through (Ignore, a short timeout), and it declares
# its side effects (a reservation, an Event) absent on dry runs.
EVICTION_WEBHOOK = "veviction.lws-operator.dev"
EVICTION_POLICY = {"failurePolicy": "Ignore", "sideEffects": "NoneOnDryRun",
                   "timeoutSeconds": 5}
_API = "admissionregistration.k8s.io/v1"

YAML_FILES = {
    "MutatingWebhookConfiguration": "mutating-webhook-configuration.yaml",
    "ValidatingWebhookConfiguration": "validating-webhook-configuration.yaml",
}


@dataclass(frozen=True)
class ServiceTarget:
    """Reach the webhooks through a Service (in-cluster installs)."""

    namespace: str = OPERATOR_NAMESPACE
    name: str = WEBHOOK_SERVICE
    port: int = 443


@dataclass(frozen=True)
class UrlTarget:
    """Reach the webhooks at ``base_url`` (an operator running outside the cluster)."""

    base_url: str


def _client_config(target: ServiceTarget | UrlTarget, path: str,
                   ca_bundle: bytes | None) -> dict[str, Any]:
    config: dict[str, Any]
    if isinstance(target, UrlTarget):
        config = {"url": target.base_url.rstrip("/") + path}
    else:
        config = {"service": {"name": target.name, "namespace": target.namespace,
                              "path": path, "port": target.port}}
    if ca_bundle:
        config["caBundle"] = base64.b64encode(ca_bundle).decode()
    return config


def _rule(group: str, resource: str, operations: list[str], version: str = VERSION,
          ) -> dict[str, Any]:
    return {"apiGroups": [group], "apiVersions": ["v1" if group == "" else version],
            "operations": list(operations), "resources": [resource]}


def render(
    target: ServiceTarget | UrlTarget,
    *,
    ca_bundle: bytes | None = None,
    mutating_name: str = MUTATING_CONFIGURATION,
    validating_name: str = VALIDATING_CONFIGURATION,
    only_namespaces: Sequence[str] = (),
) -> list[dict[str, Any]]:
    """The mutating and validating configuration, in that order.

    ``only_namespaces`` confines every webhook to those namespaces: tests use it so that
    their registrations cannot touch anything else on a shared cluster.
    """
    lws_ops = ["CREATE", "UPDATE"]
    pod_objects = {"matchExpressions": [{"key": NAME_LABEL, "operator": "Exists"}]}
    confine = ([{"key": _NAMESPACE_LABEL, "operator": "In", "values": sorted(only_namespaces)}]
               if only_namespaces else [])

    def webhook(name: str, path: str, rule: dict[str, Any], pods: bool) -> dict[str, Any]:
        hook: dict[str, Any] = {
            "name": name,
            "admissionReviewVersions": ["v1"],
            "clientConfig": _client_config(target, path, ca_bundle),
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "timeoutSeconds": TIMEOUT_SECONDS,
            "rules": [rule],
        }
        if confine:
            hook["namespaceSelector"] = {"matchExpressions": copy.deepcopy(confine)}
        if pods:
            hook["objectSelector"] = copy.deepcopy(pod_objects)
        return hook

    mutating = {
        "apiVersion": _API, "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": mutating_name},
        "webhooks": [
            webhook("mleaderworkerset.kb.io", MUTATE_LWS_PATH, _rule(GROUP, PLURAL, lws_ops),
                    pods=False),
            webhook("mpod.kb.io", MUTATE_POD_PATH, _rule("", "pods", ["CREATE"]), pods=True),
        ],
    }
    validating = {
        "apiVersion": _API, "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": validating_name},
        "webhooks": [
            webhook("vleaderworkerset.kb.io", VALIDATE_LWS_PATH, _rule(GROUP, PLURAL, lws_ops),
                    pods=False),
            webhook(disaggregated.WEBHOOK_NAME, disaggregated.VALIDATE_PATH,
                    _rule(disaggregated.GROUP, disaggregated.PLURAL, lws_ops,
                          disaggregated.VERSION), pods=False),
            {**webhook(EVICTION_WEBHOOK, VALIDATE_EVICTION_PATH,
                       _rule("", "pods/eviction", ["CREATE"]), pods=False),
             **EVICTION_POLICY},
        ],
    }
    return [mutating, validating]


def manifest_files(namespace: str = OPERATOR_NAMESPACE) -> dict[str, str]:
    """File name -> YAML text of the Service-based registration for ``webhooks/``."""
    header = ("# Generated by `python -m lws_operator.admission.registration webhooks/`; do not "
              "edit.\n# The operator injects caBundle at run time.\n")
    out = {}
    for obj in render(ServiceTarget(namespace=namespace)):
        out[YAML_FILES[obj["kind"]]] = header + yaml.safe_dump(obj, sort_keys=False)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Write the webhook registration manifests.")
    parser.add_argument("directory", type=Path)
    parser.add_argument("--namespace", default=OPERATOR_NAMESPACE)
    args = parser.parse_args(argv)
    args.directory.mkdir(parents=True, exist_ok=True)
    for name, text in manifest_files(args.namespace).items():
        (args.directory / name).write_text(text)


if __name__ == "__main__":
    main()
