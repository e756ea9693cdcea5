#!/usr/bin/env bash
# mpirun across the pretend cluster: `scripts/cluster/mpirun.sh RANKS_PER_NODE
# [mpirun options] PROGRAM [ARGS...]` runs mpirun on node0 (inside its
# namespaces, hostname node0) with a host file of every node up, node-major
# rank order (ranks 0..k-1 on node0, ...), TCP between nodes only over the
# cluster subnet and shared memory inside a node. `tessel run` works the
# same way behind exec.sh: scripts/cluster/exec.sh 0 tessel run -n N
# --hostfile "$CLUSTER_STATE/hostfile" -- train ... (after one mpirun.sh
# call has written the host file).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
per_node=${1:?usage: mpirun.sh RANKS_PER_NODE [mpirun options] PROGRAM [ARGS...]}
shift
[[ -f $CLUSTER_STATE/nodes ]] || cluster_die "no cluster is up: run scripts/cluster/up.sh NODES [RATE] first"
nodes=$(cat "$CLUSTER_STATE/nodes")
hostfile=$CLUSTER_STATE/hostfile
: >"$hostfile"
# Addresses rather than names: nothing resolves nodeN here, and `tessel run
# --hostfile` asks the file's hosts whether they answer when a job fails.
for ((i = 0; i < nodes; i++)); do echo "$(cluster_ip "$i") slots=$per_node max_slots=$per_node" >>"$hostfile"; done
exec bash "$here/exec.sh" 0 mpirun --hostfile "$hostfile" -np $((nodes * per_node)) --map-by slot "$@"
