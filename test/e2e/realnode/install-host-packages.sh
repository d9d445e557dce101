#!/usr/bin/env bash
# Installs what a real node needs from Debian (containerd, runc, the CNI plugins, iptables,
# conntrack, iproute2) when it runs as root on Linux and something is missing. Anywhere else it
# says why it skipped and exits 0: the real-node tests then report themselves skipped with that
# reason. In CI (NODEFLAVOR_REQUIRE_ALL_TESTS=1, set by .ci/run) a skip would be a failure later,
# so it fails here, at once, with the reason.
set -euo pipefail
log() { printf '[host-packages] %s\n' "$*" >&2; }
skipped() {
  if [[ ${NODEFLAVOR_REQUIRE_ALL_TESTS:-} == 1 ]]; then
    log "$1: cannot install what real nodes need, and NODEFLAVOR_REQUIRE_ALL_TESTS=1 (CI) requires every test to run"
    exit 1
  fi
  log "$1; skipped"
  exit 0
}
if [[ $(uname -s) != Linux ]]; then skipped "not Linux: real nodes need Linux"; fi
if [[ $(id -u) != 0 ]]; then skipped "not root: real nodes need root (mounts, cgroups, cni0)"; fi
declare -A wanted=(
  [containerd]=/usr/bin/containerd
  [runc]=/usr/sbin/runc
  [containernetworking-plugins]=/usr/lib/cni/bridge
  [iptables]=/usr/sbin/iptables
  [conntrack]=/usr/sbin/conntrack
  [iproute2]=/usr/sbin/ip
)
missing=()
for pkg in "${!wanted[@]}"; do [[ -e ${wanted[$pkg]} ]] || missing+=("$pkg"); done
if [[ ${#missing[@]} -eq 0 ]]; then exit 0; fi
command -v apt-get >/dev/null || { log "no apt-get: install ${missing[*]} by hand"; exit 1; }
log "installing ${missing[*]} from Debian"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# --no-install-recommends: no docker.io or other daemons that would start on their own.
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
# Debian starts containerd as a host service on install; real nodes run their own, one per node.
if command -v systemctl >/dev/null && systemctl is-active --quiet containerd 2>/dev/null; then
  systemctl disable --now containerd >/dev/null 2>&1 || true
fi
log "installed: ${missing[*]}"
