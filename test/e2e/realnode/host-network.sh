#!/usr/bin/env bash
# The host side of the real nodes, shared by all of them and undone when stdin closes (the test
# ended or its process died): the cni0 bridge, a rule that drops whatever a pod sends off the
# machine, the one "Service" pods need (the API server at the kubernetes Service's ClusterIP,
# there being no kube-proxy), and the empty mount points the nodes' tmpfs mounts need.
# The kubelets add chains of their own (KUBE-FIREWALL, KUBE-KUBELET-CANARY, KUBE-IPTABLES-HINT, in
# iptables and ip6tables): teardown removes every KUBE-* chain that was not there at set-up, with the
# rules that jump to it, and leaves a host's own (a machine that is a Kubernetes node) alone.
# Arguments: API_SERVER_PORT SERVICE_IP. stdout: "ready" once set up. stdin lines "node PID" name
# the nodes' scripts: teardown waits for them first, because removing a mount point here would
# silently unmount a node's tmpfs there (the kernel detaches mounts on a removed directory in every
# namespace) and leave its containers running.
set -uo pipefail
exec 3<&0 </dev/null
# A dead reader of our events (the test process) must not kill us before teardown.
trap '' PIPE
port=$1 service_ip=$2
created_dirs=()
log() { printf '[host-network %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
forward_rule=(FORWARD -i cni0 ! -o cni0 -j DROP)
dnat_rule=(PREROUTING -i cni0 -d "$service_ip/32" -p tcp --dport 443 -j DNAT --to-destination "127.0.0.1:$port")

# "tool table chain" of every KUBE-* chain present now.
kube_chains() {
  local tool table
  for tool in iptables ip6tables; do
    command -v "$tool" >/dev/null || continue
    for table in filter nat mangle; do
      "$tool" -t "$table" -S 2>/dev/null | sed -n "s/^-N \(KUBE-[A-Za-z0-9-]*\)$/$tool $table \1/p"
    done
  done
}
kube_chains_before=$(kube_chains)

# Removes the KUBE-* chains the kubelets added: first the rules that jump to them, then the chains.
remove_kubelet_chains() {
  local tool table chain rule
  while read -r tool table chain; do
    [[ -z $chain ]] && continue
    grep -qxF "$tool $table $chain" <<<"$kube_chains_before" && continue
    while read -r rule; do
      [[ -n $rule ]] && eval "\"$tool\" -t \"$table\" -D ${rule#-A }"
    done < <("$tool" -t "$table" -S 2>/dev/null | grep -E "^-A .* -j $chain( |$)")
    "$tool" -t "$table" -F "$chain" 2>/dev/null
  done < <(kube_chains)
  while read -r tool table chain; do
    [[ -z $chain ]] && continue
    grep -qxF "$tool $table $chain" <<<"$kube_chains_before" || "$tool" -t "$table" -X "$chain" 2>/dev/null
  done < <(kube_chains)
}

node_pids=()
teardown() {
  for _ in $(seq 600); do # up to 60 s: each node stops its kubelet and containers first
    local alive=0
    for pid in "${node_pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
    [[ $alive == 0 ]] && break
    sleep 0.1
  done
  while iptables -C "${forward_rule[@]}" 2>/dev/null; do iptables -D "${forward_rule[@]}"; done
  while iptables -t nat -C "${dnat_rule[@]}" 2>/dev/null; do iptables -t nat -D "${dnat_rule[@]}"; done
  remove_kubelet_chains
  ip link del cni0 2>/dev/null
  rmdir /sys/fs/cgroup/*/k8s.io 2>/dev/null
  for entry in "${created_dirs[@]}"; do # "path|top": remove path, then parents up to top
    local path=${entry%%|*} top=${entry##*|}
    while rmdir "$path" 2>/dev/null && [[ $path != "$top" ]]; do path=$(dirname "$path"); done
  done
  log "removed cni0, the iptables rules, the kubelets' chains and the mount points"
}
trap teardown EXIT
trap 'exit 143' TERM INT HUP

for d in /etc/kubernetes /var/lib/kubelet /var/lib/containerd /run/containerd /var/log/pods \
  /var/log/containers /etc/cni/net.d /var/lib/cni /run/netns; do
  # Only the top-most missing directory is recorded, so teardown removes the whole created path.
  missing=''
  probe=$d
  while [[ ! -e $probe ]]; do missing=$probe; probe=$(dirname "$probe"); done
  if [[ -n $missing ]]; then mkdir -p "$d" && created_dirs+=("$d|$missing"); fi
done
ip link show cni0 >/dev/null 2>&1 || ip link add cni0 type bridge || { log "cannot create cni0"; exit 1; }
ip link set cni0 up
# Pods reach the API server on 127.0.0.1 through the DNAT below; loopback destinations arriving on
# cni0 are routed only with route_localnet (a per-interface setting of our own bridge).
sysctl -qw net.ipv4.conf.cni0.route_localnet=1
iptables -C "${forward_rule[@]}" 2>/dev/null || iptables -I "${forward_rule[@]}"
iptables -t nat -C "${dnat_rule[@]}" 2>/dev/null || iptables -t nat -I "${dnat_rule[@]}"
echo ready
while read -r -u 3 command pid; do
  [[ $command == node ]] && node_pids+=("$pid")
done
exit 0
