"""What the pod admission webhook does to a LeaderWorkerSet pod at creation (upstream's pod webhook
Default, pod_webhook.go).

StatefulSets create the pods of a group from templates that cannot know a pod's ordinal, so the
per-pod facts are filled in at admission: the group index and group key of a leader, the worker
index of a worker, subgroup labels, exclusive-placement affinity, the per-replica subdomain, the
volcano PodGroup annotation, the TPU and LWS environment variables, and, on the pods of a
DisaggregatedSet, the documented ``DISAGGREGATEDSET_*`` variables. This module is that
decision as a pure function of the pod; the webhook server turns its result into a JSON patch.

Pods created by the upstream Go webhook and by this one must be indistinguishable, so its quirks
are kept (each is noted where it happens); only where upstream would crash do we reject the pod
with a clear message instead.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from lws_operator.api.constants import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GROUP_IDENTITY_ANNOTATION,
    GROUP_IDENTITY_HASH,
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    GROUP_READY_CONDITION,
    GROUP_REPLACEMENT_GATE,
    HASH_KEY_PREFIX,
    LEADER_NAME_ANNOTATION,
    NAME_LABEL,
    SCHEDULER_PROVIDER_VOLCANO,
    SIZE_ANNOTATION,
    SUBDOMAIN_POLICY_ANNOTATION,
    SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA,
    SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    SUBGROUP_INDEX_LABEL,
    SUBGROUP_KEY_LABEL,
    SUBGROUP_POLICY_LEADER_EXCLUDED,
    SUBGROUP_POLICY_TYPE_ANNOTATION,
    SUBGROUP_SIZE_ANNOTATION,
    TEMPLATE_REVISION_HASH_LABEL,
    VOLCANO_GROUP_NAME_ANNOTATION,
    WORKER_INDEX_LABEL,
    WORKLOAD_SCHEDULING_ANNOTATION,
)
from lws_operator.api.view import is_leader
from lws_operator.logic.identity.keys import (
    group_key,
    parse_int,
    split_ordinal,
    subgroup_index,
    subgroup_key,
)
from lws_operator.logic.mutation.env import add_disaggregatedset_env, add_lws_env
from lws_operator.logic.mutation.tpu import add_tpu_env, pod_requests_tpus
from lws_operator.logic.objects.meta import host_name
from lws_operator.logic.placement.affinity import set_exclusive_affinities
from lws_operator.logic.placement.gang import assign_pod_group, new_incarnation

SUPPORTED_SCHEDULER_PROVIDERS = frozenset({SCHEDULER_PROVIDER_VOLCANO})


class PodRejected(ValueError):
    """The pod cannot be admitted; `message` is what the API client is told."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def new_group_key() -> str:
    """A Hash-mode group key: 40 random hex characters, the shape of an Ordinal key (SHA-1)."""
    return secrets.token_hex(20)


def _copy_json(value: Any) -> Any:
    """A deep copy of decoded JSON (dicts, lists, immutable scalars): what ``copy.deepcopy``
    returns for it, for much less (no memo, no per-type dispatch), which matters on the pod
    webhook's path, where copying the pod was most of its handling time."""
    if isinstance(value, dict):
        return {k: _copy_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy_json(v) for v in value]
    return value


def mutate_pod(pod: dict[str, Any], *, scheduler_provider: str | None = None,
               incarnation: Callable[[], str] = new_incarnation,
               random_key: Callable[[], str] = new_group_key) -> dict[str, Any]:
    """Return the admitted form of `pod` (a deep copy; the input is never modified).

    A pod without the `leaderworkerset.sigs.k8s.io/name` label comes back unchanged. Mutating an
    already-mutated pod yields an equal pod, for every pod a LeaderWorkerSet's StatefulSets create
    (a hand-made pod without `worker-index` whose name ends in `-0` is a worker the first time and,
    now labelled 0, a leader the second: upstream behaves the same).

    `scheduler_provider` is the operator's configured gang scheduler ("volcano" or None); any
    other value is a configuration error (ValueError, not PodRejected). A LeaderWorkerSet with
    native gang scheduling (``spec.scheduling``) uses the Kubernetes PodGroups instead, whatever
    the provider: its pods get ``spec.schedulingGroup`` and no volcano annotation.
    `incarnation` draws a leader's group incarnation and `random_key` a Hash-mode leader's
    group key (both random; tests pass their own).

    Raises PodRejected, with upstream's message where it has one, when the pod cannot be
    interpreted.
    """
    if scheduler_provider is not None and scheduler_provider not in SUPPORTED_SCHEDULER_PROVIDERS:
        raise ValueError(
            f"unsupported scheduler provider {scheduler_provider!r}: "
            f"supported: {', '.join(sorted(SUPPORTED_SCHEDULER_PROVIDERS))}"
        )
    result: dict[str, Any] = _copy_json(pod)
    if NAME_LABEL not in ((result.get("metadata") or {}).get("labels") or {}):
        return result
    try:
        _mutate(result, scheduler_provider, incarnation, random_key)
    except PodRejected:
        raise
    except ValueError as err:
        raise PodRejected(str(err)) from err
    return result


