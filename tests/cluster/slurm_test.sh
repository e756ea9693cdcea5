#!/usr/bin/env bash
# SLURM on the pretend cluster (scripts/cluster/slurm_up.sh: munged,
# slurmctld, a slurmd per node; 3 nodes, the job needs 2), running the example
# job script examples/slurm/tessel.sbatch (HSDP 2x2, checkpoints every 3 steps):
#   - submitted with sbatch, it completes on 2 nodes, and its loss per step
#     equals the same run's under a plain 4-rank mpirun (`tessel run -n 4`);
#   - `srun --mpi=pmix tessel train ...` in an allocation (no mpirun) gives
#     the same losses;
#   - a second submission loses a node: once the job has saved its step-3
#     checkpoint, node1's link is taken down. As on a real cluster, tessel
#     notices first (collective timeout 10 s; SLURM here waits 30 s,
#     SlurmdTimeout, where real clusters wait 300 s): `tessel run` names
#     node1, taken from the allocation (no host file), and exits 75; the job
#     script waits; SLURM marks node1 down, kills the job and requeues it
#     (--requeue); the requeued job runs on node0 and node2, resumes from
#     its newest checkpoint and completes, and every step it logged, before
#     and after the loss, has the undisturbed run's loss.
#     The ranks on node1 are stopped (SIGSTOP) just before the link goes down
#     and continued right after, so the run cannot finish in the moment
#     between noticing the checkpoint and cutting the link, however fast it
#     is: the job's other ranks wait for them in their next collective.
# Needs root, network namespaces, SLURM and munge (scripts/setup.sh installs
# them) and a cgroup file system (slurmd 22.05 will not start without one);
# exits 77 (skipped) with the reason where any is missing.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cluster_test_setup.sh" slurm
skip() { echo "SKIP: $*"; exit 77; }
for b in slurmctld slurmd munged sbatch scontrol; do
  command -v "$b" >/dev/null || skip "$b not installed (apt-get install slurmctld slurmd slurm-client munge)"
