#!/usr/bin/env bash
# Fault trials: runs of a 2-process `tessel train` that lose a rank, then
# resume. Checks that every run ended within the bound (no hang), that no
# completed checkpoint was lost, and that the resumed run's losses equal an
# uninterrupted run's step for step.
#   kills during steps: SIGKILL to a random rank at a random moment of
#     training (after a random step k is logged, plus 0-100 ms; a kill that
#     lands while a checkpoint is written counts here too);
#   kills during saves: TESSEL_TEST_CRASH_IN_SAVE=<step>:<rank>:<point> kills a
#     random rank inside the save of a random checkpoint step at a random
#     point of the save (src/train/checkpoint.cpp): before or after writing its
#     shard (any rank), before the commit marker, before the rename, after the
#     rename and before pruning (rank 0).
# Usage: scripts/trials/fault_trials.sh [STEP_KILLS] [SAVE_KILLS]   (default 5 5)
# Env: TESSEL (the binary; default build/ci/bin/tessel, else build/default),
#      TRIAL_DIR (work directory; default a new temporary one), SEED (for $RANDOM).
# Prints one line per trial and a summary; exit 1 when any check failed.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
source "$root/scripts/env.sh"
step_kills=${1:-5}
save_kills=${2:-5}
RANDOM=${SEED:-$$}
tessel=${TESSEL:-}
for candidate in "$root/build/ci/bin/tessel" "$root/build/default/bin/tessel"; do
  [[ -z $tessel && -x $candidate ]] && tessel=$candidate
done
[[ -x $tessel ]] || { echo "no tessel binary: build it (scripts/build.sh) or set TESSEL" >&2; exit 2; }
work=${TRIAL_DIR:-$(mktemp -d /tmp/tessel_trials.XXXXXX)}
mkdir -p "$work"
bound_s=120  # a run still going after this counts as hung
steps=24
period=3

# $1: run directory. Checkpoints every $period steps, logs in <dir>/logs.
train() {
  local dir=$1
  shift
  timeout -k 5 "$bound_s" env "$@" "$tessel" train "$root/examples/configs/sft.yaml" --nproc 2 \
    --no-print-config policy.model_name=tiny-llama data.train.dataset_name=demo_sft \
    data.validation=null sft.val_period=0 sft.val_at_start=false sft.max_num_steps=$steps \
    sft.max_num_epochs=100 policy.train_global_batch_size=8 policy.train_micro_batch_size=2 \
    policy.max_total_sequence_length=128 policy.optimizer.kwargs.lr=0.003 policy.scheduler=null \
    checkpointing.enabled=true checkpointing.save_period=$period checkpointing.keep_top_k=null \
    checkpointing.checkpoint_dir="$dir/ckpt" logger.log_dir="$dir/logs" >>"$dir/output.txt" 2>&1
}

