#!/usr/bin/env bash
# Network trials on two pretend nodes (issue 43): a 4-rank HSDP 2x2 job
# started by `tessel run --hostfile` on node 0, node 1's link taken down.
#   partitions: the link goes down for good at a random moment — after a
#     random step k is logged plus 0-300 ms, or, for every other trial, the
#     moment rank 0 logs a random checkpoint step, which it saves next (node
#     1's ranks are held with SIGSTOP across the cut, so that their part of
#     the save cannot finish first). Pass:
#     `tessel run` returned non-zero within timeout + 30 s (no hang), its
#     closing line names node 1 and no other node, nothing is left on node 0,
#     and once the link is back nothing on node 1; the resume command it
#     printed, run as printed, starts from a checkpoint no older than the
#     last save that had finished when the link went down (none lost), and
#     every loss equals the undisturbed run's.
#   outages: the link goes down for a random 5-25 s at a random step and comes
#     back; collective timeout 60 s. Pass: the job finishes (exit 0) with every
#     loss equal to the undisturbed run's.
# Usage (root): scripts/trials/partition_trials.sh [PARTITIONS] [OUTAGES]   (default 10 10)
# Env: TESSEL (binary; default build/ci/bin/tessel), SEED (for $RANDOM),
#      PARTITION_TIMEOUT_S (collective timeout of the partition runs, default 10).
# Prints one line per trial and a summary; exit 1 when any check failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
partitions=${1:-10}
outages=${2:-10}
RANDOM=${SEED:-$$}
bin=${TESSEL:-$root/build/ci/bin/tessel}
[[ -x $bin ]] || { echo "no tessel binary at $bin: build it (scripts/build.sh) or set TESSEL" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "needs root (network namespaces)" >&2; exit 2; }
export TESSEL_CLUSTER_NAME=trial$$
export TESSEL_CLUSTER_STATE=$(mktemp -d /tmp/tessel_partition_trials.XXXXXX)
work=$TESSEL_CLUSTER_STATE
trap 'bash "$root/scripts/cluster/down.sh" >/dev/null 2>&1' EXIT
bash "$root/scripts/cluster/up.sh" 2 >/dev/null
node1=$TESSEL_CLUSTER_NAME-node1
printf '10.213.0.1 slots=2\n10.213.0.2 slots=2\n' >"$work/hostfile"
source "$root/scripts/cluster/training_job.sh"
steps=400
timeout_s=${PARTITION_TIMEOUT_S:-10}
failed=0
hangs=0
lost_checkpoints=0
mismatches=0

TESSEL_COLLECTIVE_TIMEOUT_S=60 job_start reference
wait $! || { echo "the undisturbed run failed: $work/reference.log"; exit 1; }
echo "reference: $steps steps, logs in $work/reference"

# The step of the newest complete checkpoint in DIR (0 if none).
newest_checkpoint() {
  ls "$1" 2>/dev/null | grep -E '^step_[0-9]+$' | sed 's/step_//' | sort -n | tail -1 || true
}

for ((t = 1; t <= partitions; t++)); do
  name=partition$t
  TESSEL_COLLECTIVE_TIMEOUT_S=$timeout_s job_start "$name"
  pid=$!
  if ((t % 2 == 1)); then
    k=$((5 + RANDOM % 300))
    job_wait_for_step "$name" "$k" "$pid" >/dev/null || { echo "trial $t: ended before step $k"; failed=1; continue; }
    sleep "0.$(printf '%03d' $((RANDOM % 300)))"
    when="after step $k"
  else
    # Into the save of a random checkpoint step: the moment rank 0 logs that
    # step (it saves right after), node 1's ranks are stopped (SIGSTOP), so
    # that they cannot finish their part of the save before the cut; they go
    # on (SIGCONT) once the link is down.
    save_step=$((10 * (1 + RANDOM % 30)))
    job_wait_for_step "$name" 1 "$pid" >/dev/null || { echo "FAIL partition $t: ended before step 1"; failed=1; continue; }
    stopped=$(for p in $(ip netns pids "$node1"); do [[ $(cat "/proc/$p/comm" 2>/dev/null) == tessel ]] && echo "$p"; done)
    python3 - "$work/$name/logs/metrics.jsonl" "$save_step" "$pid" $stopped <<'PY' || { echo "FAIL partition $t: step $save_step not seen"; failed=1; continue; }
import os, signal, sys, time
path, step, job, ranks = sys.argv[1], sys.argv[2], int(sys.argv[3]), [int(p) for p in sys.argv[4:]]
needle = f'"split":"train","step":{step},'.encode()
tail = b""
with open(path, "rb") as f:
    while True:
        chunk = f.read()
        if chunk:
            tail = tail[-len(needle):] + chunk
            if needle in tail:
                for r in ranks: os.kill(r, signal.SIGSTOP)
                sys.exit(0)
            continue
        try: os.kill(job, 0)
        except ProcessLookupError: sys.exit(1)
        time.sleep(0.0005)
