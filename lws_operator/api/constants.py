"""The LeaderWorkerSet API's names: group, kinds, labels, annotations, env vars, conditions.

Every key here is an interface fact shared with the upstream Go controller (upstream's
leaderworkerset_types.go, accelerators/tpu.go, pod_utils.go and
the LWS docs' tables): pods, Services and StatefulSets created by either implementation carry the
same keys, so users' selectors, dashboards and scripts keep working. Nothing else in the code base
spells these strings out.
"""

from __future__ import annotations

from typing import Final

GROUP: Final = "leaderworkerset.x-k8s.io"
VERSION: Final = "v1"
API_VERSION: Final = f"{GROUP}/{VERSION}"
KIND: Final = "LeaderWorkerSet"
PLURAL: Final = "leaderworkersets"
SINGULAR: Final = "leaderworkerset"
SHORT_NAME: Final = "lws"

_P: Final = "leaderworkerset.sigs.k8s.io/"

# Labels.
NAME_LABEL: Final = _P + "name"
TEMPLATE_REVISION_HASH_LABEL: Final = _P + "template-revision-hash"
WORKER_INDEX_LABEL: Final = _P + "worker-index"
GROUP_INDEX_LABEL: Final = _P + "group-index"
GROUP_KEY_LABEL: Final = _P + "group-key"
SUBGROUP_INDEX_LABEL: Final = _P + "subgroup-index"
SUBGROUP_KEY_LABEL: Final = _P + "subgroup-key"

# Annotations.
SIZE_ANNOTATION: Final = _P + "size"
REPLICAS_ANNOTATION: Final = _P + "replicas"
LEADER_NAME_ANNOTATION: Final = _P + "leader-name"
EXCLUSIVE_TOPOLOGY_ANNOTATION: Final = _P + "exclusive-topology"
SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION: Final = _P + "subgroup-exclusive-topology"
SUBGROUP_SIZE_ANNOTATION: Final = _P + "subgroup-size"
SUBGROUP_POLICY_TYPE_ANNOTATION: Final = _P + "subgroup-policy-type"
SUBDOMAIN_POLICY_ANNOTATION: Final = _P + "subdomainPolicy"
LEADER_REQUESTS_TPUS_ANNOTATION: Final = _P + "leader-requests-tpus"
RECREATE_GROUP_AFTER_START_ANNOTATION: Final = _P + "experimental-recreate-group-after-start"
GROUP_RESTART_COUNTS_ANNOTATION: Final = _P + "group-restart-counts"
GROUP_RESTART_BUDGET_EXHAUSTED_ANNOTATION: Final = _P + "group-restart-budget-exhausted"
# Ours (the LWS docs names no key): beside the counts, the leader UID each count was last spent on,
# so a pass that died between counting and deleting that leader is not counted twice.
GROUP_RESTART_COUNTED_ANNOTATION: Final = _P + "group-restart-counted-leaders"
RECOVER_ANNOTATION: Final = _P + "recover"
# Ours (the LWS docs names no key): on the pod templates of a Hash-mode LeaderWorkerSet, so the pod
# webhook, which sees no LeaderWorkerSet, knows to draw a random group key for a leader and to
# derive a worker's subgroup key from its leader's host name.
GROUP_IDENTITY_ANNOTATION: Final = _P + "group-identity"
GROUP_IDENTITY_HASH: Final = "Hash"

# Pod scheduling and readiness gates (LWS docs: "Group Identity", "Gang Scheduling").
GROUP_REPLACEMENT_GATE: Final = _P + "group-replacement"
GROUP_READY_CONDITION: Final = _P + "group-ready"

# Scheduling (volcano provider and native Workload-Aware Scheduling).
VOLCANO_GROUP_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-name"
GROUP_TEMPLATE_NAME_ANNOTATION: Final = "scheduling.k8s.io/group-template-name"
VOLCANO_QUEUE_ANNOTATION: Final = "scheduling.volcano.sh/queue-name"
# Native gang scheduling: what the controller writes on pod templates for the pod webhook (which
# sees no LeaderWorkerSet), the incarnation the webhook gives each leader (its workers inherit
# it), and the labels of the PodGroups LWS creates.
WORKLOAD_SCHEDULING_ANNOTATION: Final = _P + "workload-aware-scheduling"
WORKLOAD_NAME_ANNOTATION: Final = _P + "workload-name"
GROUP_INCARNATION_ANNOTATION: Final = _P + "group-incarnation"
SCHEDULING_LEVEL_LABEL: Final = _P + "scheduling-level"
ROLE_LABEL: Final = _P + "role"

