#!/usr/bin/env bash
# Stops what slurm_up.sh started (every slurmd, slurmctld, munged: by their
# pid files, each checked to be that program before it is signalled) and
# removes the cluster's SLURM state. Jobs still running are ended with their
# slurmd. The nodes stay up (down.sh tears them down, and ends any process
# still inside them).
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
dir=$SLURM_STATE
[[ -d $dir ]] || { echo "slurm down (was not up)"; exit 0; }
stop() {  # stop PIDFILE PROGRAM
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 0
  [[ $pid =~ ^[0-9]+$ && $(cat "/proc/$pid/comm" 2>/dev/null) == "$2"* ]] || return 0
  kill "$pid" 2>/dev/null
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -9 "$pid" 2>/dev/null
}
# A job's slurmstepd and its tasks belong to no pid file: end every
# slurmstepd in the nodes' namespaces with all it started.
tree() { local c; for c in $(pgrep -P "$1"); do tree "$c"; done; echo "$1"; }
if [[ -f $CLUSTER_STATE/nodes ]]; then
  for ((i = 0; i < $(cat "$CLUSTER_STATE/nodes"); i++)); do
    for pid in $(ip netns pids "$(cluster_ns "$i")" 2>/dev/null); do
      [[ $(cat "/proc/$pid/comm" 2>/dev/null) == slurmstepd ]] && kill -9 $(tree "$pid") 2>/dev/null
    done
  done
fi
for f in "$dir"/slurmd.*.pid; do [[ -e $f ]] && stop "$f" slurmd; done
stop "$dir/slurmctld.pid" slurmctld
stop "$dir/munge/munged.pid" munged
rm -rf "$dir"
echo "slurm down"
