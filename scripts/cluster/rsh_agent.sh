#!/usr/bin/env bash
# OpenMPI's remote-launch agent on the pretend cluster (plm_rsh_agent): called
# as `rsh_agent.sh HOST COMMAND...` the way ssh would be, it runs COMMAND in
# HOST's network namespace with a UTS namespace whose hostname is nodeN.
# Nodes need their own hostnames: OpenMPI names its session files after the
# host, and two "nodes" sharing one crash each other's.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
# ssh-style options OpenMPI may pass before the host (e.g. -x).
while [[ ${1:-} == -* ]]; do shift; done
host=${1:?usage: rsh_agent.sh HOST COMMAND...}
shift
node=$(cluster_node_of "$host")
# Like ssh, the command arrives as words for a shell on the remote side.
exec ip netns exec "$(cluster_ns "$node")" unshare --uts -- sh -c "hostname node$node && exec sh -c \"\$0\"" "$*"
