#!/usr/bin/env bash
# Builds the real Kubernetes binaries (kube-apiserver, kube-controller-manager, and for real
# nodes kube-scheduler, kubeadm and kubelet), etcd, helm, the pause image's binary and Cluster
# API's core manager and kubeadm bootstrap provider (with their CRDs) from the Go module proxy,
# into a cache outside the repository:
#   ${NODEFLAVOR_CACHE:-~/.cache/nodeflavor}/k8s-<version>/, etcd-<version>/, helm-<version>/,
#   cluster-api-<version>/
# A second run finds them and returns in well under a second. Progress goes to stderr.
#
# Why a throwaway module: k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces
# them with ./staging/... paths that a dependent module ignores, so we replace every staging
# module with its published v0.Y.Z of the same release. etcd's server module has the same
# kind of replace directives for its siblings, so it is built the same way.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=versions.env
source "$here/versions.env"

cache=${NODEFLAVOR_CACHE:-$HOME/.cache/nodeflavor}
what=${1:-all}
log() { printf '[build-binaries %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
command -v go >/dev/null || { log "go is not installed: install Go >= 1.26 (it builds the Kubernetes binaries)"; exit 1; }

staging_modules() {
  # The staging modules are exactly the "./staging/..." replace targets of the release's go.mod.
  local gomod
  gomod=$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  grep -E '^\s*k8s.io/[a-z0-9-]+ => ./staging/' "$gomod" | awk '{print $1}'
}

# Runs a go build with a heartbeat line every 30 s so a first build (minutes) never looks hung.
with_heartbeat() {
  local label=$1; shift
  local start=$SECONDS
  ( while sleep 30; do log "$label: still building ($((SECONDS - start)) s)"; done ) &
  local beat=$!
  local rc=0
  "$@" || rc=$?
  kill "$beat" 2>/dev/null; wait "$beat" 2>/dev/null || true
  return $rc
}

# The tools.go of a throwaway module: it imports every main package we build (PREFIX/CMD...), so
# `go mod tidy` keeps their dependencies; its build tag keeps it out of builds (a main package
# cannot be imported). The module is set up again only when this file changes.
tools_go_of() {
  local prefix=$1; shift
  local tools; tools=$(printf "\t_ \"$prefix/%s\"\n" "$@")
  printf '//go:build tools\n\npackage tools\n\nimport (\n%s\n)\n' "$tools"
}

# The binaries of one release come from one throwaway module; each is built only when missing,
# so a cache made before real nodes existed gains kubeadm, kubelet and kube-scheduler on its own.
KUBERNETES_COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubeadm kubelet)

