"""Typed, read-only views of the objects the logic reads, with every default resolved here once.

The objects arrive as the API server (or the watch cache) holds them: JSON dicts. Reading them
as dict chains scattered the defaults over the code base, and they disagreed: ``replicas`` read
as ``or 0`` in one place, ``or 1`` in another and ``is None`` in a third, although the API says
an absent ``replicas`` is 1 and an explicit 0 is a set scaled to zero. A view answers each
question in one place with the API's default (``api.defaults`` gives the same defaults to the
stored object; a view also serves objects stored before a default existed, or by a CRD
installed without its structural defaults).

A view wraps the object and never copies it: ``raw`` is the object itself, for the builders
that copy a template into a child, and for writes guarded by its ``resourceVersion``. Building
one costs a few attribute reads, so a pass builds them freely.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Self, TypeAlias

from lws_operator.api.constants import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GROUP_IDENTITY_HASH,
    GROUP_INDEX_LABEL,
    PAUSED_ANNOTATION,
    RECREATE_GROUP_AFTER_START_ANNOTATION,
    REPLICAS_ANNOTATION,
    SUBDOMAIN_POLICY_SHARED,
    SUBGROUP_POLICY_LEADER_WORKER,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.api.defaults import (
    DEFAULT_BACKOFF_BASE_SECONDS,
    DEFAULT_BACKOFF_CAP_SECONDS,
    DEFAULT_RESTART_POLICY,
    DEFAULT_ROLLING_UPDATE,
)
from lws_operator.api.validation import scheduling_level

LEADER_INDEX = "0"
# The restart policies under which a failed pod recreates its group (LWS docs, "Failure Handling").
RECREATE_GROUP_ON_POD_RESTART = "RecreateGroupOnPodRestart"
RECREATE_GROUP_AFTER_START = "RecreateGroupAfterStart"
RECREATING_POLICIES = (RECREATE_GROUP_ON_POD_RESTART, RECREATE_GROUP_AFTER_START)


def _map(value: Any) -> Mapping[str, Any]:
    # ``type(...) is dict`` first: the objects are JSON dicts, and the ABC check behind
    # ``isinstance(value, Mapping)`` showed in a pass's profile when it came first.
    if type(value) is dict or isinstance(value, Mapping):
        return value
    return {}


def metadata(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if obj is None:
        return {}
    value = obj.get("metadata")
    return value if type(value) is dict else _map(value)


def labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    value = metadata(obj).get("labels")
    return value if type(value) is dict else _map(value)


def annotations_of(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return _map(metadata(obj).get("annotations"))


def paused(obj: Mapping[str, Any] | None) -> bool:
    """Whether a set (a LeaderWorkerSet or a DisaggregatedSet) carries
    ``lws-operator.dev/paused: "true"`` (the webhook refuses any value but ``"true"`` and
    ``"false"``)."""
    return annotations_of(obj).get(PAUSED_ANNOTATION) == "true"


def is_leader(pod: Mapping[str, Any] | None) -> bool:
    """Whether ``pod`` is the leader of its group: the pod webhook labels a leader with worker
    index 0 (upstream's pod webhook Default (pod_webhook.go)), and a pod without the label is a
    worker. Works on the labels of a pod
    template or a pod being admitted as well (``metadata.labels``)."""
    return labels(pod).get(WORKER_INDEX_LABEL) == LEADER_INDEX


def group_index(obj: Mapping[str, Any] | None) -> str | None:
    """The group (replica) index label of a pod or worker StatefulSet, as written."""
    value = labels(obj).get(GROUP_INDEX_LABEL)
    return None if value is None else str(value)


def revision_of(obj: Mapping[str, Any] | None) -> str:
    """The template revision key an object carries ('' when it carries none)."""
    return str(labels(obj).get(TEMPLATE_REVISION_HASH_LABEL) or "")


def deleting(obj: Mapping[str, Any] | None) -> bool:
    """Whether ``obj`` is being deleted (it has a deletionTimestamp)."""
    return bool(metadata(obj).get("deletionTimestamp"))


def count_of(value: Any) -> int | None:
    """A non-negative integer field as written: an int, or a string of digits (a field edited
    by hand); None when absent or anything else (a bool is not a count)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return None


@dataclass(frozen=True)
class RollingUpdate:
    """``spec.rolloutStrategy.rollingUpdateConfiguration`` with its defaults; the values are
    ints or percentage strings, as written."""

    max_unavailable: int | str
    max_surge: int | str
    partition: int


@dataclass(frozen=True)
class SubGroupPolicy:
    """``leaderWorkerTemplate.subGroupPolicy``. ``policy_type`` is as written (None when the
    object was stored before the CRD default existed): the worker template carries the type
    only when the revision names one, the leader template the effective type (upstream's
    SSAWithStatefulset (leaderworkerset_controller.go))."""

    policy_type: str | None
    size: int | None

    @property
    def effective_type(self) -> str:
        """The type with the CRD default (``LeaderWorker``) for one stored without it."""
        return self.policy_type or SUBGROUP_POLICY_LEADER_WORKER


@dataclass(frozen=True)
class RestartBackoff:
    """``leaderWorkerTemplate.restartBackoff`` with the LWS docs' defaults: 10 s base, 300 s cap."""

    base_seconds: int
    cap_seconds: int


@dataclass(frozen=True)
class ObjectView:
    """What every view of an API object answers the same way: its identity, metadata, spec and
    status, read from ``raw`` (the stored object itself)."""

    raw: Mapping[str, Any]

    @classmethod
    def of(cls, obj: Mapping[str, Any] | Self) -> Self:
        """The view of ``obj`` (itself when it is one already)."""
        if isinstance(obj, cls):
            return obj
        assert not isinstance(obj, ObjectView), "a view of another kind of object"
        return cls(obj)

    # ------------------------------------------------------------------------- identity
    @property
    def meta(self) -> Mapping[str, Any]:
        return metadata(self.raw)

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or "")

    @property
    def namespace(self) -> str:
        return str(self.meta.get("namespace") or "")

    @property
    def key(self) -> tuple[str, str]:
        return self.namespace, self.name

    @property
    def uid(self) -> str:
        return str(self.meta.get("uid") or "")

    @property
    def generation(self) -> int:
        return int(self.meta.get("generation") or 0)

    @property
    def resource_version(self) -> str | None:
        value = self.meta.get("resourceVersion")
        return None if value is None else str(value)

    @property
    def annotations(self) -> Mapping[str, str]:
        return _map(self.meta.get("annotations"))

    @property
    def paused(self) -> bool:
        """Whether the set's rollout is paused (``logic.rollout.pause``): the annotation says
        ``"true"``, as :func:`paused` reads it on any object."""
        return paused(self.raw)

    @property
    def deleting(self) -> bool:
        return deleting(self.raw)

    # ------------------------------------------------------------------ spec and status
    @property
    def spec(self) -> Mapping[str, Any]:
        return _map(self.raw.get("spec"))

    @property
    def status(self) -> Mapping[str, Any]:
        return _map(self.raw.get("status"))


