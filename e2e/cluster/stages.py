"""kwok Stage configuration: how fake nodes and pods move through their lifecycle.

kwok v0.8 standalone ships no stages of its own; its default set lives in the module source (as
`kustomize/stage/...`), which ``build.sh`` copies next to the kwok binary. We take the node stages,
pod completion/deletion and the chaos stages from there unchanged, and write our own pod-ready
stage because kwok's marks every readiness gate True, whereas a real kubelet reports a pod Ready
only once the gates' conditions are True (the Hash group-ready gate depends on that). Ours also
takes a default start-up delay and a per-pod override from an annotation, so rollout stages are
observable in tests.
"""

from __future__ import annotations

from pathlib import Path

# A pod may carry this annotation (a Go duration such as "3s") to override the cluster's delay.
READY_DELAY_ANNOTATION = "e2e.lws-operator.dev/ready-delay"

UPSTREAM_STAGES = (
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "node/chaos/node-not-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
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


def render_stages(stage_dir: Path, ready_delay_ms: int) -> str:
    """The multi-document Stage YAML passed to kwok with ``--config``."""
    docs = [(stage_dir / rel).read_text().strip() for rel in UPSTREAM_STAGES]
    docs.append(_POD_READY.format(delay_ms=ready_delay_ms, annotation=READY_DELAY_ANNOTATION))
    return "\n---\n".join(docs) + "\n"
