#!/usr/bin/env bash
# Starts (or stops) the lab's emulated GPU hosts' fabric NICs: one network
# namespace per lab node (kiln-lab-gpu-01, kiln-lab-gpu-02), each holding
# two veth pairs named rail0 and rail1 (the nodes' mlx5_0 and mlx5_1 in
# examples/lab/fleet.toml, `host = { netns = ... }`). The network stage sets
# their MTU through `ip netns exec` and reports what a veth lacks (DCB, RoCE
# ECN) as unsupported. Needs root. Idempotent: what exists is left as is, so
# a second lab run finds the MTU the first one set.
# Also the VMs' fabric: one Linux bridge (KILN_LAB_FABRIC_BRIDGE, default
# kilnfab0; [vm.lab-small] fabric_bridge) that every lab VM's emulated
# fabric NIC joins, and over which their Soft-RoCE devices reach each other.
#   scripts/lab-hosts.sh         create what is missing
#   scripts/lab-hosts.sh stop    delete the namespaces and the bridge
set -euo pipefail

read -r -a nodes <<<"${KILN_LAB_HOSTS:-kiln-lab-gpu-01 kiln-lab-gpu-02}"
bridge=${KILN_LAB_FABRIC_BRIDGE:-kilnfab0}

if [ "${1:-start}" = "stop" ]; then
  for ns in "${nodes[@]}"; do
    if ip netns list | grep -qw "$ns"; then ip netns delete "$ns"; fi
  done
  if ip link show "$bridge" >/dev/null 2>&1; then ip link delete "$bridge"; fi
  exit 0
fi

ip link show "$bridge" >/dev/null 2>&1 || ip link add "$bridge" type bridge
ip link set "$bridge" up
echo "lab fabric bridge $bridge: up"

for ns in "${nodes[@]}"; do
  ip netns list | grep -qw "$ns" || ip netns add "$ns"
  for rail in rail0 rail1; do
    if ! ip -n "$ns" link show "$rail" >/dev/null 2>&1; then
      ip -n "$ns" link add "$rail" type veth peer name "$rail-peer"
      ip -n "$ns" link set "$rail-peer" up
      ip -n "$ns" link set "$rail" up
    fi
  done
  echo "lab host $ns: rail0 mtu $(ip -n "$ns" -o link show rail0 | sed -n 's/.* mtu \([0-9]*\).*/\1/p'), rail1 mtu $(ip -n "$ns" -o link show rail1 | sed -n 's/.* mtu \([0-9]*\).*/\1/p')"
done
