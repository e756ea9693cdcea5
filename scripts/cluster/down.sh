#!/usr/bin/env bash
# Tears the pretend cluster down: ends every process still inside its
# namespaces, then deletes them.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^($CLUSTER_PREFIX[0-9]+|$CLUSTER_SWITCH)$"); do
  pids=$(ip netns pids "$ns" 2>/dev/null)
  [[ -n $pids ]] && kill -9 $pids 2>/dev/null
  ip netns del "$ns"
done
rm -f "$CLUSTER_STATE/nodes" "$CLUSTER_STATE/rate"
echo "cluster down"