# The group disruption budget (ours, beyond upstream and its docs): an opt-in annotation on a
# LeaderWorkerSet under the operator's own domain, so that it cannot collide with upstream's
# ``leaderworkerset.sigs.k8s.io/`` keys. Its value is a count or a percentage of spec.replicas
# (``logic.disruption.budget``); the Event records each eviction it refused.
OPERATOR_DOMAIN: Final = "lws-operator.dev/"  # every annotation of our own is under it
MAX_DISRUPTED_GROUPS_ANNOTATION: Final = OPERATOR_DOMAIN + "max-disrupted-groups"
REASON_EVICTION_REFUSED: Final = "EvictionRefused"
# The budget's reservations (written by the operator only): the groups whose eviction was just
# allowed, shared by every replica through the set itself (``logic.disruption.reservations``).
EVICTION_RESERVATIONS_ANNOTATION: Final = OPERATOR_DOMAIN + "eviction-reservations"
# Pause (ours, beyond upstream): ``"true"`` holds a rollout where it stands, as a Deployment's
# ``spec.paused`` does (``logic.rollout.pause``); any other value, or none, does not. Progressing
# says so with ``RolloutPaused`` (status Unknown, as a paused Deployment's), and the first pass
# after the annotation goes says ``RolloutResumed``, whose time restarts the progress deadline.
PAUSED_ANNOTATION: Final = OPERATOR_DOMAIN + "paused"
REASON_ROLLOUT_PAUSED: Final = "RolloutPaused"
REASON_ROLLOUT_RESUMED: Final = "RolloutResumed"

# DisaggregatedSet labels that may be merged into our templates by a parent controller.
DISAGGREGATEDSET_NAME_LABEL: Final = "disaggregatedset.x-k8s.io/name"

# Environment variables injected into every container and init container (upstream's
# AddLWSVariables (pod_utils.go)).
ENV_LEADER_ADDRESS: Final = "LWS_LEADER_ADDRESS"
ENV_GROUP_SIZE: Final = "LWS_GROUP_SIZE"
ENV_WORKER_INDEX: Final = "LWS_WORKER_INDEX"

# TPU environment variables (upstream's accelerators/tpu.go).
TPU_RESOURCE: Final = "google.com/tpu"
ENV_TPU_WORKER_HOSTNAMES: Final = "TPU_WORKER_HOSTNAMES"
ENV_TPU_WORKER_ID: Final = "TPU_WORKER_ID"
ENV_TPU_NAME: Final = "TPU_NAME"
ENV_TPU_PROCESS_ADDRESSES: Final = "TPU_PROCESS_ADDRESSES"
ENV_TPU_PROCESS_PORT: Final = "TPU_PROCESS_PORT"
TPU_DEFAULT_PORT: Final = 8476

# Condition types and reasons (upstream's conditions (leaderworkerset_types.go) and its docs).
CONDITION_AVAILABLE: Final = "Available"
CONDITION_PROGRESSING: Final = "Progressing"
CONDITION_UPDATE_IN_PROGRESS: Final = "UpdateInProgress"
CONDITION_DEGRADED: Final = "Degraded"
CONDITION_WORKLOAD_SCHEDULING_CREATED: Final = "WorkloadSchedulingCreated"

# Limits (upstream's webhook validation (leaderworkerset_webhook.go) and the LWS docs' Hash-mode
# naming).
MAX_REPLICAS: Final = 1_000_000
MAX_INT32: Final = 2_147_483_647
HASH_MODE_NAME_LIMIT: Final = 43
HASH_MODE_NAME_LIMIT_SIZE_ONE: Final = 54
# The StatefulSet controller's label on every pod it creates: the name of the ControllerRevision
# the pod was made from, as the StatefulSet's status.currentRevision/updateRevision name it.
CONTROLLER_REVISION_HASH_LABEL: Final = "controller-revision-hash"
# The longest StatefulSet name whose pods the StatefulSet controller can create: it labels each
# pod ``controller-revision-hash: <name>-<hash of up to 10 characters>``, a value of at most 63.
STATEFULSET_NAME_LIMIT: Final = 52
# A Hash-mode group is named by this many leading characters of its key (LWS docs "Group Identity").
HASH_KEY_PREFIX: Final = 8

# Admission webhook paths (upstream's webhook markers in leaderworkerset_webhook.go and
# pod_webhook.go): kept identical to upstream's so registrations
# written for the Go controller can point at us unchanged.
MUTATE_LWS_PATH: Final = "/mutate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
VALIDATE_LWS_PATH: Final = "/validate-leaderworkerset-x-k8s-io-v1-leaderworkerset"
MUTATE_POD_PATH: Final = "/mutate--v1-pod"
VALIDATE_POD_PATH: Final = "/validate--v1-pod"
# Ours: the group disruption budget on the Eviction API (``admission.eviction``).
VALIDATE_EVICTION_PATH: Final = "/validate--v1-pod-eviction"

