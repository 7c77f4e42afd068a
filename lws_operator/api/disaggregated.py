"""The DisaggregatedSet API (``disaggregatedset.x-k8s.io/v1``): its keys and typed views.

A DisaggregatedSet lists 2-10 roles (prefill, decode, ...), each a full LeaderWorkerSet spec; the
controller runs one child LeaderWorkerSet per (slice, revision, role). Everything the logic reads
of a DisaggregatedSet, a role or a role scaler goes through the views here, so each default is
resolved once: an absent ``slices`` is 1, an absent role ``replicas`` is 1 (the CRD's embedded
LeaderWorkerSet default), an absent ``scaling`` is Static, an absent placement type is None.
The keys are upstream's (``api/disaggregatedset/v1``); users' routers select on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

from lws_operator.api.constants import DISAGGREGATEDSET_NAME_LABEL
from lws_operator.api.view import ObjectView, _map, metadata, paused

GROUP: Final = "disaggregatedset.x-k8s.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "DisaggregatedSet"
PLURAL: Final = "disaggregatedsets"
SCALER_KIND: Final = "DisaggregatedSetRoleScaler"
SCALER_PLURAL: Final = "disaggregatedsetrolescalers"

NAME_LABEL: Final = DISAGGREGATEDSET_NAME_LABEL
ROLE_LABEL: Final = f"{GROUP}/role"
SLICE_LABEL: Final = f"{GROUP}/slice"
REVISION_LABEL: Final = f"{GROUP}/revision"
INITIAL_REPLICAS_ANNOTATION: Final = f"{GROUP}/initial-replicas"

# The documented environment variables on every container of a DisaggregatedSet's pods.
ENV_NAME: Final = "DISAGGREGATEDSET_NAME"
ENV_ROLE: Final = "DISAGGREGATEDSET_ROLE"
ENV_SLICE: Final = "DISAGGREGATEDSET_SLICE"
ENV_REVISION: Final = "DISAGGREGATEDSET_REVISION"

CONDITION_AVAILABLE: Final = "Available"
CONDITION_PROGRESSING: Final = "Progressing"
SCALER_CONDITION_READY: Final = "Ready"

SCALING_STATIC: Final = "Static"
SCALING_EXTERNAL: Final = "External"
PLACEMENT_NONE: Final = "None"
PLACEMENT_EXCLUSIVE_SLICE: Final = "ExclusiveSlice"
PLACEMENT_EXCLUSIVE_TOPOLOGY: Final = "ExclusiveTopology"
# The enums of the CRD schema (hack/gen_crd.py reads them from here: one list of each).
ScalingMode = Literal["Static", "External"]
PlacementType = Literal["None", "ExclusiveSlice", "ExclusiveTopology"]

SERVICE_SUFFIX: Final = "-prv"
REVISION_LENGTH: Final = 8
MIN_ROLES: Final = 2
MAX_ROLES: Final = 10
MAX_SLICES: Final = 100
SCALER_SHORT_NAME: Final = "dsrs"
# The spec-level CEL rule's message (upstream's DisaggregatedSetSpec marker): an interface fact.
REPLICAS_RULE_MESSAGE: Final = (
    "replicas must be zero for all non-External roles or non-zero for all non-External roles")

VALIDATE_PATH: Final = "/validate-disaggregatedset-x-k8s-io-v1-disaggregatedset"
WEBHOOK_NAME: Final = "vdisaggregatedset.kb.io"


@dataclass(frozen=True)
class RoleView:
    """One entry of ``spec.roles``: its name, scaling mode, replicas and LeaderWorkerSet spec."""

    raw: Mapping[str, Any]

    @property
    def name(self) -> str:
        return str(self.raw.get("name") or "")

    @property
    def external(self) -> bool:
        """``scaling.mode: External``: replicas come from the role's scaler (absent scaling is
        Static)."""
        return _map(self.raw.get("scaling")).get("mode") == SCALING_EXTERNAL

    @property
    def spec(self) -> Mapping[str, Any]:
        """The role's LeaderWorkerSet spec, copied into every child LeaderWorkerSet."""
        return _map(self.raw.get("spec"))

    @property
    def replicas_field(self) -> int | None:
        """``spec.replicas`` as written (None when absent), for the checks that tell "set"
        from "defaulted"."""
        value = self.spec.get("replicas")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def replicas(self) -> int:
        """Groups per slice for a Static role: an absent ``replicas`` is 1 (the CRD default)."""
        value = self.replicas_field
        return 1 if value is None else value

    @property
    def leader_worker_template(self) -> Mapping[str, Any]:
        return _map(self.spec.get("leaderWorkerTemplate"))

    @property
    def group_identity(self) -> str | None:
        """The role's LeaderWorkerSet ``groupIdentity`` when set (the LWS docs let a role change
        it, which rolls the role)."""
        value = self.spec.get("groupIdentity")
        return str(value) if value else None

    @property
    def rolling_update_configuration(self) -> Mapping[str, Any] | None:
        """``rolloutStrategy.rollingUpdateConfiguration`` when present (None: the controller's
        own defaults apply, surge 1 and unavailable 0)."""
        config = _map(self.spec.get("rolloutStrategy")).get("rollingUpdateConfiguration")
        return config if isinstance(config, Mapping) else None

    @property
    def labels(self) -> Mapping[str, str]:
        """``metadata.labels`` of the role: they go onto the child LeaderWorkerSet object."""
        return _map(_map(self.raw.get("metadata")).get("labels"))

    @property
    def annotations(self) -> Mapping[str, str]:
        return _map(_map(self.raw.get("metadata")).get("annotations"))


