"""kwok Stage configuration: how fake nodes and pods move through their lifecycle.

kwok v0.8 standalone ships no stages of its own; its default set lives in the module source (as
`kustomize/stage/...`), which ``build.sh`` copies next to the kwok binary. We take the node stages,
pod completion/deletion and the chaos stages from there unchanged, and write our own pod-ready
stage because kwok's marks every readiness gate True, whereas a real kubelet reports a pod Ready
only once the gates' conditions are True (the Hash group-ready gate depends on that). Ours also
takes a default start-up delay and a per-pod override from an annotation, so rollout stages are
observable in tests.

Pod deletion is ours too, in two steps as a kubelet of Kubernetes 1.27+ does it: the containers
stop (the pod turns Succeeded, or Failed when killed at the end of its grace period), then the
pod is removed once it has no finalizers left. kwok's own stage removes a pod after a random
delay between 1 s and its deletionTimestamp, and never stops one that has finalizers. Here the
containers stop after 1 s, like a process that exits promptly on SIGTERM, or, for a pod annotated
``e2e.lws-operator.dev/stop-after-grace: "true"``, exactly when ``terminationGracePeriodSeconds``
runs out, like a workload that drains or checkpoints for its whole grace period. A pod kept by a
finalizer (a foreground deletion, a retained pod of an exhausted group) stops all the same.
"""

from __future__ import annotations

from pathlib import Path

# A pod may carry this annotation (a Go duration such as "3s") to override the cluster's delay.
READY_DELAY_ANNOTATION = "e2e.lws-operator.dev/ready-delay"
# A pod with this annotation set to "true" stops only when its termination grace period ends.
STOP_AFTER_GRACE_ANNOTATION = "e2e.lws-operator.dev/stop-after-grace"

UPSTREAM_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "node/chaos/node-not-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/chaos/pod-container-running-failed.yaml",
    # Volumes: kwok provisions a PersistentVolume for each claim of its storage class and binds
    # both, so volumeClaimTemplates work without a storage driver.
    "volume/fast/pvc-provision.yaml",
    "volume/fast/pv-bind.yaml",
    "volume/fast/pvc-delete.yaml",
    "volume/fast/pv-delete.yaml",
)
STORAGE_CLASS = "volume/fast/storage-class.yaml"

