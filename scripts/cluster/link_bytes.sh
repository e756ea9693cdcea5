#!/usr/bin/env bash
# Bytes each node has sent over its link so far (eth0's own tx counter, as
# the kernel counts it: payload plus TCP/IP headers), one "nodeN BYTES" line
# per node. Take it before and after a run; the difference is what crossed.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
[[ -f $CLUSTER_STATE/nodes ]] || cluster_die "no cluster is up"
nodes=$(cat "$CLUSTER_STATE/nodes")
for ((i = 0; i < nodes; i++)); do
  echo "node$i $(ip netns exec "$(cluster_ns "$i")" cat /sys/class/net/eth0/statistics/tx_bytes)"
done