latest_step() {  # the newest complete checkpoint under $1/ckpt, or 0
  local best=0 d n
  for d in "$1"/ckpt/step_*; do
    [[ -f $d/metadata.json ]] || continue
    n=${d##*step_}
    ((n > best)) && best=$n
  done
  echo "$best"
}

last_logged_step() {  # the last train step in $1/logs/metrics.jsonl, or 0
  python3 - "$1/logs/metrics.jsonl" <<'PY'
import json, sys
steps = [0]
try:
    for line in open(sys.argv[1]):
        r = json.loads(line)
        if r.get("split") == "train": steps.append(r["step"])
except FileNotFoundError:
    pass
print(steps[-1])
PY
}

# Max relative difference between the last record of each step in $1 and the
# reference's; "missing" when a step has no record.
loss_diff() {
  python3 - "$work/reference/logs/metrics.jsonl" "$1/logs/metrics.jsonl" "$steps" <<'PY'
import json, sys
def losses(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("split") == "train": out[r["step"]] = r["loss"]
    return out
ref, got = losses(sys.argv[1]), losses(sys.argv[2])
n = int(sys.argv[3])
if any(s not in got for s in range(1, n + 1)) or len(ref) != n:
    print("missing")
else:
    print("%.3g" % max(abs(got[s] - ref[s]) / abs(ref[s]) for s in range(1, n + 1)))
PY
}

mkdir -p "$work/reference"
now() { date +%s.%N; }
since() { python3 -c "import sys; print('%.2f' % ($(now) - $1))"; }
start=$(now)
train "$work/reference"
ref_rc=$?
ref_s=$(since "$start")
[[ $ref_rc -eq 0 ]] || { echo "the uninterrupted run failed (exit $ref_rc): $work/reference/output.txt"; exit 1; }
printf 'uninterrupted run: %d steps in %.1f s (trials in %s)\n' "$steps" "$ref_s" "$work"

descendants() {  # every process below pid $1
  local child
  for child in $(pgrep -P "$1"); do
    echo "$child"
    descendants "$child"
  done
}

failures=0 hangs=0 lost=0 mismatches=0 killed=0
trial() {  # trial NAME KIND
  local name=$1 kind=$2 dir=$work/$1 victim="" at="" rc t0 run_s
  mkdir -p "$dir"
  t0=$(now)
  if [[ $kind == step ]]; then
    train "$dir" &
    local runner=$!
    # A random moment of training: once rank 0 has logged a random step k
    # (1 .. steps-1), a further 0-100 ms, so the kill lands in step k+1 or in
    # the save after step k.
    local k=$((RANDOM % (steps - 1) + 1)) metrics=$dir/logs/metrics.jsonl
    local n=0
    while kill -0 "$runner" 2>/dev/null && ((n < k)); do
      sleep 0.01
      n=$(grep -c '"split":"train"' "$metrics" 2>/dev/null)
      n=${n:-0}
    done
    at=$(python3 -c "import random; random.seed($RANDOM); print('%.3f' % random.uniform(0, 0.1))")
    sleep "$at"
    at="step $k + ${at}s"
    # The ranks: the `tessel` processes under this trial's runner (tessel
    # exec'd itself as mpirun, whose children they are).
    local ranks=() pid
    for pid in $(descendants "$runner"); do
      [[ $(ps -o comm= -p "$pid" 2>/dev/null) == tessel ]] && ranks+=("$pid")
    done
    if ((${#ranks[@]} > 0)); then
      victim=${ranks[$((RANDOM % ${#ranks[@]}))]}
      kill -KILL "$victim" 2>/dev/null && victim="pid $victim after $at"
    else
      victim="none (the run had ended)"
    fi
    wait "$runner"
    rc=$?
  else
    local save_step=$(((RANDOM % (steps / period) + 1) * period)) rank=$((RANDOM % 2)) points
    points=(before_shard after_shard)
    ((rank == 0)) && points+=(before_metadata before_rename after_rename)
    local point=${points[$((RANDOM % ${#points[@]}))]}
    victim="rank $rank $point in save $save_step"
    train "$dir" TESSEL_TEST_CRASH_IN_SAVE="$save_step:$rank:$point"
    rc=$?
  fi
  run_s=$(since "$t0")
  local logged latest floor
  logged=$(last_logged_step "$dir")
  latest=$(latest_step "$dir")
  # Every save before the last logged step had finished when that step began.
  floor=$(((logged - 1) / period * period))
  ((floor < 0)) && floor=0
  local verdict=ok
  # A killed rank's job exits 137 (mpirun passes on SIGKILL's status), so a
  # hang is told by `timeout` (124) or by the time taken.
  if [[ $rc -eq 124 ]] || python3 -c "import sys; sys.exit(0 if $run_s >= $bound_s else 1)"; then
    verdict="HUNG"
    ((hangs++))
  fi
  if ((latest < floor)); then verdict="LOST checkpoint (latest $latest < $floor)"; ((lost++)); fi
  [[ $rc -ne 0 ]] && ((killed++))
  # Resume and finish.
  train "$dir"
  local rc2=$? resumed diff
  resumed=$(grep -o 'resumed from [^ ]* (step [0-9]*)' "$dir/output.txt" | tail -1 | grep -o 'step [0-9]*)' | tr -dc 0-9)
  [[ $rc2 -eq 124 ]] && { verdict="HUNG on resume"; ((hangs++)); }
  [[ $rc2 -ne 0 && $verdict == ok ]] && verdict="resume failed (exit $rc2)"
  [[ $latest -gt 0 && "${resumed:-0}" != "$latest" && $verdict == ok ]] &&
    verdict="resumed from ${resumed:-none}, not the latest $latest"
  diff=$(loss_diff "$dir")
  if [[ $diff == missing ]] || python3 -c "import sys; sys.exit(0 if float('$diff') > 1e-6 else 1)"; then
    [[ $verdict == ok ]] && verdict="losses differ ($diff)"
    ((mismatches++))
  fi
  [[ $verdict == ok ]] || ((failures++))
  printf '%-8s kill %-38s exit %3d after %5.1f s; logged %d, latest ckpt %d; resumed from %s, exit %d; loss diff %s: %s\n' \
    "$name" "$victim" "$rc" "$run_s" "$logged" "$latest" "${resumed:-start}" "$rc2" "$diff" "$verdict"
}

for ((i = 1; i <= step_kills; ++i)); do trial "step_$i" step; done
for ((i = 1; i <= save_kills; ++i)); do trial "save_$i" save; done
echo "summary: $((step_kills + save_kills)) trials ($step_kills kills at random times, $save_kills in saves), $killed runs ended by the kill, $hangs hangs, $lost lost checkpoints, $mismatches loss mismatches; $failures failed"
[[ $failures -eq 0 ]]