@dataclass(frozen=True)
class StatefulSetView(ObjectView):
    """A leader or worker StatefulSet as the logic reads it, with the API's defaults: an absent
    ``spec.replicas`` is 1, an absent partition 0 (we always write it; upstream would crash on
    one without it), an absent ``status.replicas`` 0 (the field is omitted when zero)."""

    @property
    def replicas(self) -> int:
        value = self.spec.get("replicas")
        return 1 if value is None else int(value)

    @property
    def partition(self) -> int:
        rolling = _map(_map(self.spec.get("updateStrategy")).get("rollingUpdate"))
        value = rolling.get("partition")
        return 0 if value is None else int(value)

    @property
    def replicas_annotation(self) -> str | None:
        """The ``replicas`` annotation the leader StatefulSet carries (upstream's
        rollingUpdateParameters (leaderworkerset_controller.go)), when it is a string."""
        value = annotations_of(self.raw).get(REPLICAS_ANNOTATION)
        return value if isinstance(value, str) else None

    @property
    def status_replicas(self) -> int:
        return int(self.status.get("replicas") or 0)


@dataclass(frozen=True)
class LeaderWorkerSetView(ObjectView):
    """A LeaderWorkerSet as the logic reads it. Build with :meth:`of`."""

    @property
    def template(self) -> Mapping[str, Any]:
        """``spec.leaderWorkerTemplate``."""
        return _map(self.spec.get("leaderWorkerTemplate"))

    @property
    def replicas(self) -> int:
        """Groups wanted: an absent ``replicas`` is 1, an explicit 0 scales the set to zero."""
        value = self.spec.get("replicas")
        return 1 if value is None else int(value)

    @property
    def size(self) -> int:
        """Pods per group, the leader included (absent or 0: 1)."""
        return int(self.template.get("size") or 1)

    @property
    def worker_template(self) -> Mapping[str, Any]:
        return _map(self.template.get("workerTemplate"))

    @property
    def leader_template(self) -> Mapping[str, Any] | None:
        """The leader's own pod template, or None when the leader uses the worker template."""
        value = self.template.get("leaderTemplate")
        return value if isinstance(value, Mapping) else None

    @property
    def leader_pod_source(self) -> Mapping[str, Any]:
        """The template leader pods are made from: the leader template, or the worker template
        when there is none (an empty leader template is a template, as upstream reads it)."""
        leader = self.leader_template
        return self.worker_template if leader is None else leader

    @property
    def subgroup_policy(self) -> SubGroupPolicy | None:
        """``subGroupPolicy``, None when the set has none."""
        value = self.template.get("subGroupPolicy")
        if not isinstance(value, Mapping):
            return None
        policy_type, size = value.get("subGroupPolicyType"), value.get("subGroupSize")
        return SubGroupPolicy(None if policy_type is None else str(policy_type),
                              None if size is None else int(size))

    @property
    def volume_claim_templates(self) -> list[Mapping[str, Any]]:
        return [c for c in self.template.get("volumeClaimTemplates") or []
                if isinstance(c, Mapping)]

    @property
    def pvc_retention_policy(self) -> Mapping[str, Any] | None:
        value = self.template.get("persistentVolumeClaimRetentionPolicy")
        return value if isinstance(value, Mapping) else None

    @property
    def max_group_restarts(self) -> int | None:
        """``maxGroupRestarts``; None: no budget (LWS docs, "Limit Automatic Group Recreation")."""
        return count_of(self.template.get("maxGroupRestarts"))

    @property
    def restart_backoff(self) -> RestartBackoff | None:
        """``restartBackoff`` with its defaults, None without the block (no backoff)."""
        value = self.template.get("restartBackoff")
        if not isinstance(value, Mapping):
            return None
        base, cap = count_of(value.get("baseSeconds")), count_of(value.get("capSeconds"))
        return RestartBackoff(DEFAULT_BACKOFF_BASE_SECONDS if base is None else base,
                              DEFAULT_BACKOFF_CAP_SECONDS if cap is None else cap)

    @property
    def restart_policy(self) -> str:
        """``RecreateGroupOnPodRestart`` (default), ``RecreateGroupAfterStart`` or ``None``;
        the deprecated ``Default`` reads as ``None``, as the webhook stores it."""
        value = self.template.get("restartPolicy") or DEFAULT_RESTART_POLICY
        return "None" if value == "Default" else str(value)

    @property
    def recreates_groups(self) -> bool:
        """Whether a failed pod recreates its group at all (upstream's handleRestartPolicy
        (pod_controller.go))."""
        return self.restart_policy in RECREATING_POLICIES

    @property
    def recreate_after_start(self) -> bool:
        """``RecreateGroupAfterStart``, or the legacy experimental annotation that asks for it
        (the annotation applies whatever the policy says, as upstream reads it)."""
        return (self.restart_policy == RECREATE_GROUP_AFTER_START
                or RECREATE_GROUP_AFTER_START_ANNOTATION in self.annotations)

    @property
    def startup_policy(self) -> str:
        return str(self.spec.get("startupPolicy") or "LeaderCreated")

    @property
    def group_identity(self) -> str:
        return str(self.spec.get("groupIdentity") or "Ordinal")

    @property
    def hashed(self) -> bool:
        """Whether groups are identified by hash (a leader Deployment) instead of ordinal."""
        return self.group_identity == GROUP_IDENTITY_HASH

    @property
    def pod_termination_policy(self) -> str:
        return str(self.spec.get("podTerminationPolicy") or "Sequential")

    @property
    def group_replacement_policy(self) -> str:
        """``PostTermination`` (default) or ``Immediate`` (LWS docs, "Group Replacement")."""
        return str(self.spec.get("groupReplacementPolicy") or "PostTermination")

    @property
    def network_config(self) -> Mapping[str, Any]:
        """``spec.networkConfig`` as written (empty when absent)."""
        return _map(self.spec.get("networkConfig"))

    @property
    def subdomain_policy(self) -> str:
        """``Shared`` (default, also without ``networkConfig``) or ``UniquePerReplica``."""
        return str(self.network_config.get("subdomainPolicy") or SUBDOMAIN_POLICY_SHARED)

    @property
    def rollout_type(self) -> str:
        """``spec.rolloutStrategy.type``: ``RollingUpdate`` unless written otherwise."""
        return str(_map(self.spec.get("rolloutStrategy")).get("type") or "RollingUpdate")

    @property
    def scheduling(self) -> Mapping[str, Any] | None:
        """``spec.scheduling`` (native gang scheduling), None when absent."""
        value = self.spec.get("scheduling")
        return value if isinstance(value, Mapping) else None

    @property
    def scheduling_level(self) -> str | None:
        """The active level of ``spec.scheduling`` (``lws``, ``replica`` or ``role``; ``mixed``
        for a combination validation rejects), None without native gang scheduling."""
        return scheduling_level(self.spec.get("scheduling"))

    @property
    def exclusive_topology(self) -> str | None:
        """The topology key of exclusive placement (one group per domain), if requested."""
        value = self.annotations.get(EXCLUSIVE_TOPOLOGY_ANNOTATION)
        return str(value) if value else None

    @cached_property
    def rolling_update(self) -> RollingUpdate:
        config = _map(_map(self.spec.get("rolloutStrategy")).get("rollingUpdateConfiguration"))

        def pick(key: str) -> Any:
            value = config.get(key)
            return DEFAULT_ROLLING_UPDATE[key] if value is None else value

        # ``or 0``: a null partition is no partition (the webhook defaults it to 0).
        return RollingUpdate(pick("maxUnavailable"), pick("maxSurge"),
                             int(config.get("partition") or 0))


# What the logic functions accept: the object as the API sends it, or its view.
LeaderWorkerSetLike: TypeAlias = "Mapping[str, Any] | LeaderWorkerSetView"


def lws_view(lws: LeaderWorkerSetLike) -> LeaderWorkerSetView:
    """Shorthand for :meth:`LeaderWorkerSetView.of`."""
    return LeaderWorkerSetView.of(lws)