PY
    when="during the save of step $save_step"
  fi
  saved_before=$(newest_checkpoint "$work/$name/ckpt")
  at_step=$(job_last_step "$name")
  ip -n "$node1" link set eth0 down
  down_at=$(date +%s.%N)
  if ((t % 2 == 0)); then kill -CONT $stopped 2>/dev/null; fi
  for _ in $(seq 1500); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  hung=0
  if kill -0 "$pid" 2>/dev/null; then hung=1; hangs=$((hangs + 1)); kill -9 "$pid"; fi
  rc=0; wait "$pid" || rc=$?
  took=$(python3 -c "print(round($(date +%s.%N) - $down_at, 1))")
  summary=$(grep '^tessel run: the job failed' "$work/$name.log" || true)
  left0=$(ip netns pids "$TESSEL_CLUSTER_NAME-node0")
  ip -n "$node1" link set eth0 up
  for _ in $(seq 150); do [[ -z $(ip netns pids "$node1") ]] && break; sleep 0.2; done
  left1=$(ip netns pids "$node1")
  ok=1
  problems=()
  ((hung)) && problems+=("hung")
  ((rc != 0)) || problems+=("exit 0")
  python3 -c "import sys; sys.exit(0 if $took <= $timeout_s + 30 else 1)" || problems+=("returned after ${took} s")
  [[ $summary == *"lost node 10.213.0.2 "* && $summary != *"10.213.0.1 ("* ]] || problems+=("closing line: '${summary:0:120}'")
  [[ -z $left0 ]] || problems+=("left on node 0: $left0")
  [[ -z $left1 ]] || problems+=("left on node 1: $left1")
  resumed_from=none
  if [[ -n $summary ]]; then
    resume=${summary##*resume from the last checkpoint with: }
    TESSEL_COLLECTIVE_TIMEOUT_S=60 bash "$root/scripts/cluster/exec.sh" 0 sh -c "$resume" >"$work/$name.resumed.log" 2>&1 ||
      problems+=("resume failed")
    resumed_from=$(grep -o 'resumed from [^ ]* (step [0-9]*)' "$work/$name.resumed.log" | grep -o '[0-9]*)$' | tr -d ')' || true)
    [[ -z $resumed_from ]] && resumed_from=0
    if ((${saved_before:-0} > resumed_from)); then
      problems+=("resumed from step $resumed_from, but step $saved_before was saved before the link went down")
      lost_checkpoints=$((lost_checkpoints + 1))
    fi
    if ! job_same_losses "$work/$name/logs/metrics.jsonl" "$work/reference/logs/metrics.jsonl" "$name" >"$work/$name.losses"; then
      problems+=("$(cat "$work/$name.losses")")
      mismatches=$((mismatches + 1))
    fi
  fi
  ((${#problems[@]})) && ok=0
  ((ok)) || failed=1
  printf '%s partition %d (%s, logged step %s, newest checkpoint %s): returned %s s after the link went down, exit %d, resumed from step %s%s\n' \
    "$( ((ok)) && echo ok || echo FAIL)" "$t" "$when" "$at_step" "${saved_before:-none}" "$took" "$rc" "$resumed_from" \
    "$( ((ok)) || printf '; %s' "${problems[@]}")"
done

for ((t = 1; t <= outages; t++)); do
  name=outage$t
  k=$((5 + RANDOM % 200))
  length=$((5 + RANDOM % 21))
  TESSEL_COLLECTIVE_TIMEOUT_S=60 job_start "$name"
  pid=$!
  job_wait_for_step "$name" "$k" "$pid" >/dev/null || { echo "FAIL outage $t: ended before step $k"; failed=1; continue; }
  ip -n "$node1" link set eth0 down
  sleep "$length"
  ip -n "$node1" link set eth0 up
  running=0; kill -0 "$pid" 2>/dev/null && running=1
  for _ in $(seq 1500); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
  if kill -0 "$pid" 2>/dev/null; then hangs=$((hangs + 1)); kill -9 "$pid"; fi
  rc=0; wait "$pid" || rc=$?
  losses=$(job_same_losses "$work/$name/logs/metrics.jsonl" "$work/reference/logs/metrics.jsonl" "$name") ||
    mismatches=$((mismatches + 1))
  ok=0; ((rc == 0 && running)) && [[ $losses == ok* ]] && ok=1
  ((ok)) || failed=1
  printf '%s outage %d: link down %d s after step %d, exit %d, %s; %s\n' "$( ((ok)) && echo ok || echo FAIL)" "$t" \
    "$length" "$k" "$rc" "$( ((running)) && echo "running when the link came back" || echo "ENDED before the link came back")" \
    "${losses#* }"
done
echo "summary: $partitions partitions, $outages outages: $hangs hangs, $lost_checkpoints lost checkpoints, $mismatches loss mismatches; work in $work"
exit $failed
