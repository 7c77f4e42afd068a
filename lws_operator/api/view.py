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
from typing import Any

from lws_operator.api.constants import (
    EXCLUSIVE_TOPOLOGY_ANNOTATION,
    GROUP_IDENTITY_HASH,
    GROUP_INDEX_LABEL,
    TEMPLATE_REVISION_HASH_LABEL,
    WORKER_INDEX_LABEL,
)
from lws_operator.api.defaults import DEFAULT_RESTART_POLICY, DEFAULT_ROLLING_UPDATE

LEADER_INDEX = "0"


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def metadata(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return _map((obj or {}).get("metadata"))


def labels(obj: Mapping[str, Any] | None) -> Mapping[str, str]:
    return _map(metadata(obj).get("labels"))


def is_leader(pod: Mapping[str, Any]) -> bool:
    """Whether ``pod`` is the leader of its group (worker index 0)."""
    return labels(pod).get(WORKER_INDEX_LABEL) == LEADER_INDEX


def group_index(obj: Mapping[str, Any]) -> str | None:
    """The group (replica) index label of a pod or worker StatefulSet, as written."""
    value = labels(obj).get(GROUP_INDEX_LABEL)
    return None if value is None else str(value)


def revision_of(obj: Mapping[str, Any]) -> str:
    """The template revision key an object carries ('' when it carries none)."""
    return str(labels(obj).get(TEMPLATE_REVISION_HASH_LABEL) or "")


def deleting(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` is being deleted (it has a deletionTimestamp)."""
    return bool(metadata(obj).get("deletionTimestamp"))


@dataclass(frozen=True)
class RollingUpdate:
    """``spec.rolloutStrategy.rollingUpdateConfiguration`` with its defaults; the values are
    ints or percentage strings, as written."""

    max_unavailable: int | str
    max_surge: int | str
    partition: int


@dataclass(frozen=True)
class LeaderWorkerSetView:
    """A LeaderWorkerSet as the logic reads it. Build with :meth:`of`."""

    raw: Mapping[str, Any]

    @classmethod
    def of(cls, lws: Mapping[str, Any] | LeaderWorkerSetView) -> LeaderWorkerSetView:
        """The view of ``lws`` (itself when it is one already)."""
        return lws if isinstance(lws, LeaderWorkerSetView) else cls(lws)

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
    def deleting(self) -> bool:
        return deleting(self.raw)

    # ----------------------------------------------------------------------------- spec
    @property
    def spec(self) -> Mapping[str, Any]:
        return _map(self.raw.get("spec"))

    @property
    def status(self) -> Mapping[str, Any]:
        return _map(self.raw.get("status"))

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
    def restart_policy(self) -> str:
        """``RecreateGroupOnPodRestart`` (default), ``RecreateGroupAfterStart`` or ``None``;
        the deprecated ``Default`` reads as ``None``, as the webhook stores it."""
        value = self.template.get("restartPolicy") or DEFAULT_RESTART_POLICY
        return "None" if value == "Default" else str(value)

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
    def subdomain_policy(self) -> str:
        return str(_map(self.spec.get("networkConfig")).get("subdomainPolicy") or "Shared")

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

        return RollingUpdate(pick("maxUnavailable"), pick("maxSurge"), int(pick("partition")))


def lws_view(lws: Mapping[str, Any] | LeaderWorkerSetView) -> LeaderWorkerSetView:
    """Shorthand for :meth:`LeaderWorkerSetView.of`."""
    return LeaderWorkerSetView.of(lws)