done
grep -q cgroup /proc/mounts || skip "no cgroup file system mounted: slurmd 22.05 does not start without one"
cluster=$root/scripts/cluster
source "$cluster/training_job.sh"
bash "$cluster/up.sh" 3 none
SLURMD_TIMEOUT=30 bash "$cluster/slurm_up.sh" 2 || { tail -n 20 "$work"/slurm/*.log; exit 1; }

steps=12
train_args=("$root/examples/configs/default.yaml" sft.max_num_steps=$steps sft.val_at_start=false
  sft.val_at_end=false sft.val_period=0 policy.dtensor_cfg.dp_replicate_size=2 checkpointing.save_period=3
  checkpointing.keep_top_k=null --no-print-config)

# The reference: the same training under a plain mpirun on this machine.
"$bin" run -n 4 -- train "${train_args[@]}" checkpointing.enabled=true checkpointing.checkpoint_dir="$work/ref/ckpt" \
  logger.log_dir="$work/ref/logs" >"$work/ref.log" 2>&1 || { cat "$work/ref.log"; exit 1; }

slurm() { bash "$cluster/slurm.sh" "$@"; }
submit() {  # submit NAME: the job's id; its output in $work/NAME.out
  TESSEL=$bin slurm sbatch --parsable --chdir="$root" --output="$work/$1.out" "$root/examples/slurm/tessel.sbatch" \
    "${train_args[@]}" checkpointing.checkpoint_dir="$work/$1/ckpt" logger.log_dir="$work/$1/logs"
}
field() { slurm scontrol show job -o "$1" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
wait_ended() {  # wait_ended JOB: its final state (a guard against a hang ends the wait after 5 min);
  local state last= start=$SECONDS  # each change of state, with the seconds since the call, to $work/states
  for _ in $(seq 600); do
    state=$(field "$1" JobState)
    [[ $state != "$last" ]] && echo "$((SECONDS - start)) s: $state $(field "$1" NodeList)" >>"$work/states"
    last=$state
    case $state in COMPLETED | FAILED | CANCELLED | TIMEOUT | OUT_OF_MEMORY | BOOT_FAIL | DEADLINE) break ;; esac
    sleep 0.5
  done
  echo "$state"
}
fail=0
check() {  # check NAME WHAT CONDITION...
  local name=$1 what=$2
  shift 2
  if "$@"; then echo "ok   $name: $what"; else echo "FAIL $name: $what"; fail=1; fi
}
# Every train row of NAME's metrics.jsonl has the reference's loss at its
# step, and every step has a row (scripts/cluster/training_job.sh).
same_losses() { job_same_losses "$work/$1/logs/metrics.jsonl" "$work/ref/logs/metrics.jsonl" "$1: $2" || fail=1; }

# 1. Undisturbed.
job=$(submit plain)
state=$(wait_ended "$job")
check plain "job $job ended $state" test "$state" = COMPLETED
check plain "ran on 2 nodes: $(field "$job" NodeList)" test "$(field "$job" NumNodes)" = 2
same_losses plain "losses per step equal the plain mpirun run's"
crossed=$(python3 -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1]) if "\"run\"" in l][-1]["inter_node_bytes"])' \
  "$work/plain/logs/metrics.jsonl")
check plain "bytes crossed between nodes ($crossed)" test "$crossed" -gt 0

# 1b. The ranks started by srun itself (SLURM's PMIx plugin, no mpirun).
slurm srun --mpi=pmix -N 2 --ntasks-per-node=2 --cpu-bind=none "$bin" train "${train_args[@]}" \
  checkpointing.enabled=true checkpointing.checkpoint_dir="$work/srun/ckpt" logger.log_dir="$work/srun/logs" \
  >"$work/srun.log" 2>&1 || { echo "FAIL srun: exit non-zero"; tail -n 20 "$work/srun.log"; fail=1; }
same_losses srun "losses per step equal the plain mpirun run's"

# 2. node1 lost after the step-3 checkpoint; tessel's timeout ends the run
# before SLURM notices.
job=$(TESSEL_COLLECTIVE_TIMEOUT_S=10 TESSEL_RUN_ABORT_GRACE_S=2 submit lost)
for _ in $(seq 600); do [[ -f $work/lost/ckpt/step_3/metadata.json ]] && break; sleep 0.1; done
check lost "saved its step-3 checkpoint on $(field "$job" NodeList)" test -f "$work/lost/ckpt/step_3/metadata.json"
# (An `if`, not `[[ ]] && echo`: the loop's status is its last body's, and
# under set -e a last pid that is not tessel's would end the test silently.)
ranks=$(for pid in $(ip netns pids "$TESSEL_CLUSTER_NAME-node1"); do
  if [[ $(cat "/proc/$pid/comm" 2>/dev/null) == tessel ]]; then echo "$pid"; fi; done)
check lost "node1 runs ranks of the job: $(echo $ranks)" test -n "$ranks"
kill -STOP $ranks
ip -n "$TESSEL_CLUSTER_NAME-node1" link set eth0 down
kill -CONT $ranks
: >"$work/states"
state=$(wait_ended "$job")
echo "    after the cut: $(paste -sd ';' "$work/states" | sed 's/;/, /g')"
check lost "job $job ended $state after $(field "$job" Restarts) requeue(s)" test "$state" = COMPLETED -a "$(field "$job" Restarts)" -ge 1
check lost "the requeued job ran without node1: $(field "$job" NodeList)" test "$(field "$job" NodeList)" = "node[0,2]"
check lost "node1 is down in SLURM: $(slurm sinfo -h -n node1 -o %T)" bash -c "[[ \$(bash '$cluster/slurm.sh' sinfo -h -n node1 -o %T) == down* ]]"
named=$(grep -o 'the job failed: lost node [^(]*' "$work/lost.out" || true)
check lost "tessel run named the node: '${named:-nothing}'" grep -q 'the job failed: lost node node1 at ' "$work/lost.out"
check lost "the job script waited for SLURM" grep -q 'tessel.sbatch: waiting up to 90 s for SLURM' "$work/lost.out"
resumed=$(grep -o 'resumed from [^ ]*' "$work/lost.out" || true)
check lost "the requeued run ${resumed:-did not resume}" test -n "$resumed"
same_losses lost "losses per step, before the loss and after the resume, equal the plain mpirun run's"
((fail)) && { echo "--- job output"; tr '\r' '\n' <"$work/lost.out" | grep -v '^\[#' | tail -n 40; tail -n 30 "$work"/slurm/slurmctld.log; }
exit $fail
