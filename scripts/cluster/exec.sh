#!/usr/bin/env bash
# Runs a command on one node of the pretend cluster, with OpenMPI set up for
# it: `scripts/cluster/exec.sh NODE COMMAND...`. On node 0 this is where
# mpirun (or `tessel run --hostfile`) starts; it launches the other nodes'
# daemons through rsh_agent.sh.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
node=${1:?usage: exec.sh NODE COMMAND...}
shift
ns=$(cluster_ns "$node")
ip netns list | grep -qx "$ns\( .*\)\?" || cluster_die "node $node is not up (scripts/cluster/up.sh)"
export OMPI_MCA_plm_rsh_agent="$here/rsh_agent.sh"
export OMPI_MCA_btl=self,vader,tcp
export OMPI_MCA_btl_tcp_if_include=$CLUSTER_SUBNET.0/24
export OMPI_MCA_oob_tcp_if_include=$CLUSTER_SUBNET.0/24
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
exec ip netns exec "$ns" unshare --uts -- sh -c "hostname node$node && exec \"\$@\"" sh "$@"
