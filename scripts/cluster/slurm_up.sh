#!/usr/bin/env bash
# Starts SLURM (Debian's slurm-wlm) on the pretend cluster that up.sh made:
# munged, slurmctld on node0 and one slurmd per node, each in its node's
# network namespace with a UTS namespace of hostname nodeN (as exec.sh), so
# SLURM sees N machines. Everything lives in a state directory of this
# cluster's own ($CLUSTER_STATE/slurm: config, munge key and socket, spool,
# logs, pid files) and nothing under /etc is read or changed, so the
# machine's own SLURM (if any) and other pretend clusters are untouched.
#
# Usage: scripts/cluster/slurm_up.sh [CPUS_PER_NODE]    (default 2)
#        SLURMD_TIMEOUT=S (default 10): how long a node may not answer before
#        SLURM marks it down
# then:  scripts/cluster/slurm.sh sbatch ...  /  squeue  /  sinfo
#        scripts/cluster/slurm_down.sh
# Needs root, a cluster from up.sh, and slurmctld, slurmd, munged (Debian:
# apt-get install slurmctld slurmd slurm-client munge).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
cpus=${1:-2}
[[ $cpus =~ ^[1-9][0-9]{0,2}$ ]] || cluster_die "CPUS_PER_NODE must be 1-999, got '$cpus'"
slurmd_timeout=${SLURMD_TIMEOUT:-10}
[[ $slurmd_timeout =~ ^[1-9][0-9]{0,3}$ ]] || cluster_die "SLURMD_TIMEOUT must be 1-9999 seconds, got '$slurmd_timeout'"
cluster_require_root
[[ -f $CLUSTER_STATE/nodes ]] || cluster_die "no cluster is up: run scripts/cluster/up.sh NODES [RATE] first"
nodes=$(cat "$CLUSTER_STATE/nodes")
for ((i = 0; i < nodes; i++)); do
  ip netns list | grep -qx "$(cluster_ns "$i")\( .*\)\?" ||
    cluster_die "node $i of the cluster is gone: run scripts/cluster/up.sh NODES [RATE] again"
done
declare -A bin
for b in munged slurmctld slurmd sbatch scontrol sinfo; do
  bin[$b]=$(command -v "$b" || command -v "/usr/sbin/$b" || true)
  [[ -n ${bin[$b]} ]] ||
    cluster_die "$b not found: install SLURM and munge (Debian: apt-get install slurmctld slurmd slurm-client munge)"
done
bash "$here/slurm_down.sh" >/dev/null 2>&1 || true  # idempotent, like up.sh

dir=$SLURM_STATE
mkdir -p "$dir/munge" "$dir/ctld" "$dir/tmp"
for ((i = 0; i < nodes; i++)); do mkdir -p "$dir/spool/node$i" "$dir/tmp.node$i"; done
# Only root enters: every daemon, client and job here runs as root.
chmod 700 "$dir" "$dir/munge"
# A fresh key per cluster: every daemon and client here shares one munged.
head -c 1024 /dev/urandom >"$dir/munge/munge.key"
chmod 400 "$dir/munge/munge.key"

node_list=node0
((nodes > 1)) && node_list="node[0-$((nodes - 1))]"
{
  cat <<EOF
# Written by scripts/cluster/slurm_up.sh for the pretend cluster '$CLUSTER_NAME'.
ClusterName=$CLUSTER_NAME
SlurmctldHost=node0($(cluster_ip 0))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
# One munged with a socket of this cluster's own (a path socket is reachable
# from every network namespace). cred_expire is also how long a requeued job
# waits before it may start again: 120 s by default, 15 here (launching a
# step on these nodes takes well under a second).
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=15
StateSaveLocation=$dir/ctld
# %n: each node's slurmd its own spool, pid and log (all share one file system).
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.%n.log
# Each node's slurmd sees its own directory here (slurm_up.sh mounts
# tmp.nodeN over it): a step's PMIx directory is named by job and step
# alone, and nodes sharing one /tmp collide on it.
TmpFS=$dir/tmp
# No cgroups: pretend nodes share one kernel and one cgroup tree.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
SelectType=select/linear
SchedulerType=sched/builtin
# A requeued job waits for a scheduling pass once its begin time has come
# (nothing else wakes the scheduler then): every 5 s, not every 60.
SchedulerParameters=sched_interval=5
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
# The nodes claim CPUs=$cpus whatever this machine has (they share its cores).
SlurmdParameters=config_overrides
# A node that stops answering is DOWN after SlurmdTimeout (10 s unless
# SLURMD_TIMEOUT), so its job is requeued (JobRequeue=1 makes --requeue the
# default) long before a job would wait for it; one that answers again
# returns by itself (ReturnToService=2).
SlurmdTimeout=$slurmd_timeout
SlurmctldTimeout=10
MessageTimeout=5
JobRequeue=1
ReturnToService=2
KillWait=5
InactiveLimit=0
MinJobAge=600
EOF
  for ((i = 0; i < nodes; i++)); do echo "NodeName=node$i NodeAddr=$(cluster_ip "$i") CPUs=$cpus State=UNKNOWN"; done
  echo "PartitionName=main Nodes=$node_list Default=YES MaxTime=INFINITE State=UP"
} >"$dir/slurm.conf"
export SLURM_CONF=$dir/slurm.conf

# on_node I COMMAND...: in node I's network namespace, hostname nodeI, and
# a mount namespace where $dir/tmp is the node's own. Not `ip netns exec`,
# which mounts a sysfs of the namespace's own without the cgroup file
# systems, and slurmd 22.05 will not start without them (even with
# proctrack/linuxproc, which uses none).
on_node() {
  local node=$1
  shift
  nsenter --net="/run/netns/$(cluster_ns "$node")" unshare --uts --mount --propagation slave -- \
    sh -c "hostname node$node && mount --bind '$dir/tmp.node$node' '$dir/tmp' && exec \"\$@\"" sh "$@"
}
# munged on node0 (so down.sh, which ends the nodes' processes, ends it too).
# --force: it refuses a socket in directories other users cannot enter (their
# clients could not reach it), which is what these are.
on_node 0 "${bin[munged]}" --force --origin="$(cluster_ip 0)" --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
  --pid-file="$dir/munge/munged.pid" --log-file="$dir/munge/munged.log" --seed-file="$dir/munge/munged.seed" ||
  cluster_die "munged did not start: $(tail -n 3 "$dir/munge/munged.log" 2>/dev/null)"
on_node 0 "${bin[slurmctld]}" -f "$SLURM_CONF" ||
  cluster_die "slurmctld did not start: $(tail -n 5 "$dir/slurmctld.log" 2>/dev/null)"
for ((i = 0; i < nodes; i++)); do
  on_node "$i" "${bin[slurmd]}" -f "$SLURM_CONF" -N "node$i" ||
    cluster_die "slurmd on node$i did not start: $(tail -n 5 "$dir/slurmd.node$i.log" 2>/dev/null)"
done

# Ready when every node is idle (registered with slurmctld).
for _ in $(seq 60); do
  idle=$(on_node 0 "${bin[sinfo]}" -h -N -t idle -o %N 2>/dev/null | sort -u | wc -l || true)
  ((idle == nodes)) && break
  sleep 0.5
done
((idle == nodes)) || cluster_die "after 30 s only $idle of $nodes nodes are idle in SLURM:
$(on_node 0 "${bin[sinfo]}" -N 2>&1)
$(tail -n 5 "$dir/slurmctld.log" 2>/dev/null)"
echo "slurm up: cluster $CLUSTER_NAME, $nodes nodes x $cpus CPUs, SLURM_CONF=$SLURM_CONF"
