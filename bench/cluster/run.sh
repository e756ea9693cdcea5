#!/usr/bin/env bash
# HSDP where it matters (issue 12): 2 pretend nodes x 2 ranks on this machine
# (scripts/cluster), FSDP over 4 vs HSDP 2x2 vs (TP 2 inside a node) x FSDP 2
# across, at each inter-node rate. Per run, one JSON line: step time
# (median of the timed steps), inter-node bytes per step as tessel counted
# them and as `tessel plan --predict` predicted them, what the node links'
# own counters saw over the whole run against tessel's count for the run,
# peak RSS against the predicted, and the predicted step time (with the
# link's CPU per byte measured here by scripts/cluster/link_cpu.sh).
#
# Usage (root): bench/cluster/run.sh [MODEL_CONFIG_JSON ...]
#   RATES="none 1gbit 300mbit" LAYOUTS="fsdp4 hsdp2x2 tp2_fsdp2" STEPS=4 SEQ=128 MB=1
#   (the environment; a subset reruns single rows)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${TESSEL_BIN:-$root/build/ci/bin/tessel}
[[ -x $bin ]] || { echo "build tessel first ($bin)" >&2; exit 2; }
source "$root/scripts/env.sh" >/dev/null
configs=("$@")
[[ ${#configs[@]} -gt 0 ]] || configs=("$root/bench/configs/llama-31m/config.json")
rates=${RATES:-none 1gbit 300mbit}
layouts=${LAYOUTS:-fsdp4 hsdp2x2 tp2_fsdp2}
steps=${STEPS:-4}
seq=${SEQ:-128}
mb=${MB:-1}
out=$(mktemp -d /tmp/cluster_bench.XXXXXX)
trap 'bash "$root/scripts/cluster/down.sh" >/dev/null 2>&1 || true' EXIT

gbit_of() {  # tc rate -> Gbit/s for --predict (unthrottled: measured here)
  case $1 in none) echo "" ;; *gbit) echo "${1%gbit}" ;; *mbit) python3 -c "print(${1%mbit}/1000)" ;; esac
}

# What a byte across the pretend link costs the CPU (veth, bridge and TCP
# in this one kernel), measured once on an unthrottled link: the prediction's
# transport cost (its default, the TCP loopback, misses the bridge).
bash "$root/scripts/cluster/up.sh" 2 none >/dev/null
link_cpu=$(bash "$root/scripts/cluster/link_cpu.sh")
echo "link CPU per byte across nodes: $link_cpu ns" >&2

for cfg in "${configs[@]}"; do
  name=$(basename "$(dirname "$cfg")")
  model="$out/$name"
  "$bin" init-model --config "$cfg" "$model" --seed 7 >/dev/null
  for rate in $rates; do
    bash "$root/scripts/cluster/up.sh" 2 "$rate" >/dev/null
    for layout in $layouts; do
      case $layout in
        fsdp4) par=(policy.dtensor_cfg.dp_replicate_size=1 policy.dtensor_cfg.tensor_parallel_size=1) ;;
        hsdp2x2) par=(policy.dtensor_cfg.dp_replicate_size=2 policy.dtensor_cfg.tensor_parallel_size=1) ;;
        tp2_fsdp2) par=(policy.dtensor_cfg.dp_replicate_size=1 policy.dtensor_cfg.tensor_parallel_size=2) ;;
        *) echo "unknown layout $layout (fsdp4, hsdp2x2, tp2_fsdp2)" >&2; exit 2 ;;
      esac
      dp=4; [[ $layout == tp2_fsdp2 ]] && dp=2
      common=("$root/examples/configs/sft.yaml" "policy.model_name=$model" "policy.tokenizer.name=$model"
        policy.max_total_sequence_length=$seq "policy.train_global_batch_size=$((mb * dp))"
        "policy.train_micro_batch_size=$mb" policy.precision=float32 data.train.dataset_name=synthetic
        '~data.validation' sft.max_num_epochs=1 "sft.max_num_steps=$steps" sft.val_period=0
        sft.val_at_start=false sft.val_at_end=false checkpointing.enabled=false
        cluster.num_nodes=2 cluster.gpus_per_node=2 "${par[@]}")
      log="$out/$name.$rate.$layout"
      before=$(bash "$root/scripts/cluster/link_bytes.sh" | awk '{s += $2} END {printf "%.0f\n", s}')
      bash "$root/scripts/cluster/mpirun.sh" 2 --bind-to none -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1 \
        -x TESSEL_NUM_THREADS=1 -x LD_LIBRARY_PATH "$bin" train "${common[@]}" "logger.log_dir=$log" \
        --no-print-config >"$log.log" 2>&1 || { echo "run failed: $log.log" >&2; tail -20 "$log.log" >&2; exit 1; }
      after=$(bash "$root/scripts/cluster/link_bytes.sh" | awk '{s += $2} END {printf "%.0f\n", s}')
      g=$(gbit_of "$rate")
      "$bin" plan "${common[@]}" --predict --json --core-share 0.5 ${g:+--inter-node-gbit $g} \
        --inter-node-cpu-ns-per-byte "$link_cpu" >"$log.predict.json" 2>/dev/null
      python3 - "$log/metrics.jsonl" "$log.predict.json" "$((after - before))" "$name" "$rate" "$layout" "$link_cpu" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [r for r in rows if r.get("split") == "train"]
run = [r for r in rows if r.get("split") == "run"][-1]
pred = json.load(open(sys.argv[2]))["prediction"]
this = pred["this_layout"]
timed = train[1:] if len(train) > 1 else train
link = int(sys.argv[3])
counted_run = run["inter_node_bytes"]
peak = max(train[-1]["peak_rss_bytes"])
print(json.dumps({
    "bench": "cluster", "model": sys.argv[4], "inter_node_rate": sys.argv[5], "layout": sys.argv[6],
    "link_cpu_ns_per_byte": float(sys.argv[7]),
    "step_time_s": statistics.median(r["step_time_s"] for r in timed),
    "step_time_s_each": [round(r["step_time_s"], 3) for r in train],
    "inter_node_bytes_per_step_counted": timed[-1]["inter_node_bytes"],
    "inter_node_bytes_per_step_predicted": this["inter_node_bytes_per_step"],
    "inter_node_bytes_run_counted": counted_run,
    "link_bytes_run": link,
    "link_over_counted": round(link / counted_run, 4) if counted_run else None,
    "peak_rss_bytes_max": peak,
    "rss_bytes_predicted": this["memory_per_rank"]["rss_bytes"],
    "step_time_s_predicted_overlap": round(this["step_s_overlap"], 3),
    "step_time_s_predicted_no_overlap": round(this["step_s_no_overlap"], 3),
    "recommended_dp_replicate_size": pred["recommended_dp_replicate_size"],
    "loss_each": [round(r["loss"], 4) for r in train]}))
PY
    done
  done
done
echo "logs: $out" >&2