def _child(parent: dict[str, Any], key: str) -> dict[str, Any]:
    """The object under `key`, created empty when absent or null."""
    child: dict[str, Any] | None = parent.get(key)
    if child is None:
        child = parent[key] = {}
    return child


def _ordinal(pod_name: str) -> int:
    parsed = split_ordinal(pod_name)
    if parsed is None:
        raise PodRejected(f"parsing pod ordinal for pod {pod_name}")
    return parsed[1]


def _parse_annotation_int(value: str, key: str, pod_name: str) -> int:
    try:
        return parse_int(value)
    except ValueError as err:
        raise PodRejected(f'parsing annotation {key}="{value}" for pod {pod_name}: {err}') from None


def _mutate(pod: dict[str, Any], scheduler_provider: str | None,
            incarnation: Callable[[], str], random_key: Callable[[], str]) -> None:
    """Upstream's pod webhook Default (pod_webhook.go), in place, on the copy."""
    metadata = _child(pod, "metadata")
    name = str(metadata.get("name") or "")
    labels = _child(metadata, "labels")
    # Read-only view: annotations are only created when something is written.
    annotations: dict[str, Any] = metadata.get("annotations") or {}

    if SIZE_ANNOTATION not in annotations:
        raise PodRejected(f"size annotation is unexpectedly missing for pod {name}")
    size = _parse_annotation_int(str(annotations[SIZE_ANNOTATION]), SIZE_ANNOTATION, name)

    # A pod is a leader only with worker-index "0"; a pod without the label is a worker.
    leader = is_leader(pod)
    if leader:
        if annotations.get(GROUP_IDENTITY_ANNOTATION) == GROUP_IDENTITY_HASH:
            _identify_hash_leader(pod, size, labels, annotations, random_key)
            name = host_name(pod)
        _mutate_leader(pod, name, labels, annotations)
    else:
        _mutate_worker(pod, name, size, labels, annotations)

    native = WORKLOAD_SCHEDULING_ANNOTATION in annotations
    if native:
        assign_pod_group(pod, leader=leader, incarnation=incarnation)
    elif scheduler_provider == SCHEDULER_PROVIDER_VOLCANO:
        # One volcano PodGroup per group and revision (upstream's volcano provider
        # (pkg/schedulerprovider)); leaders and workers alike.
        _child(metadata, "annotations")[VOLCANO_GROUP_NAME_ANNOTATION] = (
            f"{labels.get(NAME_LABEL, '')}-{labels.get(GROUP_INDEX_LABEL, '')}"
            f"-{labels.get(TEMPLATE_REVISION_HASH_LABEL, '')}"
        )

    if pod_requests_tpus(pod):
        add_tpu_env(pod, size)
    add_lws_env(pod)
    add_disaggregatedset_env(pod)


def _mutate_leader(
    pod: dict[str, Any], name: str, labels: dict[str, Any], annotations: dict[str, Any]
) -> None:
    """The leader step of upstream's pod webhook Default (pod_webhook.go). Every write is guarded
    by a presence check, so a second pass is a no-op."""
    if GROUP_INDEX_LABEL not in labels:
        labels[GROUP_INDEX_LABEL] = str(_ordinal(name))

    if annotations.get(SUBDOMAIN_POLICY_ANNOTATION) == SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA:
        _child(pod, "spec")["subdomain"] = name

    if GROUP_KEY_LABEL not in labels:
        namespace = str(_child(pod, "metadata").get("namespace") or "")
        labels[GROUP_KEY_LABEL] = group_key(namespace, name)
    key = str(labels[GROUP_KEY_LABEL])
    if EXCLUSIVE_TOPOLOGY_ANNOTATION in annotations:
        # Present means on, even with an empty topology key.
        topology = str(annotations[EXCLUSIVE_TOPOLOGY_ANNOTATION])
        set_exclusive_affinities(pod, key, topology, GROUP_KEY_LABEL)

    if (
        SUBGROUP_SIZE_ANNOTATION in annotations
        and not labels.get(SUBGROUP_INDEX_LABEL)
        and annotations.get(SUBGROUP_POLICY_TYPE_ANNOTATION) != SUBGROUP_POLICY_LEADER_EXCLUDED
    ):
        # The leader always opens subgroup 0; under LeaderExcluded it belongs to no subgroup.
        labels[SUBGROUP_INDEX_LABEL] = "0"
        sub_key = subgroup_key(name, 0)
        labels[SUBGROUP_KEY_LABEL] = sub_key
        if SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION in annotations:
            # Quirk kept: with the same topology key as exclusive-topology, the group's terms
            # already satisfy the idempotence check and these are not added.
            topology = str(annotations[SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION])
            set_exclusive_affinities(pod, sub_key, topology, SUBGROUP_KEY_LABEL)


