#!/usr/bin/env bash
# Tokens/s of llama-100m through the real trainer (`tessel train`), fp32 on
# the CPU, synthetic data (seeded random tokens), sequence length 256, global
# batch 4 sequences (micro batch 1) = 1024 tokens per step, in three layouts:
#   single  1 process (micro batch 1 x accumulation 4; libtorch's default
#           thread count, which the trainer leaves alone for one process)
#   fsdp4   4 processes, FSDP over 4 (1 micro batch per rank, 1 thread each)
#   hsdp2x2 4 processes, HSDP: 2 replicas x shard groups of 2
#   single1t (not run by default) 1 process with TESSEL_NUM_THREADS=1
# Each runs `sft.max_num_steps` steps (default 6); step 1 (warm-up: first
# allocation, first collectives) is left out of the figures. Reads
# tokens_per_s and step_time_s of every train step from
# <log_dir>/metrics.jsonl and prints ONE JSON object: per layout the median
# and mean over steps 2.., every step's values, peak RSS per rank, loss, the
# load average before and after, the CPU seconds (user + sys) the run took in
# all its processes (/usr/bin/time: mpirun reaps the ranks), and the command.
# Usage: bench/run_train_100m.sh [build-dir] [steps] [layouts...]
#   e.g. bench/run_train_100m.sh build/fsdpbench 6 single fsdp4 hsdp2x2
set -euo pipefail
build=${1:-build/default}
steps=${2:-6}
shift 2 || shift $# || true
layouts=("$@")
[[ ${#layouts[@]} -gt 0 ]] || layouts=(single fsdp4 hsdp2x2)
bin="$build/bin/tessel"
[[ -x $bin ]] || { echo "no $bin: build the tessel_bin target" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
out=$(mktemp -d /tmp/train_100m.XXXXXX)

common=(examples/configs/sft.yaml
  policy.model_name=llama-100m
  policy.max_total_sequence_length=256
  policy.train_global_batch_size=4
  policy.train_micro_batch_size=1
  policy.precision=float32
  data.train.dataset_name=synthetic
  '~data.validation'
  sft.max_num_epochs=1
  "sft.max_num_steps=$steps"
  sft.val_period=0
  sft.val_at_start=false
  sft.val_at_end=false
  checkpointing.enabled=false)

results=()
for layout in "${layouts[@]}"; do
  case $layout in
    single|single1t) args=(policy.dtensor_cfg.dp_replicate_size=1 cluster.gpus_per_node=1 --nproc 1) ;;
    fsdp4)   args=(policy.dtensor_cfg.dp_replicate_size=1 cluster.gpus_per_node=4 --nproc 4) ;;
    hsdp2x2) args=(policy.dtensor_cfg.dp_replicate_size=2 cluster.gpus_per_node=4 --nproc 4) ;;
    *) echo "unknown layout $layout (single, fsdp4, hsdp2x2)" >&2; exit 2 ;;
  esac
  log_dir="$out/$layout"
  envs=()
  [[ $layout == single1t ]] && envs=(env TESSEL_NUM_THREADS=1)
  # +logger.rank_metrics_period=1: every step's record carries the peak RSS.
  cmd=("${envs[@]}" "$bin" train "${common[@]}" "logger.log_dir=$log_dir" +logger.rank_metrics_period=1 "${args[@]}"
    --no-print-config)
  load_before=$(cat /proc/loadavg)
  start=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  t0=$(date +%s.%N)
  if ! /usr/bin/time -f '%U %S' -o "$out/$layout.time" "${cmd[@]}" >"$out/$layout.log" 2>&1; then
    echo "tessel train failed for $layout; log: $out/$layout.log" >&2
    tail -n 20 "$out/$layout.log" >&2
    exit 1
  fi
  t1=$(date +%s.%N)
  load_after=$(cat /proc/loadavg)
  results+=("$(python3 - "$log_dir/metrics.jsonl" "$layout" "$load_before" "$load_after" "$start" "$t0" "$t1" "$(tail -n 1 "$out/$layout.time")" "${cmd[*]}" <<'PY'
import json, statistics, sys
path, layout, lb, la, start, t0, t1, cpu, cmd = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.strip()]
train = [r for r in rows if r.get("split") == "train"]
meas = train[1:]  # step 1 is the warm-up
tps = [r["tokens_per_s"] for r in meas]
sts = [r["step_time_s"] for r in meas]
print(json.dumps({
    "layout": layout,
    "start": start,
    "wall_s": round(float(t1) - float(t0), 1),
    "cpu_s": round(sum(map(float, cpu.split())), 1),
    "loadavg_before": lb, "loadavg_after": la,
    "steps": len(train), "measured_steps": len(meas),
    "tokens_per_step": train[0]["tokens"],
    "tokens_per_s_median": statistics.median(tps),
    "tokens_per_s_mean_of_steps": statistics.mean(tps),
    "tokens_per_s_total": sum(r["tokens"] for r in meas) / sum(sts),
    "step_time_s_median": statistics.median(sts),
    "step_time_s_each": [r["step_time_s"] for r in train],
    "tokens_per_s_each": [r["tokens_per_s"] for r in train],
    "loss_each": [r["loss"] for r in train],
    "peak_rss_bytes_max": max(r["peak_rss_bytes_max"] for r in train),
    "peak_rss_bytes_per_rank_last": train[-1]["peak_rss_bytes"],
    "command": cmd,
}))
PY
)")
done
python3 - "$out" "${results[@]}" <<'PY'
import json, os, sys
out, *rs = sys.argv[1:]
print(json.dumps({
    "bench": "train_100m", "host": os.uname().nodename, "cpus": os.cpu_count(),
    "preset": "llama-100m", "seq": 256, "global_batch": 4, "micro_batch": 1,
    "data": "synthetic", "precision": "float32", "logs": out,
    "env": {k: os.environ.get(k, "unset") for k in ("TESSEL_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")},
    "layouts": {r["layout"]: r for r in map(json.loads, rs)},
}))
PY
