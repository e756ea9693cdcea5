#!/usr/bin/env bash
# Peak memory per rank of real training runs, as the OS measures it (VmHWM of
# every rank, which `tessel train` reads from /proc/self/status into
# metrics.jsonl), against issue 10's bounds. Two cases:
#   qwen05   Qwen2.5-0.5B's real config.json (494M parameters, tied embedding
#            of 136M), random fp32 weights written by `tessel init-model
#            --config`, loaded from that directory; seq 64, micro batch 1 per
#            rank, synthetic data, 2 steps; world 1, FSDP 2, FSDP 4, HSDP 2x2.
#   llama150m  a 48-layer Llama of 150M parameters with vocab 1024
#            (bench/configs/llama-150m-48l/config.json) at FSDP 8.
# Per layout: the load-phase peak (VmHWM after load and sharding, the
# "setup" record), the peak after each step, and the bound, with P the
# parameters, R those of the root group (embedding, final norm, lm_head) and
# L those of the largest decoder layer, counted from the written
# model.safetensors header (not from tessel's code), fp32:
#   world 1  16 P + 1.5 GiB;   FSDP n  16 P / n + 8 R + 12 L + 1 GiB
#   (HSDP 2x2 shards over 2: 16 P / 2 + 8 R + 12 L + 1 GiB);
#   llama150m at FSDP 8  16 P / 8 + 0.5 GiB.
# Prints ONE JSON object. Usage: bench/run_memory.sh [build-dir] [cases...]
#   e.g. bench/run_memory.sh build/default qwen05 llama150m
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build/default}
shift || true
cases=("$@")
[[ ${#cases[@]} -gt 0 ]] || cases=(qwen05 llama150m)
bin="$build/bin/tessel"
[[ -x $bin ]] || { echo "no $bin: build the tessel_bin target" >&2; exit 2; }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=${TESSEL_BENCH_DIR:-$(mktemp -d /tmp/memory_bench.XXXXXX)}
mkdir -p "$work"

common=(examples/configs/sft.yaml
  policy.max_total_sequence_length=64
  policy.train_micro_batch_size=1
  policy.precision=float32
  data.train.dataset_name=synthetic
  '~data.validation'
  sft.max_num_epochs=1
  sft.max_num_steps=2
  sft.val_period=0
  sft.val_at_start=false
  sft.val_at_end=false
  checkpointing.enabled=false)

# run CASE LAYOUT MODEL_DIR NPROC REPLICATE
run() {
  local case=$1 layout=$2 model=$3 n=$4 rep=$5
  local log_dir="$work/$case-$layout"
  local cmd=("$bin" train "${common[@]}" "policy.model_name=$model" "policy.train_global_batch_size=$((n))"
    "policy.dtensor_cfg.dp_replicate_size=$rep" "cluster.gpus_per_node=$n" --nproc "$n"
    "logger.log_dir=$log_dir" +logger.rank_metrics_period=1 --no-print-config)  # peak RSS at every step
  local t0 t1 load
  load=$(cat /proc/loadavg)
  t0=$(date +%s.%N)
  if ! "${cmd[@]}" >"$log_dir.log" 2>&1; then
    echo "tessel train failed for $case $layout; log: $log_dir.log" >&2
    tail -n 20 "$log_dir.log" >&2
    exit 1
  fi
  t1=$(date +%s.%N)
  python3 - "$log_dir/metrics.jsonl" "$case" "$layout" "$n" "$rep" "$load" "$t0" "$t1" "${cmd[*]}" <<'PY'
import json, sys
path, case, layout, n, rep, load, t0, t1, cmd = sys.argv[1:]
rows = [json.loads(l) for l in open(path) if l.strip()]
setup = [r for r in rows if r.get("split") == "setup"][0]
train = [r for r in rows if r.get("split") == "train"]
print(json.dumps({"case": case, "layout": layout, "ranks": int(n), "dp_replicate": int(rep),
                  "load_peak_rss_bytes_per_rank": setup["peak_rss_bytes"],
                  "load_rss_bytes_per_rank": setup["rss_bytes"],
                  "peak_rss_bytes_per_rank_by_step": [r["peak_rss_bytes"] for r in train],
                  "peak_rss_bytes_max": max(r["peak_rss_bytes_max"] for r in train),
                  "loss_each": [r["loss"] for r in train],
                  "step_time_s_each": [r["step_time_s"] for r in train],
                  "wall_s": round(float(t1) - float(t0), 1), "loadavg_before": load, "command": cmd}))
PY
}

# make_model NAME CONFIG: writes random fp32 weights once.
make_model() {
  local dir="$work/$1"
  [[ -f $dir/model.safetensors || -f $dir/model.safetensors.index.json ]] ||
    "$bin" init-model --config "$2" "$dir" --seed 1 >&2
  echo "$dir"
}

results=()
for c in "${cases[@]}"; do
  case $c in
    qwen05)
      m=$(make_model qwen05 "$root/tests/models/hf_configs/Qwen__Qwen2.5-0.5B/config.json")
      results+=("$(run qwen05 world1 "$m" 1 1)" "$(run qwen05 fsdp2 "$m" 2 1)"
        "$(run qwen05 fsdp4 "$m" 4 1)" "$(run qwen05 hsdp2x2 "$m" 4 2)") ;;
    llama150m)
      m=$(make_model llama150m "$root/bench/configs/llama-150m-48l/config.json")
      results+=("$(run llama150m fsdp8 "$m" 8 1)") ;;
    *) echo "unknown case $c (qwen05, llama150m)" >&2; exit 2 ;;
  esac