def _identify_hash_leader(pod: dict[str, Any], size: int, labels: dict[str, Any],
                          annotations: dict[str, Any], random_key: Callable[[], str]) -> None:
    """LWS docs, "Group Identity" (Hash): a leader created by the Deployment has no name yet, so it
    gets a random group key; the first 8 characters are its group index and name its host
    (``<lws>-<prefix>``), which is the name of its worker StatefulSet and its DNS record under
    the headless Service. Every Hash leader is admitted behind the ``group-replacement``
    scheduling gate (the controller lifts it, pacing replacements), and a multi-pod group's
    leader carries the ``group-ready`` readiness gate, so the Deployment counts it available only
    once its whole group is. Presence checks keep a second pass a no-op."""
    if GROUP_KEY_LABEL not in labels:
        labels[GROUP_KEY_LABEL] = random_key()
    if GROUP_INDEX_LABEL not in labels:
        labels[GROUP_INDEX_LABEL] = str(labels[GROUP_KEY_LABEL])[:HASH_KEY_PREFIX]
    lws_name = str(labels.get(NAME_LABEL, ""))
    host = f"{lws_name}-{labels[GROUP_INDEX_LABEL]}"
    spec = _child(pod, "spec")
    spec.setdefault("hostname", host)
    if annotations.get(SUBDOMAIN_POLICY_ANNOTATION) == SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA:
        spec["subdomain"] = spec["hostname"]
    elif not spec.get("subdomain"):
        spec["subdomain"] = lws_name
    gates = spec.get("schedulingGates") or []
    if not any(isinstance(g, dict) and g.get("name") == GROUP_REPLACEMENT_GATE for g in gates):
        spec["schedulingGates"] = [*gates, {"name": GROUP_REPLACEMENT_GATE}]
    if size > 1:
        readiness = spec.get("readinessGates") or []
        if not any(isinstance(g, dict) and g.get("conditionType") == GROUP_READY_CONDITION
                   for g in readiness):
            spec["readinessGates"] = [*readiness, {"conditionType": GROUP_READY_CONDITION}]


def _mutate_worker(
    pod: dict[str, Any],
    name: str,
    size: int,
    labels: dict[str, Any],
    annotations: dict[str, Any],
) -> None:
    """The worker step of upstream's pod webhook Default (pod_webhook.go). Group labels come from
    the worker StatefulSet's template; workers never
    get group-level affinity (the pod controller pins them with a nodeSelector instead)."""
    worker = _ordinal(name)
    labels[WORKER_INDEX_LABEL] = str(worker)

    if SUBGROUP_SIZE_ANNOTATION in annotations and not labels.get(SUBGROUP_INDEX_LABEL):
        sub_size = _parse_annotation_int(
            str(annotations[SUBGROUP_SIZE_ANNOTATION]), SUBGROUP_SIZE_ANNOTATION, name
        )
        if sub_size == 0:
            raise PodRejected(f"annotation {SUBGROUP_SIZE_ANNOTATION} must not be 0 for pod {name}")
        index = subgroup_index(size, sub_size, worker)
        labels[SUBGROUP_INDEX_LABEL] = str(index)
        # The leader's subgroup-0 key derives from its name, which in Hash mode is known at its
        # admission only as its host name: the worker's own name minus the ordinal.
        leader_name = (name.rsplit("-", 1)[0]
                       if annotations.get(GROUP_IDENTITY_ANNOTATION) == GROUP_IDENTITY_HASH
                       else str(annotations.get(LEADER_NAME_ANNOTATION, "")))
        sub_key = subgroup_key(leader_name, index)
        labels[SUBGROUP_KEY_LABEL] = sub_key
        if SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION in annotations:
            topology = str(annotations[SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION])
            set_exclusive_affinities(pod, sub_key, topology, SUBGROUP_KEY_LABEL)