_POD_READY = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: lws-e2e-pod-ready
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Pending']
    - key: '.status.conditions.[] | select( .type == "Ready" ) | .status'
      operator: 'NotIn'
      values: ['True']
  delay:
    durationMilliseconds: {delay_ms}
    durationFrom:
      expressionFrom: '.metadata.annotations["{annotation}"]'
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      {{{{ $gated := false }}}}
      {{{{ range .spec.readinessGates }}}}{{{{ $gated = true }}}}{{{{ end }}}}
      conditions:
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: Initialized
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "True"
        type: ContainersReady
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: {{{{ if $gated }}}}"False"{{{{ else }}}}"True"{{{{ end }}}}
        type: Ready
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        started: true
        restartCount: 0
        state:
          running:
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      initContainerStatuses:
      {{{{ range .spec.initContainers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: true
        restartCount: 0
        state:
          terminated:
            exitCode: 0
            finishedAt: {{{{ $now | Quote }}}}
            reason: Completed
            startedAt: {{{{ $now | Quote }}}}
      {{{{ end }}}}
      {{{{ with NodeIPWith .spec.nodeName }}}}
      hostIP: {{{{ . | Quote }}}}
      hostIPs:
      - ip: {{{{ . | Quote }}}}
      {{{{ end }}}}
      {{{{ with PodIPWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}}}
      podIP: {{{{ . | Quote }}}}
      podIPs:
      - ip: {{{{ . | Quote }}}}
      {{{{ end }}}}
      phase: Running
      startTime: {{{{ $now | Quote }}}}
---
# Like a kubelet: a Running pod with readiness gates turns Ready once every gate's condition is True.
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: lws-e2e-pod-readiness-gates
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Running']
    - key: '.spec.readinessGates'
      operator: 'Exists'
    - key: '.status.conditions.[] | select( .type == "ContainersReady" ) | .status'
      operator: 'In'
      values: ['True']
  next:
    statusTemplate: |
      {{{{ $root := . }}}}
      {{{{ $ready := true }}}}
      {{{{ range $gate := .spec.readinessGates }}}}
      {{{{ $met := false }}}}
      {{{{ range $root.status.conditions }}}}
      {{{{ if and ( eq .type $gate.conditionType ) ( eq .status "True" ) }}}}{{{{ $met = true }}}}{{{{ end }}}}
      {{{{ end }}}}
      {{{{ if not $met }}}}{{{{ $ready = false }}}}{{{{ end }}}}
      {{{{ end }}}}
      conditions:
      - type: Ready
        status: {{{{ if $ready }}}}"True"{{{{ else }}}}"False"{{{{ end }}}}
"""

_POD_STOP = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: lws-e2e-pod-stop{suffix}
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
    - key: '.status.phase'
      operator: 'NotIn'
      values: ['Succeeded', 'Failed']
    - key: '.metadata.annotations["{annotation}"]'
      operator: '{operator}'
      values: ['true']
  delay:
{delay}
  next:
    statusTemplate: |
      {{{{ $now := Now }}}}
      conditions:
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        type: Ready
      - lastTransitionTime: {{{{ $now | Quote }}}}
        status: "False"
        type: ContainersReady
      containerStatuses:
      {{{{ range .spec.containers }}}}
      - image: {{{{ .image | Quote }}}}
        name: {{{{ .name | Quote }}}}
        ready: false
        started: false
        restartCount: 0
        state:
          terminated:
            exitCode: {exit_code}
            finishedAt: {{{{ $now | Quote }}}}
            reason: {reason}
      {{{{ end }}}}
      phase: {phase}
"""

_PROMPT_STOP = "    durationMilliseconds: 1000"
_GRACE_STOP = """\
    durationMilliseconds: 0
    durationFrom:
      expressionFrom: '.metadata.deletionTimestamp'"""

# Remove a stopped pod once no finalizer holds it.
_POD_REMOVE = """\
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: lws-e2e-pod-remove
spec:
  resourceRef:
    apiGroup: v1
    kind: Pod
  selector:
    matchExpressions:
    - key: '.metadata.deletionTimestamp'
      operator: 'Exists'
    - key: '.metadata.finalizers'
      operator: 'DoesNotExist'
    - key: '.status.phase'
      operator: 'In'
      values: ['Succeeded', 'Failed']
  next:
    delete: true
"""


def deletion_stages() -> list[str]:
    """Stop (promptly, or at the end of the grace period), then remove."""
    return [
        _POD_STOP.format(suffix="", annotation=STOP_AFTER_GRACE_ANNOTATION, operator="NotIn",
                         delay=_PROMPT_STOP, exit_code=0, reason="Completed",
                         phase="Succeeded").strip(),
        _POD_STOP.format(suffix="-after-grace", annotation=STOP_AFTER_GRACE_ANNOTATION,
                         operator="In", delay=_GRACE_STOP, exit_code=137, reason="Error",
                         phase="Failed").strip(),
        _POD_REMOVE.strip(),
    ]


# kwok moves every pod through its stages (Ready, stopped, removed) with one pool of workers, four
# by default, each waiting for its API call: a central queue no cluster has, since every node's
# kubelet works on its own pods. In the benchmark's rollout (800 pods on 20 nodes) pods waited
# about 4.5 s between being bound and turning Ready, against about 1.4 s with a worker per node;
# the wait was kwok's, not the controller's. So the local cluster runs a pod worker per fake node
# (never fewer than kwok's four). The other options are kwok's defaults, spelled out because a
# configuration file replaces them all.
MIN_POD_WORKERS = 4


def pod_workers(nodes: int) -> int:
    """kwok's pod workers for a cluster of ``nodes`` fake nodes."""
    return max(nodes, MIN_POD_WORKERS)


def kwok_configuration(nodes: int) -> str:
    """kwok's own configuration document for a cluster of ``nodes`` fake nodes."""
    return f"""\
apiVersion: config.kwok.x-k8s.io/v1alpha1
kind: KwokConfiguration
options:
  podPlayStageParallelism: {pod_workers(nodes)}
  nodePlayStageParallelism: 4
  nodeLeaseParallelism: 4
  podsOnNodeSyncParallelism: 1
  enableDebuggingHandlers: true
  enableProfilingHandler: true
  enableContentionProfiling: false
  enablePodsOnNodeSyncListPager: true
  enablePodsOnNodeSyncStreamWatch: false
"""


def render_stages(stage_dir: Path, ready_delay_ms: int) -> str:
    """The multi-document Stage YAML passed to kwok with ``--config``."""
    docs = [(stage_dir / rel).read_text().strip() for rel in UPSTREAM_STAGES]
    docs.append(_POD_READY.format(delay_ms=ready_delay_ms, annotation=READY_DELAY_ANNOTATION))
    docs += deletion_stages()
    return "\n---\n".join(docs) + "\n"