build_kubernetes() {
  local out="$cache/k8s-$KUBERNETES_VERSION"
  local wanted=("$@"); [[ ${#wanted[@]} -gt 0 ]] || wanted=("${KUBERNETES_COMMANDS[@]}")
  local missing=()
  for bin in "${wanted[@]}"; do [[ -x $out/$bin ]] || missing+=("$bin"); done
  if [[ ${#missing[@]} -eq 0 ]]; then return 0; fi
  local minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  local staging_version="v0.${KUBERNETES_VERSION#v1.}"
  local mod="$cache/build/k8s-$KUBERNETES_VERSION"
  log "building ${missing[*]} $KUBERNETES_VERSION (first time only: several minutes)"
  mkdir -p "$mod" "$out"
  local tools_go; tools_go=$(tools_go_of k8s.io/kubernetes/cmd "${KUBERNETES_COMMANDS[@]}")
  if [[ ! -f $mod/tools.go || $(cat "$mod/tools.go") != "$tools_go" ]]; then
    log "downloading k8s.io/kubernetes@$KUBERNETES_VERSION from the Go module proxy"
    {
      echo "module nodeflavor.local/k8sbuild"
      echo "go 1.26"
      echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
      echo "replace ("
      for m in $(staging_modules); do echo "  $m => $m $staging_version"; done
      echo ")"
    } > "$mod/go.mod"
    printf '%s\n' "$tools_go" > "$mod/tools.go"
    (cd "$mod" && with_heartbeat "go mod tidy" go mod tidy)
  fi
  # kubeadm's preflight compares its own version with the kubelet's and the control plane's,
  # so every binary carries the release's version stamp.
  local ldflags="-s -w"
  local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  for bin in "${missing[@]}"; do
    log "compiling $bin"
    (cd "$mod" && CGO_ENABLED=0 with_heartbeat "$bin" go build -trimpath -ldflags "$ldflags" -o "$out/$bin.tmp" "k8s.io/kubernetes/cmd/$bin")
    mv "$out/$bin.tmp" "$out/$bin"
  done
  log "kube-apiserver: $("$out/kube-apiserver" --version)"
}

# The pod sandbox ("pause") image's only binary: a static program that waits for SIGTERM and
# reaps orphans, as registry.k8s.io/pause does. Built here because no registry is reachable.
build_pause() {
  local out="$cache/pause-1"
  if [[ -x $out/pause ]]; then return 0; fi
  log "building the pause binary"
  mkdir -p "$out/src"
  cp "$here/../realnode/pause/main.go" "$out/src/main.go"
  printf 'module nodeflavor.local/pause\ngo 1.26\n' > "$out/src/go.mod"
  (cd "$out/src" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$out/pause.tmp" .)
  mv "$out/pause.tmp" "$out/pause"
}

build_etcd() {
  local out="$cache/etcd-$ETCD_VERSION"
  if [[ -x $out/etcd ]]; then return 0; fi
  local mod="$cache/build/etcd-$ETCD_VERSION"
  log "building etcd $ETCD_VERSION (first time only)"
  mkdir -p "$mod" "$out"
  printf 'module nodeflavor.local/etcdbuild\ngo 1.26\n' > "$mod/go.mod"
  (cd "$mod" && go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2)
  (cd "$mod" && CGO_ENABLED=0 with_heartbeat etcd go build -trimpath -ldflags "-s -w" -o "$out/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$out/etcd.tmp" "$out/etcd"
  log "etcd: $("$out/etcd" --version | head -1)"
}

build_helm() {
  local out="$cache/helm-$HELM_VERSION"
  if [[ -x $out/helm ]]; then return 0; fi
  log "building helm $HELM_VERSION (first time only)"
  mkdir -p "$out"
  GOBIN="$out" CGO_ENABLED=0 with_heartbeat helm go install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

# Cluster API's two managers the e2e runs as processes: the core manager (Cluster, MachineDeployment,
# MachineSet, Machine controllers) and CABPK (KubeadmConfig). A `go install …@version` fails on the
# root module's `replace …/api => ./api`, so, as for Kubernetes, a throwaway module requires both
# modules at the pinned version and builds their mains. The CRDs come from the same module zip.
CLUSTER_API_COMMANDS=(core bootstrap/kubeadm)

build_cluster_api() {
  local out="$cache/cluster-api-$CLUSTER_API_VERSION"
  if [[ -x $out/capi-manager && -x $out/kubeadm-bootstrap-manager && -d $out/crds ]]; then return 0; fi
  local mod="$cache/build/cluster-api-$CLUSTER_API_VERSION"
  log "building Cluster API $CLUSTER_API_VERSION (core manager and kubeadm bootstrap provider; first time only: a few minutes)"
  mkdir -p "$mod" "$out"
  local tools_go; tools_go=$(tools_go_of sigs.k8s.io/cluster-api "${CLUSTER_API_COMMANDS[@]}")
  if [[ ! -f $mod/tools.go || $(cat "$mod/tools.go") != "$tools_go" ]]; then
    log "downloading sigs.k8s.io/cluster-api@$CLUSTER_API_VERSION from the Go module proxy"
    {
      echo "module nodeflavor.local/capibuild"
      echo "go 1.26"
      echo "require ("
      echo "  sigs.k8s.io/cluster-api $CLUSTER_API_VERSION"
      echo "  sigs.k8s.io/cluster-api/api $CLUSTER_API_VERSION"
      echo ")"
    } > "$mod/go.mod"
    printf '%s\n' "$tools_go" > "$mod/tools.go"
    (cd "$mod" && with_heartbeat "go mod tidy" go mod tidy)
  fi
  local ldflags="-s -w"
  local minor=${CLUSTER_API_VERSION#v1.}; minor=${minor%%.*}
  ldflags+=" -X sigs.k8s.io/cluster-api/version.gitVersion=$CLUSTER_API_VERSION -X sigs.k8s.io/cluster-api/version.gitMajor=1"
  ldflags+=" -X sigs.k8s.io/cluster-api/version.gitMinor=$minor -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"
  log "compiling the Cluster API core manager"
  (cd "$mod" && CGO_ENABLED=0 with_heartbeat "capi-manager" go build -trimpath -ldflags "$ldflags" -o "$out/capi-manager.tmp" sigs.k8s.io/cluster-api/core)
  log "compiling the kubeadm bootstrap provider (CABPK)"
  (cd "$mod" && CGO_ENABLED=0 with_heartbeat "kubeadm-bootstrap-manager" go build -trimpath -ldflags "$ldflags" -o "$out/kubeadm-bootstrap-manager.tmp" sigs.k8s.io/cluster-api/bootstrap/kubeadm)
  # The CRDs of the very module version built above: the core's and CABPK's (v1beta2 storage).
  local src; src=$(cd "$mod" && go list -m -f '{{.Dir}}' sigs.k8s.io/cluster-api)
  rm -rf "$out/crds.tmp" && mkdir -p "$out/crds.tmp"
  cp "$src"/core/config/crd/bases/*.yaml "$src"/bootstrap/kubeadm/config/crd/bases/*.yaml "$out/crds.tmp/"
  chmod -R u+w "$out/crds.tmp"
  rm -rf "$out/crds" && mv "$out/crds.tmp" "$out/crds"
  mv "$out/capi-manager.tmp" "$out/capi-manager"
  mv "$out/kubeadm-bootstrap-manager.tmp" "$out/kubeadm-bootstrap-manager"
  log "Cluster API $CLUSTER_API_VERSION: $(ls "$out/crds" | wc -l) CRDs, managers in $out"
}

case $what in
  all) build_etcd; build_kubernetes; build_helm; build_pause; build_cluster_api ;;
  cluster-api) build_cluster_api ;;
  control-plane) build_etcd; build_kubernetes kube-apiserver kube-controller-manager ;;
  kubernetes) build_kubernetes ;;
  pause) build_pause ;;
  etcd) build_etcd ;;
  helm) build_helm ;;
  *) log "unknown target '$what' (all|control-plane|kubernetes|etcd|helm|pause|cluster-api)"; exit 2 ;;
esac
