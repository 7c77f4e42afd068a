"""The volcano scheduler-provider PodGroup of a group (upstream's volcano provider
(pkg/schedulerprovider)), for the ``volcano`` provider.

Volcano gang-schedules the pods that carry the same ``scheduling.k8s.io/group-name`` annotation
(set by the pod webhook: ``<lws>-<group-index>-<revision>``) once a ``scheduling.volcano.sh``
PodGroup of that name exists. The controller creates it when it reconciles a leader, never
updates it, and the leader pod owns it, so a recreated group gets a fresh one. Users also set
``schedulerName: volcano`` in their templates; LWS does not.

``minMember`` is the live size, or 1 under ``LeaderReady`` (the workers appear only after the
leader is ready, so a gang of ``size`` could never form). ``minResources`` is one leader pod's
effective requests plus ``size - 1`` worker pods', computed like Kubernetes' pod resource helper:
per resource the larger of the regular containers plus restartable init containers (sidecars)
and the largest init container started after the sidecars before it, plus the pod overhead. A
container's limits stand in for requests it does not state, as the API server defaults them.
Quantities are summed exactly (as fractions) and written in plain decimal or milli units.
"""

from __future__ import annotations

from collections.abc import Mapping
from fractions import Fraction
from typing import Any

from lws_operator.api.constants import (
    GROUP_INDEX_LABEL,
    NAME_LABEL,
    TEMPLATE_REVISION_HASH_LABEL,
    VOLCANO_GROUP_NAME_ANNOTATION,
    VOLCANO_QUEUE_ANNOTATION,
)
from lws_operator.api.view import LeaderWorkerSetLike as LWS
from lws_operator.api.view import lws_view
from lws_operator.logic.objects import quantity
from lws_operator.logic.objects.meta import labels_of, meta_of

API_VERSION = "scheduling.volcano.sh/v1beta1"
Resources = dict[str, Fraction]


def parse_quantity(text: Any) -> Fraction:
    """A Kubernetes quantity (``500m``, ``2Gi``, ``1e3``, ``4``) as an exact fraction, read as
    the API server reads it (``logic.objects.quantity``); ValueError for anything it would
    refuse."""
    value = quantity.parse_quantity(text)
    if value is None:
        raise ValueError(f"not a quantity: {text!r}")
    return value


def format_quantity(value: Fraction) -> str:
    """Plain decimal when whole, else milli units rounded up (the API's smallest cpu unit)."""
    if value.denominator == 1:
        return str(value.numerator)
    milli = value * 1000
    return f"{-(-milli.numerator // milli.denominator)}m"


def _add(total: Resources, other: Mapping[str, Fraction], factor: int = 1) -> None:
    for name, value in other.items():
        total[name] = total.get(name, Fraction(0)) + value * factor


def _container_requests(container: Mapping[str, Any]) -> Resources:
    resources = container.get("resources") or {}
    merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
    return {name: parse_quantity(value) for name, value in merged.items()}


def pod_requests(template: Mapping[str, Any]) -> Resources:
    """The effective resource requests of one pod built from ``template``."""
    spec = template.get("spec") or {}
    regular: Resources = {}
    for container in spec.get("containers") or []:
        _add(regular, _container_requests(container))
    sidecars: Resources = {}
    init_peak: Resources = {}
    for container in spec.get("initContainers") or []:
        requests = _container_requests(container)
        if container.get("restartPolicy") == "Always":
            _add(sidecars, requests)
            step = dict(sidecars)
        else:
            step = dict(sidecars)
            _add(step, requests)
        for name, value in step.items():
            init_peak[name] = max(init_peak.get(name, Fraction(0)), value)
    _add(regular, sidecars)
    total = {name: max(regular.get(name, Fraction(0)), init_peak.get(name, Fraction(0)))
             for name in {*regular, *init_peak}}
    _add(total, {name: parse_quantity(v) for name, v in (spec.get("overhead") or {}).items()})
    return total


def pod_group(lws: LWS, leader: Mapping[str, Any]) -> dict[str, Any] | None:
    """The volcano PodGroup of ``leader``'s group, or None when the leader carries no
    ``scheduling.k8s.io/group-name`` annotation (admitted without the provider)."""
    name = (meta_of(leader).get("annotations") or {}).get(VOLCANO_GROUP_NAME_ANNOTATION)
    if not name:
        return None
    view = lws_view(lws)
    size = view.size
    # ``or``: an empty leader template sizes the leader like a worker here (unlike the leader
    # StatefulSet's template, which copies it as it is: ``LeaderWorkerSetView.leader_pod_source``).
    leader_template = view.leader_template or view.worker_template
    resources = pod_requests(leader_template)
    _add(resources, pod_requests(view.worker_template), size - 1)
    lws_annotations = view.annotations
    group_spec: dict[str, Any] = {
        "minMember": 1 if view.startup_policy == "LeaderReady" else size,
        "minResources": {k: format_quantity(v) for k, v in sorted(resources.items())},
    }
    if lws_annotations.get(VOLCANO_QUEUE_ANNOTATION):
        group_spec["queue"] = lws_annotations[VOLCANO_QUEUE_ANNOTATION]
    labels = labels_of(leader)
    leader_meta = meta_of(leader)
    return {
        "apiVersion": API_VERSION,
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": view.meta.get("namespace"),
            "labels": {key: str(labels.get(key, "")) for key in
                       (NAME_LABEL, GROUP_INDEX_LABEL, TEMPLATE_REVISION_HASH_LABEL)},
            "annotations": {k: v for k, v in lws_annotations.items()
                            if k.startswith("volcano.sh/")},
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod",
                                 "name": leader_meta.get("name"), "uid": leader_meta.get("uid"),
                                 "controller": True, "blockOwnerDeletion": True}],
        },
        "spec": group_spec,
    }
