"""What the logic reads of an observed pod: the one declaration the watch cache keeps by.

The cache holds every pod of every group, and a pod's spec is most of its size (the containers
with the environment the pod webhook injects, the service-account token volume, tolerations), so
the cache keeps only the parts of a pod's spec that some decision reads (``kube.cache.lean``).
That trimming once dropped ``containers`` whole, while the worker StatefulSet builder asks whether
the leader pod requests TPUs: every worker of a TPU set was built as if its leader held none,
and got the wrong ``TPU_WORKER_ID`` and host list (found running upstream's TPU samples).

So the shape kept is declared here, next to the code that reads it, and the cache imports it: the
logic and the cache cannot drift apart. A decision that starts reading another part of a cached
pod's spec must add it to ``POD_SPEC_SHAPE``;
``tests/unit/logic/reconcile/test_cached_pod_reads.py`` runs the logic over cached pods that
record every read of a dropped key, and fails until it is added.

Why a projection of the containers and not a derived fact (a "requests TPUs" flag computed at
caching time): the builders keep reading a pod as the API returns it, exactly as the webhook and
the unit tests read it, with one function (``tpu.pod_requests_tpus``) deciding what "requests
TPUs" means; the cache stays a plain subset of the object, never a second interpretation of it.
Only what that function reads of a container is kept: its name (for its error message) and its
``google.com/tpu`` limit and request, so the memory cost per pod is a few short strings.

Pods are the only kind trimmed (``CACHED_SPEC_SHAPES``, and ``CACHED_STATUS_SHAPES`` for
their status, where the same holds: ``POD_STATUS_SHAPE``, whose conditions are kept only of
the types some decision looks for, ``POD_CONDITION_TYPES``): there are many of them per group
and their specs and statuses are large. Every other kind is cached whole but for
``metadata.managedFields``, which nothing reads, so no read of them can miss;
``tests/unit/logic/reconcile/test_cached_shapes.py`` checks both, and a kind that starts to be
trimmed must be declared there, with a guard like the pods'.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from lws_operator.api.constants import GROUP_READY_CONDITION, TPU_RESOURCE


@dataclass(frozen=True)
class Select:
    """Of a list of dicts, only the items whose ``key`` is one of ``values``, each projected by
    ``shape`` (a list of conditions, of which the logic looks for a few types by name)."""

    key: str
    values: frozenset[str]
    shape: Shape = True


# A shape: True keeps a value whole; a mapping keeps only the listed keys of a dict (of every
# dict, for a list of dicts), each value projected by its own shape; a ``Select`` keeps only
# some items of a list of dicts.
Shape: TypeAlias = "bool | Mapping[str, Shape] | Select"

# What ``tpu.container_requests_tpus`` reads of a container.
_CONTAINER: Final[Mapping[str, Shape]] = {
    "name": True,
    "resources": {"limits": {TPU_RESOURCE: True}, "requests": {TPU_RESOURCE: True}},
}

# Every part of a pod's spec that a decision reads (the readers in brackets). Nothing reads a
# cached pod's subdomain or termination grace period (the webhook reads the pod in the request).
POD_SPEC_SHAPE: Final[Mapping[str, Shape]] = {
    "nodeName": True,  # placed or not (gang, restart, exclusive placement in the controller)
    "schedulingGates": True,  # gated leaders (gang, hash_groups)
    "schedulingGroup": True,  # the PodGroup a pod joined (gang)
    "readinessGates": True,  # the group-ready gate of a Hash leader (hash_groups)
    "hostname": True,  # a Hash leader's host name (objects.host_name)
    "containers": _CONTAINER,  # whether the leader requests TPUs (statefulsets, tpu)
    "initContainers": _CONTAINER,
}


# The pod conditions a decision looks for, by type (the readers in brackets): ``Ready``
# (``readiness.pod_ready``, the groups' readiness and the progress deadline's Ready times),
# ``ContainersReady`` (``readiness.containers_ready``, a Hash leader's readiness but for its
# gate), ``PodScheduled`` (``restart.pending_state``, ``stall``: unschedulable groups and
# stalls) and the group-ready gate's (``hash_groups``). Of each, what they read: its status,
# reason, message and transition time. The kubelet's others (``Initialized``,
# ``PodReadyToStartContainers``, ``DisruptionTarget``, a readiness gate of someone else's) and
# every condition's ``lastProbeTime`` are never read: two of a Running pod's five conditions.
# ``tests/unit/logic/reconcile/test_cached_pod_reads.py`` records every
# condition type the logic compares a cached condition's type with, and fails for one not kept here.
POD_CONDITION_TYPES: Final = frozenset({"Ready", "ContainersReady", "PodScheduled",
                                        GROUP_READY_CONDITION})
_CONDITION: Final[Mapping[str, Shape]] = {
    "type": True, "status": True, "reason": True, "message": True, "lastTransitionTime": True}

# Every part of a pod's status that a decision reads: the phase (readiness, restart, group
# metrics), the conditions above and each container's restart count (``restart.restarted``).
# The rest (addresses, start time, QoS class, each container's image, IDs and state) is a
# Running pod's larger half as the kubelet reports it, and nothing reads it.
_CONTAINER_STATUS: Final[Mapping[str, Shape]] = {"restartCount": True}
POD_STATUS_SHAPE: Final[Mapping[str, Shape]] = {
    "phase": True,
    "conditions": Select("type", POD_CONDITION_TYPES, _CONDITION),
    "containerStatuses": _CONTAINER_STATUS,
    "initContainerStatuses": _CONTAINER_STATUS,
}

# The kinds whose spec the watch cache trims, and the shape it keeps of each (module docstring).
CACHED_SPEC_SHAPES: Final[Mapping[str, Mapping[str, Shape]]] = {"Pod": POD_SPEC_SHAPE}
# The same for status.
CACHED_STATUS_SHAPES: Final[Mapping[str, Mapping[str, Shape]]] = {"Pod": POD_STATUS_SHAPE}


def project(value: Any, shape: Shape) -> Any:
    """``value`` reduced to ``shape``; a value that is not the dict or list the shape expects is
    kept as it is (the API server never stores one, and dropping it would hide it)."""
    # Exact type checks first: shapes and decoded objects are plain dicts and lists, and
    # ``isinstance(x, Mapping)`` is an ABC check, a Python-level call for every part of every
    # pod the watch caches (``project`` was about a sixth of the watch path's samples in the
    # benchmark's create phase).
    if shape is True:
        return value
    if type(shape) is Select:
        if type(value) is not list:
            return value
        key = shape.key
        return [project(item, shape.shape) for item in value
                if (type(item) is not dict and not isinstance(item, Mapping))
                or type(item.get(key)) is not str or item[key] in shape.values]
    if type(shape) is not dict and not isinstance(shape, Mapping):
        return value
    kind = type(value)
    if kind is list:
        return [project(item, shape) for item in value]
    if kind is dict or isinstance(value, Mapping):
        return {k: project(v, shape[k]) for k, v in value.items() if k in shape}
    return value


def observed_pod_spec(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The part of a pod's spec the cache keeps (``POD_SPEC_SHAPE``); new containers, nothing
    shared with ``spec`` but the leaves."""
    return dict(project(spec, POD_SPEC_SHAPE))


def observed_spec(kind: str, spec: Mapping[str, Any]) -> Mapping[str, Any]:
    """The part of the spec of an object of ``kind`` that the cache keeps: the declared shape
    for a trimmed kind, else ``spec`` itself."""
    shape = CACHED_SPEC_SHAPES.get(kind)
    return spec if shape is None else dict(project(spec, shape))


def observed_status(kind: str, status: Mapping[str, Any]) -> Mapping[str, Any]:
    """The part of the status of an object of ``kind`` that the cache keeps: the declared
    shape for a trimmed kind, else ``status`` itself."""
    shape = CACHED_STATUS_SHAPES.get(kind)
    return status if shape is None else dict(project(status, shape))
