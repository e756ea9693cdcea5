# Sourced helpers for a training job on the pretend cluster, started by
# `tessel run --hostfile` on node 0 as a user would: used by
# tests/cluster/lost_node_test.sh and scripts/trials/partition_trials.sh.
# The caller sets: root (source tree), bin (tessel), work (a directory with
# a `hostfile` of the nodes' addresses), steps, and TESSEL_CLUSTER_NAME.

# Starts run NAME in the background (HSDP 2x2 on 2 nodes, the default tiny
# model, a checkpoint every 10 steps); $! is its pid.
job_start() {
  local name=$1
  bash "$root/scripts/cluster/exec.sh" 0 "$bin" run -n 4 --hostfile "$work/hostfile" -- train \
    "$root/examples/configs/default.yaml" cluster.num_nodes=2 cluster.gpus_per_node=2 \
    sft.max_num_steps="$steps" sft.val_period=0 sft.val_at_start=false sft.val_at_end=false \
    checkpointing.enabled=true checkpointing.save_period=10 "checkpointing.checkpoint_dir=$work/$name/ckpt" \
    "logger.log_dir=$work/$name/logs" --no-print-config >"$work/$name.log" 2>&1 &
}

# The last step run NAME has logged (0 before the first).
job_last_step() {
  local file=$work/$1/logs/metrics.jsonl
  [[ -f $file ]] || { echo 0; return; }
  grep -o '"split":"train","step":[0-9]*' "$file" | tail -1 | grep -o '[0-9]*$' || echo 0
}

# Waits until run NAME (pid PID) has logged step N; fails if it ended first.
job_wait_for_step() {
  local name=$1 step=$2 pid=$3
  while kill -0 "$pid" 2>/dev/null; do
    (($(job_last_step "$name") >= step)) && return 0
    sleep 0.1
  done
  echo "FAIL: run $name ended before step $step"
  tail -20 "$work/$name.log"
  return 1
}

# Every train record of metrics file A has the loss of B's record of the
# same step, and A has a record of every step B has (a resumed run logs again
# the steps after its checkpoint: those must agree too). Prints one ok/FAIL
# line: "ok   WHAT: ...".
job_same_losses() {
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
def rows(p): return [r for r in map(json.loads, open(p)) if r.get("split") == "train"]
got, ref, what = rows(sys.argv[1]), {r["step"]: r["loss"] for r in rows(sys.argv[2])}, sys.argv[3]
bad = [(r["step"], r["loss"], ref.get(r["step"])) for r in got if ref.get(r["step"]) != r["loss"]]
steps = sorted({r["step"] for r in got})
missing = sorted(set(ref) - set(steps))
ok = not bad and not missing and bool(steps)
print(("ok   " if ok else "FAIL ") + f"{what}: {len(got)} step records up to step {steps[-1] if steps else None}, "
      f"{len(bad)} losses differ from the undisturbed run's" + (f" (first: {bad[0]})" if bad else "")
      + (f", {len(missing)} steps missing (first: {missing[0]})" if missing else ""))
sys.exit(0 if ok else 1)
PY
}