@dataclass(frozen=True)
class PlacementPolicy:
    type: str
    topology: str

    @property
    def active(self) -> bool:
        """Whether anything is injected: a type other than None and a topology key."""
        return self.type not in ("", PLACEMENT_NONE) and bool(self.topology)


@dataclass(frozen=True)
class DisaggregatedSetView(ObjectView):
    """A DisaggregatedSet as the logic reads it. Build with :meth:`of`."""

    @property
    def roles(self) -> tuple[RoleView, ...]:
        """``spec.roles`` in spec order (the order is part of the revision and of status)."""
        return tuple(RoleView(r) for r in self.spec.get("roles") or () if isinstance(r, Mapping))

    def role(self, name: str) -> RoleView | None:
        return next((r for r in self.roles if r.name == name), None)

    @property
    def paused(self) -> bool:
        """Whether the coordinated rollout is paused (``lws-operator.dev/paused: "true"``,
        ``logic.disaggregated.steps``)."""
        return paused(self.raw)

    @property
    def slices_field(self) -> int | None:
        value = self.spec.get("slices")
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    @property
    def slices(self) -> int:
        """Copies of the whole topology: an absent (or non-positive) ``slices`` is 1."""
        value = self.slices_field
        return value if value is not None and value > 0 else 1

    @property
    def placement(self) -> PlacementPolicy:
        policy = _map(self.spec.get("placementPolicy"))
        return PlacementPolicy(str(policy.get("type") or PLACEMENT_NONE) if policy else
                               PLACEMENT_NONE, str(policy.get("topology") or ""))

    @property
    def has_placement_policy(self) -> bool:
        return isinstance(self.spec.get("placementPolicy"), Mapping)


@dataclass(frozen=True)
class RoleScalerView(ObjectView):
    """A DisaggregatedSetRoleScaler: the replica count an autoscaler writes for one role."""

    @property
    def role(self) -> str:
        return str(_map(self.meta.get("labels")).get(ROLE_LABEL) or "")

    @property
    def replicas(self) -> int:
        """``spec.replicas`` (non-pointer upstream: absent reads as 0, the CRD default)."""
        value = self.spec.get("replicas")
        return value if isinstance(value, int) and not isinstance(value, bool) else 0


def controlled_by_a_set(obj: Mapping[str, Any]) -> bool:
    """Whether ``obj`` has a controller ownerReference to a DisaggregatedSet (any: the
    LeaderWorkerSet controller, which asks, does not know the set's UID)."""
    return any(
        isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("kind") == KIND
        and str(ref.get("apiVersion") or "").startswith(f"{GROUP}/")
        for ref in metadata(obj).get("ownerReferences") or ())


def controlled_by(obj: Mapping[str, Any], uid: str) -> bool:
    """Whether ``obj`` has a controller ownerReference to the object with ``uid``: the only
    ownership the DisaggregatedSet controller trusts (labels alone never are: a deleted and
    recreated namesake, or a hand-made object, can carry them)."""
    return bool(uid) and any(
        isinstance(ref, Mapping) and ref.get("controller") is True and ref.get("uid") == uid
        for ref in metadata(obj).get("ownerReferences") or ())
