#!/usr/bin/env bash
# Brings up N pretend nodes on this machine: network namespaces tessel-node<i>
# joined by a bridge in a namespace of their own (tessel-switch), so nothing
# in the machine's own network changes. Node i is 10.213.0.(i+1)/24 on its
# interface eth0; its link to the switch is limited to RATE in both
# directions with tc tbf (this kernel has tbf, not netem). Processes of one
# node talk over shared memory, nodes over TCP through their links, whose
# byte counters (scripts/cluster/link_bytes.sh) show what crossed.
#
# Usage: scripts/cluster/up.sh NODES [RATE]   RATE as tc writes it: 1gbit, 300mbit;
#                                             omitted or "none": unthrottled
# Needs root (ip netns). Idempotent: an existing cluster is torn down first.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
nodes=${1:?usage: up.sh NODES [RATE]}
rate=${2:-none}
[[ $nodes =~ ^[1-9][0-9]?$ ]] || cluster_die "NODES must be 1-99, got '$nodes'"
cluster_require_root
bash "$here/down.sh" >/dev/null 2>&1 || true

ip netns add "$CLUSTER_SWITCH"
ip -n "$CLUSTER_SWITCH" link set lo up
ip -n "$CLUSTER_SWITCH" link add br0 type bridge
ip -n "$CLUSTER_SWITCH" link set br0 up
for ((i = 0; i < nodes; i++)); do
  ns=$(cluster_ns "$i")
  ip netns add "$ns"
  ip -n "$ns" link set lo up
  # The node's end is created in the switch namespace and moved into the node.
  ip -n "$CLUSTER_SWITCH" link add "port$i" mtu "$CLUSTER_MTU" type veth peer name eth0 mtu "$CLUSTER_MTU" netns "$ns"
  ip -n "$CLUSTER_SWITCH" link set "port$i" master br0 up
  ip -n "$ns" addr add "$(cluster_ip "$i")/24" dev eth0
  ip -n "$ns" link set eth0 up
  if [[ $rate != none ]]; then
    # Egress of the node (uplink) and of its switch port (downlink). The
    # bucket holds a few jumbo frames; the queue ~50 ms of traffic.
    for where in "$ns eth0" "$CLUSTER_SWITCH port$i"; do
      set -- $where
      ip netns exec "$1" tc qdisc add dev "$2" root tbf rate "$rate" burst 256kb latency 50ms
    done
  fi
done
echo "$nodes" >"$CLUSTER_STATE/nodes"
echo "$rate" >"$CLUSTER_STATE/rate"
echo "cluster up: $nodes nodes ($(for ((i = 0; i < nodes; i++)); do printf '%s ' "$(cluster_ip "$i")"; done)), link rate $rate"
