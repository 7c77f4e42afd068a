#!/usr/bin/env bash
# Build the pinned local control plane from the Go module proxy, once per machine.
#
# Binaries land in $LWS_CACHE/<component>/<version>/bin (default ~/.cache/lws-operator) and are
# reused by every later run: a second call returns at once. Why a wrapper module: k8s.io/kubernetes
# requires its staging modules at v0.0.0 and resolves them with ./staging replaces that only apply
# inside its own repository, so a consumer must replace each with the published v0.X.Y itself.
set -euo pipefail

# shellcheck source=versions.env
. "$(dirname "$0")/versions.env"
CACHE=${LWS_CACHE:-$HOME/.cache/lws-operator}
export GOFLAGS=-buildvcs=false CGO_ENABLED=0

log() { printf '[build %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

build_kubernetes() {
  local out=$CACHE/k8s/v$K8S_VERSION
  if [ -x "$out/bin/kube-apiserver" ] && [ -x "$out/bin/kube-controller-manager" ] \
     && [ -x "$out/bin/kube-scheduler" ] && [ -x "$out/bin/kubectl" ]; then
    return 0
  fi
  log "building Kubernetes v$K8S_VERSION into $out (cold build: about 6 min on 2 cores)"
  build_k8s_commands "$out" kube-apiserver kube-controller-manager kube-scheduler kubectl
  "$out/bin/kube-apiserver" --version >&2
}

# The node tier's kubelet and kube-proxy: the same wrapper module, a directory of their own, so
# that a machine which never runs the node tier never builds them.
build_node() {
  local out=$CACHE/k8s-node/v$K8S_VERSION
  [ -x "$out/bin/kubelet" ] && [ -x "$out/bin/kube-proxy" ] && return 0
  log "building kubelet and kube-proxy v$K8S_VERSION into $out"
  build_k8s_commands "$out" kubelet kube-proxy
  "$out/bin/kubelet" --version >&2
}

# build_k8s_commands OUT CMD...: build k8s.io/kubernetes/cmd/CMD of $K8S_VERSION into OUT/bin.
build_k8s_commands() {
  local out=$1
  shift
  local staging=0.${K8S_VERSION#1.} minor
  minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  local work=$out/src
  rm -rf "$work" && mkdir -p "$work" && cd "$work"
  local upstream
  upstream=$(go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
  {
    echo "module local/k8sbin"
    echo
    awk '/^go /{print; exit}' "$upstream"
    echo
    awk '/^godebug \(/{b=1} b{print} b&&/^\)/{b=0} /^godebug [^(]/{print}' "$upstream"
  } > go.mod
  local replaces=()
  for m in $(sed -n 's|^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/.*|\1|p' "$upstream"); do
    replaces+=("-replace=$m=$m@v$staging")
  done
  go mod edit "${replaces[@]}" "-require=k8s.io/kubernetes@v$K8S_VERSION"
  local pkgs=("${@/#/k8s.io/kubernetes/cmd/}")
  go get -tool "${pkgs[@]/%/@v$K8S_VERSION}"
  local ld="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld+=" -X $p.gitVersion=v$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  go build -trimpath -tags selinux,notest -ldflags "$ld" -o "$out/bin.tmp/" "${pkgs[@]}"
  rm -rf "$out/bin" && mv "$out/bin.tmp" "$out/bin"
}

build_etcd() {
  local out=$CACHE/etcd/v$ETCD_VERSION
  [ -x "$out/bin/etcd" ] && return 0
  log "building etcd v$ETCD_VERSION into $out"
  local work=$out/src
  rm -rf "$work" && mkdir -p "$work" && cd "$work"
  printf 'module local/etcdbin\n\ngo 1.26\n' > go.mod
  go get -tool "go.etcd.io/etcd/server/v3@v$ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$out/bin.tmp/etcd" go.etcd.io/etcd/server/v3
  rm -rf "$out/bin" && mv "$out/bin.tmp" "$out/bin"
  "$out/bin/etcd" --version >&2
}

# kwok v$KWOK_VERSION deletes a pod by name alone and retries a failed delete: once a StatefulSet
# has replaced the pod under the same name, the retry deletes the replacement (seen as a storm of
# group recreations in the scale benchmark). A kubelet deletes with a UID precondition, so the
# build patches kwok to do the same and to treat "already gone or replaced" as done. The cache
# directory names the patch, so an unpatched build is never picked up.
build_kwok() {
  local out=$CACHE/kwok/v$KWOK_VERSION-$KWOK_PATCH
  [ -x "$out/bin/kwok" ] && [ -d "$out/stages" ] && return 0
  log "building kwok v$KWOK_VERSION ($KWOK_PATCH) into $out"
  mkdir -p "$out"
  local src work=$CACHE/kwok/src
  src=$(go mod download -json "sigs.k8s.io/kwok@v$KWOK_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
  rm -rf "$work" && cp -r "$src" "$work" && chmod -R u+w "$work"
  python3 - "$work/pkg/kwok/controllers/pod_controller.go" <<'PATCH'
import sys
path = sys.argv[1]
text = open(path).read()
old = """	err := c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, deleteOpt)
	if err != nil {
		return err
	}
"""
new = """	// lws-operator: delete this incarnation only, as a kubelet does; a pod already gone or
	// replaced under the same name is done, not retried.
	opts := deleteOpt
	opts.Preconditions = metav1.NewUIDPreconditions(string(pod.UID))
	err := c.typedClient.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	if err != nil {
		return err
	}
"""
imp = '\t"k8s.io/apimachinery/pkg/api/meta"\n'
assert text.count(old) == 1 and text.count(imp) == 1, "kwok source changed: revisit the patch"
text = text.replace(old, new).replace(
    imp, '\tapierrors "k8s.io/apimachinery/pkg/api/errors"\n' + imp)
open(path, "w").write(text)
PATCH
  (cd "$work" && go build -trimpath -ldflags "-s -w" -o "$out/bin.tmp/kwok" ./cmd/kwok)
  rm -rf "$out/bin" && mv "$out/bin.tmp" "$out/bin"
  # kwok's default Stage definitions ship inside its module; copy them next to the binary.
  rm -rf "$out/stages" && cp -r "$src/kustomize/stage" "$out/stages" && chmod -R u+w "$out/stages"
  rm -rf "$work"
}

# helm, for the chart's tests and `make chart-lint`. Not part of `all`: the cluster needs none of
# it. A `go install` build carries none of the release ldflags, so the version is stamped in, and
# so is the default Kubernetes version (that of helm's client-go, as helm's own Makefile derives
# it): without it `helm template` assumes v1.20 and refuses charts that need a newer one.
build_helm() {
  local out=$CACHE/helm/v$HELM_VERSION
  [ -x "$out/bin/helm" ] && return 0
  log "building helm v$HELM_VERSION into $out"
  mkdir -p "$out"
  rm -rf "$out/bin.tmp"
  local kube ld="-s -w -X helm.sh/helm/v3/internal/version.version=v$HELM_VERSION"
  kube=$(go mod download -json "helm.sh/helm/v3@v$HELM_VERSION" \
    | python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])' \
    | xargs awk '$1 == "k8s.io/client-go" {print $2}')
  kube=${kube#v0.}
  for p in pkg/chartutil pkg/lint/rules; do
    ld+=" -X helm.sh/helm/v3/$p.k8sVersionMajor=1 -X helm.sh/helm/v3/$p.k8sVersionMinor=${kube%%.*}"
  done
  GOBIN=$out/bin.tmp go install -trimpath -ldflags "$ld" "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
  rm -rf "$out/bin" && mv "$out/bin.tmp" "$out/bin"
  "$out/bin/helm" version --short >&2
}

# One build at a time per cache: two at once (make in two checkouts, a test starting a cluster while
# make builds) would share each component's bin.tmp and src directories. The second waits, then
# finds the binaries built and returns.
mkdir -p "$CACHE"
exec 9>"$CACHE/.build.lock"
flock 9

what=${1:-all}
case "$what" in
  etcd) build_etcd ;;
  kwok) build_kwok ;;
  kubernetes) build_kubernetes ;;
  helm) build_helm ;;
  node) build_node ;;
  all) build_etcd; build_kwok; build_kubernetes ;;
  *) echo "usage: $0 [all|etcd|kwok|kubernetes|helm|node]" >&2; exit 2 ;;
esac
