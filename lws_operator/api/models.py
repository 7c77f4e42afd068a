"""pydantic models of the LeaderWorkerSet spec and status (``leaderworkerset.x-k8s.io/v1``).

They are read-only views over the dicts the API server gives us: parse once per pass or admission
with :meth:`LeaderWorkerSet.from_body`, never store models in caches, never write an object back
from a model dump. Three choices follow from that:

* Pod templates and PVC templates stay ``dict[str, Any]``: typed Kubernetes models drop unknown
  fields and reject integer quantities, and the CRD schema already validates them.
* Unknown fields are ignored rather than rejected: the API server prunes what the CRD does not
  know, so an unknown field here only means the CRD is newer than this code.
* Enumerations are plain ``str`` aliases checked by the CRD (and re-checked by validation where
  the webhook must name a field), so a newer enum value never makes an object unreadable.

Field names are snake_case with camelCase aliases; dumps use ``by_alias=True``. Defaults are
``None`` where the API distinguishes "unset" from a value: defaulting (``defaults.py``) fills them.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

IntOrString = int | str

RestartPolicy = Literal["Default", "RecreateGroupOnPodRestart", "RecreateGroupAfterStart", "None"]
StartupPolicy = Literal["LeaderCreated", "LeaderReady"]
SubdomainPolicy = Literal["Shared", "UniquePerReplica"]
SubGroupPolicyType = Literal["LeaderWorker", "LeaderExcluded"]
RolloutStrategyType = Literal["RollingUpdate"]
GroupIdentity = Literal["Ordinal", "Hash"]
GroupReplacementPolicy = Literal["PostTermination", "Immediate"]
PodTerminationPolicy = Literal["Sequential", "Parallel"]


class ApiModel(BaseModel):
    """Base: camelCase aliases, population by either name, unknown fields ignored."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
    )

    def to_api(self) -> dict[str, Any]:
        """The object as the API spells it (camelCase, unset fields left out)."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


class SubGroupPolicy(ApiModel):
    """How a group is split into subgroups (KEP-115/257)."""

    sub_group_policy_type: SubGroupPolicyType | None = None
    sub_group_size: int | None = None


class RestartBackoff(ApiModel):
    """Minimum age of a group before it is recreated: min(base * 2^count, cap) seconds."""

    base_seconds: int | None = Field(default=None, ge=0)
    cap_seconds: int | None = Field(default=None, ge=0)


class PersistentVolumeClaimRetentionPolicy(ApiModel):
    when_deleted: str | None = None
    when_scaled: str | None = None


class LeaderWorkerTemplate(ApiModel):
    """The template of one group: its pods, size and failure handling."""

    leader_template: dict[str, Any] | None = None
    worker_template: dict[str, Any]
    size: int | None = None
    restart_policy: str | None = None
    max_group_restarts: int | None = None
    restart_backoff: RestartBackoff | None = None
    sub_group_policy: SubGroupPolicy | None = None
    volume_claim_templates: list[dict[str, Any]] | None = None
    persistent_volume_claim_retention_policy: PersistentVolumeClaimRetentionPolicy | None = None


class RollingUpdateConfiguration(ApiModel):
    partition: int | None = None
    max_unavailable: IntOrString | None = None
    max_surge: IntOrString | None = None


class RolloutStrategy(ApiModel):
    type: str | None = None
    rolling_update_configuration: RollingUpdateConfiguration | None = None


class NetworkConfig(ApiModel):
    subdomain_policy: str | None = None


class GangPolicy(ApiModel):
    """``gang`` scheduling policy; ``minCount`` is derived from size and replicas by LWS."""

    min_count: int | None = None


class SchedulingPolicy(ApiModel):
    basic: dict[str, Any] | None = None
    gang: GangPolicy | None = None


class GangSettings(ApiModel):
    """The PodGroup building blocks a user may set at one scheduling level."""

    scheduling_policy: SchedulingPolicy | None = None
    scheduling_constraints: dict[str, Any] | None = None
    disruption_mode: dict[str, Any] | None = None
    resource_claims: list[dict[str, Any]] | None = None

    def is_set(self) -> bool:
        return any(
            v is not None
            for v in (self.scheduling_policy, self.scheduling_constraints,
                      self.disruption_mode, self.resource_claims)
        )


class ReplicaScheduling(GangSettings):
    """Replica level; setting ``leader`` or ``worker`` selects the role level instead."""

    leader: GangSettings | None = None
    worker: GangSettings | None = None


class Scheduling(GangSettings):
    """``spec.scheduling``: native gang scheduling. Top-level settings select the whole-LWS
    level, ``replica`` the replica level (the default of an empty block), ``replica.leader`` /
    ``replica.worker`` the role level."""

    replica: ReplicaScheduling | None = None

    def level(self) -> Literal["lws", "replica", "role"] | None:
        """The single active level, or None when settings of two levels are mixed (invalid)."""
        replica = self.replica
        role = replica is not None and (replica.leader is not None or replica.worker is not None)
        if self.is_set():
            return None if replica is not None else "lws"
        if role:
            assert replica is not None
            return None if replica.is_set() else "role"
        return "replica"


class LeaderWorkerSetSpec(ApiModel):
    replicas: int | None = None
    leader_worker_template: LeaderWorkerTemplate
    rollout_strategy: RolloutStrategy | None = None
    startup_policy: str | None = None
    network_config: NetworkConfig | None = None
    group_identity: str | None = None
    group_replacement_policy: str | None = None
    pod_termination_policy: str | None = None
    scheduling: Scheduling | None = None


class Condition(ApiModel):
    """A ``metav1.Condition``."""

    type: str
    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = None
    observed_generation: int | None = None


class LeaderWorkerSetStatus(ApiModel):
    conditions: list[Condition] = Field(default_factory=list)
    ready_replicas: int = 0
    updated_replicas: int = 0
    replicas: int = 0
    hpa_pod_selector: str | None = None
    observed_generation: int | None = None


class ObjectMeta(ApiModel):
    """The metadata fields we read; the full object keeps the rest."""

    name: str = ""
    namespace: str = ""
    uid: str = ""
    generation: int | None = None
    resource_version: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)
    deletion_timestamp: str | None = None


class LeaderWorkerSet(ApiModel):
    api_version: str = "leaderworkerset.x-k8s.io/v1"
    kind: str = "LeaderWorkerSet"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: LeaderWorkerSetSpec
    status: LeaderWorkerSetStatus | None = None

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> LeaderWorkerSet:
        """Parse an API object (a dict as the server sent it)."""
        return cls.model_validate(body)