done

python3 - "$work" "${results[@]}" <<'PY'
import json, os, re, struct, sys
work, *rs = sys.argv[1:]
GiB = 1024 ** 3

def counts(model_dir):
    """P, R, L from the safetensors header(s) of the written model."""
    names = {}
    files = [f for f in os.listdir(model_dir) if f.endswith(".safetensors")]
    for f in files:
        with open(os.path.join(model_dir, f), "rb") as fh:
            (n,) = struct.unpack("<Q", fh.read(8))
            header = json.loads(fh.read(n))
        for k, v in header.items():
            if k != "__metadata__":
                numel = 1
                for d in v["shape"]:
                    numel *= d
                names[k] = numel
    layers = {}
    for k, v in names.items():
        m = re.match(r"model\.layers\.(\d+)\.", k)
        if m:
            layers[int(m.group(1))] = layers.get(int(m.group(1)), 0) + v
    P = sum(names.values())
    L = max(layers.values())
    R = P - sum(layers.values())
    return P, R, L

out = {"bench": "memory", "host": os.uname().nodename, "cpus": os.cpu_count(), "work": work, "runs": []}
for r in map(json.loads, rs):
    P, R, L = counts(os.path.join(work, r["case"]))
    shard = r["ranks"] // r["dp_replicate"]
    if r["case"] == "llama150m":
        bound = 16 * P / shard + 0.5 * GiB
        rule = "16 P / n + 0.5 GiB"
    elif shard == 1:
        bound = 16 * P + 1.5 * GiB
        rule = "16 P + 1.5 GiB"
    else:
        bound = 16 * P / shard + 8 * R + 12 * L + 1 * GiB
        rule = "16 P / n + 8 R + 12 L + 1 GiB"
    r.update({"P": P, "R": R, "L": L, "shard_group": shard, "bound_rule": rule,
              "bound_bytes": int(bound), "bound_gib": round(bound / GiB, 3),
              "peak_gib": round(r["peak_rss_bytes_max"] / GiB, 3),
              "load_peak_gib": round(max(r["load_peak_rss_bytes_per_rank"]) / GiB, 3),
              "within_bound": r["peak_rss_bytes_max"] <= bound})
    out["runs"].append(r)
print(json.dumps(out))
PY
