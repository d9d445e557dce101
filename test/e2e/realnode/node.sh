#!/usr/bin/env bash
# One real node: containerd, `kubeadm join` and the kubelet, in a private mount namespace so the
# host keeps none of their state. Run as `unshare -m --propagation private bash node.sh` with
# NODE_DIR (the files real-node.ts prepared), NODE_NAME, NODE_GATEWAY (this node's address on
# cni0) and NODE_DISCOVERY_FILE (where the JoinConfiguration reads its discovery kubeconfig, under
# /etc/kubernetes; empty for token discovery) in the environment.
#
# stdin is the lifeline and the control channel: each line is a command (restart-kubelet); when
# it closes, because the test ended or its process died (also SIGKILL), the node tears itself
# down: containers, shims, containerd, kubelet, the gateway address, and their cgroups.
# stdout carries one line per event ("event <name> [detail]"), read by real-node.ts.
set -uo pipefail
exec 3<&0 </dev/null
# A dead reader of our events (the test process) must not kill us before teardown.
trap '' PIPE
dir=$NODE_DIR
runc_root=/run/containerd/runc/k8s.io
log() { printf '[node %s %s] %s\n' "$NODE_NAME" "$(date +%H:%M:%S)" "$*" >>"$dir/node.log"; }
event() { printf 'event %s\n' "$*"; log "event: $*"; }
kubelet_pid=''
containerd_pid=''
kubeadm_pid=''

stop_pid() { # TERM, then KILL after 10 s
  local pid=$1
  [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null || return 0
  kill -TERM "$pid" 2>/dev/null
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
}

# Processes in this mount namespace other than this script: containerd's shims re-parent away
# from containerd, so the namespace is the one thing that tells them from another node's.
namespace_pids() {
  local mine; mine=$(readlink /proc/$$/ns/mnt)
  for proc in /proc/[0-9]*; do
    local pid=${proc#/proc/}
    [[ $pid == "$$" || $pid == "$BASHPID" ]] && continue
    [[ $(readlink "$proc/ns/mnt" 2>/dev/null) == "$mine" ]] && echo "$pid"
  done
}

teardown() {
  log "tearing down"
  stop_pid "$kubelet_pid"
  stop_pid "$kubeadm_pid"
  local ids=()
  [[ -d $runc_root ]] && mapfile -t ids < <(ls "$runc_root")
  # runc kills each container's processes and removes its cgroups.
  for id in "${ids[@]}"; do runc --root "$runc_root" delete --force "$id" >>"$dir/node.log" 2>&1; done
  for pid in $(namespace_pids); do
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == containerd-shim* ]] && kill -KILL "$pid" 2>/dev/null
  done
  stop_pid "$containerd_pid"
  for pid in $(namespace_pids); do kill -KILL "$pid" 2>/dev/null; done
  for id in "${ids[@]}"; do rmdir /sys/fs/cgroup/*/k8s.io/"$id" 2>/dev/null; done
  rmdir /sys/fs/cgroup/*/k8s.io 2>/dev/null
  ip addr del "$NODE_GATEWAY" dev cni0 2>/dev/null
}
trap teardown EXIT
trap 'exit 143' TERM INT HUP

fail() { event failed "$*"; exit 1; }

for m in /etc/kubernetes /var/lib/kubelet /var/lib/containerd /run/containerd /var/log/pods \
  /var/log/containers /etc/cni/net.d /var/lib/cni /run/netns; do
  mount -t tmpfs -o mode=0755 tmpfs "$m" || fail "cannot mount a tmpfs on $m"
done
# The kubelet's volume mounts must reach containerd's view (same namespace, shared subtree).
mount --make-rshared /var/lib/kubelet || fail "cannot make /var/lib/kubelet rshared"
cp "$dir/cni.conflist" /etc/cni/net.d/10-nodeflavor.conflist
mkdir -p /etc/kubernetes/manifests && cp "$dir"/manifests/*.yaml /etc/kubernetes/manifests/ 2>/dev/null
# As a node admin (or the cloud-init) installs it: the cluster CA and API server, no secret.
if [[ -n ${NODE_DISCOVERY_FILE:-} ]]; then
  [[ $NODE_DISCOVERY_FILE == /etc/kubernetes/* ]] || fail "discovery file outside /etc/kubernetes: $NODE_DISCOVERY_FILE"
  install -m 0644 "$dir/discovery.conf" "$NODE_DISCOVERY_FILE" || fail "cannot install $NODE_DISCOVERY_FILE"
fi
ip addr add "$NODE_GATEWAY" dev cni0 2>>"$dir/node.log" || fail "cannot add $NODE_GATEWAY to cni0"

containerd --config "$dir/containerd.toml" >>"$dir/containerd.log" 2>&1 &
containerd_pid=$!
for _ in $(seq 300); do
  ctr --address /run/containerd/containerd.sock version >/dev/null 2>&1 && break
  kill -0 "$containerd_pid" 2>/dev/null || fail "containerd exited (see containerd.log)"
  sleep 0.1
done
ctr --address /run/containerd/containerd.sock version >/dev/null 2>&1 || fail "containerd did not answer within 30 s"
for image in "$dir"/images/*.tar; do
  [[ -e $image ]] || continue
  ctr --address /run/containerd/containerd.sock -n k8s.io images import --platform linux/amd64 "$image" \
    >>"$dir/node.log" 2>&1 || fail "cannot import $(basename "$image")"
done
event containerd-ready

kubeadm join --config "$dir/join.yaml" --v=2 >>"$dir/kubeadm.log" 2>&1 &
kubeadm_pid=$!

start_kubelet() { # as kubeadm's systemd drop-in does (there is no systemd here)
  local KUBELET_KUBEADM_ARGS=''
  # shellcheck disable=SC1091
  source /var/lib/kubelet/kubeadm-flags.env
  # shellcheck disable=SC2086
  kubelet --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
    --kubeconfig=/etc/kubernetes/kubelet.conf --config=/var/lib/kubelet/config.yaml \
    $KUBELET_KUBEADM_ARGS >>"$dir/kubelet.log" 2>&1 &
  kubelet_pid=$!
  event kubelet-started "$kubelet_pid"
}

# kubeadm writes the kubelet's flags and config, then waits for a kubelet it does not start.
for _ in $(seq 1200); do
  if [[ -f /var/lib/kubelet/kubeadm-flags.env && -f /var/lib/kubelet/config.yaml && \
        ( -f /etc/kubernetes/bootstrap-kubelet.conf || -f /etc/kubernetes/kubelet.conf ) ]]; then
    start_kubelet
    break
  fi
  kill -0 "$kubeadm_pid" 2>/dev/null || break
  sleep 0.1
done
wait "$kubeadm_pid"
rc=$?
kubeadm_pid=''
event kubeadm-exited "$rc"

while read -r -u 3 command; do
  case $command in
    restart-kubelet)
      stop_pid "$kubelet_pid"
      event kubelet-stopped
      start_kubelet
      ;;
    stop-kubelet)
      stop_pid "$kubelet_pid"
      kubelet_pid=''
      event kubelet-stopped
      ;;
    *) log "unknown command: $command" ;;
  esac
done
exit 0