# Enum values the pod webhook compares annotations against (upstream's pod webhook Default
# (pod_webhook.go)), and the one scheduler
# provider upstream supports (upstream's volcano provider (pkg/schedulerprovider)).
SUBDOMAIN_POLICY_UNIQUE_PER_REPLICA: Final = "UniquePerReplica"
SUBGROUP_POLICY_LEADER_EXCLUDED: Final = "LeaderExcluded"
SCHEDULER_PROVIDER_VOLCANO: Final = "volcano"

# Defaults the controllers fall back to when a stored object predates defaulting (upstream's
# leaderworkerset_types.go),
# and the server-side-apply field manager of the leader StatefulSet (upstream's SSAWithStatefulset
# (leaderworkerset_controller.go)).
SUBDOMAIN_POLICY_SHARED: Final = "Shared"
SUBGROUP_POLICY_LEADER_WORKER: Final = "LeaderWorker"
FIELD_MANAGER: Final = "lws"

# Condition reasons and messages (upstream's conditions (leaderworkerset_types.go)), and the
# reasons, types and actions of the Events the
# LWS controller records (upstream's events (leaderworkerset_controller.go)): tests and users match
# them verbatim.
REASON_ALL_GROUPS_READY: Final = "AllGroupsReady"
REASON_GROUPS_PROGRESSING: Final = "GroupsProgressing"
REASON_GROUPS_UPDATING: Final = "GroupsUpdating"
MESSAGE_ALL_GROUPS_READY: Final = "All replicas are ready"
MESSAGE_GROUPS_PROGRESSING: Final = "Replicas are progressing"
MESSAGE_GROUPS_UPDATING: Final = "Rolling Upgrade is in progress"
EVENT_TYPE_NORMAL: Final = "Normal"
EVENT_TYPE_WARNING: Final = "Warning"
EVENT_ACTION_CREATE: Final = "Create"
EVENT_ACTION_UPDATE: Final = "Update"
EVENT_ACTION_DELETE: Final = "Delete"

# Event reasons of the controllers (upstream's leaderworkerset_controller.go and pod_controller.go).
REASON_CREATING_REVISION: Final = "CreatingRevision"
REASON_FAILED_CREATE: Final = "FailedCreate"
REASON_FAILED_UPDATE: Final = "FailedUpdate"
EVENT_REPORTING_CONTROLLER: Final = "leaderworkerset"
REASON_RECREATE_GROUP: Final = "RecreateGroup"

# Progress deadline and automatic rollback (ours, beyond upstream and its docs): opt-in
# annotations on a LeaderWorkerSet under the operator's own domain, so that no key can collide
# with upstream's ``leaderworkerset.sigs.k8s.io/`` ones. ``rolled-back-from`` is written by the
# operator with a rollback: the revision it rolled back from, so that revision is never rolled
# back a second time (one rollback per bad revision).
PROGRESS_DEADLINE_ANNOTATION: Final = OPERATOR_DOMAIN + "progress-deadline-seconds"
ROLLBACK_ON_DEADLINE_ANNOTATION: Final = OPERATOR_DOMAIN + "rollback-on-deadline"
ROLLED_BACK_FROM_ANNOTATION: Final = OPERATOR_DOMAIN + "rolled-back-from"
REASON_PROGRESS_DEADLINE_EXCEEDED: Final = "ProgressDeadlineExceeded"
REASON_ROLLED_BACK: Final = "RolledBack"
# Progressing's reason while a rollout is stalled on pods the scheduler cannot place (ours,
# ``logic.rollout.stall``); the group metrics read it too.
REASON_ROLLOUT_STALLED: Final = "RolloutStalled"

# Revision history (ours, beyond upstream, which keeps only the current and the update revision):
# how many revisions besides the current one a set keeps (an opt-out annotation on the set, like
# a Deployment's revisionHistoryLimit), the change cause kubectl and users record on the set
# (copied onto its revision, as a Deployment's onto its ReplicaSet), and the time the operator
# first saw the set fully Ready on a revision (written on the ControllerRevision by the operator
# only; ``logic.identity.history``).
REVISION_HISTORY_LIMIT_ANNOTATION: Final = OPERATOR_DOMAIN + "revision-history-limit"
DEFAULT_REVISION_HISTORY_LIMIT: Final = 10
CHANGE_CAUSE_ANNOTATION: Final = "kubernetes.io/change-cause"
FULLY_READY_ANNOTATION: Final = OPERATOR_DOMAIN + "fully-ready-at"

# The leader-election Lease's default name: the Go manager's (its kubebuilder ID), so that a
# replica of either implementation waits for the other's leader.
DEFAULT_LEASE_NAME: Final = "b8b2488c.x-k8s.io"

# LeaderWorkerSets reconciled concurrently by default (``--workers``; the chart's ``workers``
# says the same). A pass mostly waits on the API server: with 8, a burst of 125 sets created or
# rolled out together waited up to 10 s for a worker, with 32 under 1 s (docs/performance.md).
DEFAULT_WORKERS: Final = 32
