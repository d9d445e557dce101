#!/usr/bin/env bash
# Builds the real Kubernetes control-plane binaries (kube-apiserver, kube-controller-manager),
# etcd and helm from the Go module proxy, into a cache outside the repository:
#   ${NODEFLAVOR_CACHE:-~/.cache/nodeflavor}/k8s-<version>/, etcd-<version>/, helm-<version>/
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

build_kubernetes() {
  local out="$cache/k8s-$KUBERNETES_VERSION"
  if [[ -x $out/kube-apiserver && -x $out/kube-controller-manager ]]; then return 0; fi
  local minor=${KUBERNETES_VERSION#v1.}; minor=${minor%%.*}
  local staging_version="v0.${KUBERNETES_VERSION#v1.}"
  local mod="$cache/build/k8s-$KUBERNETES_VERSION"
  log "building kube-apiserver and kube-controller-manager $KUBERNETES_VERSION (first time only: several minutes)"
  mkdir -p "$mod" "$out"
  log "downloading k8s.io/kubernetes@$KUBERNETES_VERSION from the Go module proxy"
  {
    echo "module nodeflavor.local/k8sbuild"
    echo "go 1.26"
    echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
    echo "replace ("
    for m in $(staging_modules); do echo "  $m => $m $staging_version"; done
    echo ")"
  } > "$mod/go.mod"
  cat > "$mod/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO
  (cd "$mod" && with_heartbeat "go mod tidy" go mod tidy)
  local ldflags="-s -w"
  local date; date=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
    ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=$date"
  done
  for bin in kube-apiserver kube-controller-manager; do
    log "compiling $bin"
    (cd "$mod" && CGO_ENABLED=0 with_heartbeat "$bin" go build -trimpath -ldflags "$ldflags" -o "$out/$bin.tmp" "k8s.io/kubernetes/cmd/$bin")
    mv "$out/$bin.tmp" "$out/$bin"
  done
  log "kube-apiserver: $("$out/kube-apiserver" --version)"
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

case $what in
  all) build_etcd; build_kubernetes; build_helm ;;
  kubernetes) build_kubernetes ;;
  etcd) build_etcd ;;
  helm) build_helm ;;
  *) log "unknown target '$what' (all|kubernetes|etcd|helm)"; exit 2 ;;
esac
