#!/usr/bin/env bash
# tessel against PyTorch on the same box, in one run: the same Llama
# (bench/configs/llama-31m, "bench-medium": hidden 512, 8 layers, 8/4 heads,
# vocab 8192, 31.6M params), the same weights (written once by
# `tessel init-model --config`), seq 256, micro batch 2 per rank, fp32, one
# compute thread per rank, AdamW with gradient clipping, N steps each.
#
#   tessel_1        tessel train, 1 process
#   tessel_fsdp2    tessel train, FSDP over 2 processes (2 sequences per rank)
#   tessel_fsdp2_node_shared  the same with node-shared parameters
#                   (policy.dtensor_cfg.node_shared_params: no all-gathers)
#   torch_1         PyTorch, 1 process                 (peer_llama.py --mode single)
#   torch_ddp2      PyTorch DDP over gloo, 2 processes (peer_llama.py --mode ddp)
#   torch2_1, torch2_fsdp2  PyTorch 2.x, 1 process; fully_shard over gloo, 2
#                   processes, SUM reduction
#                   (only with PYTHON2X=/path/to/python whose torch is >= 2.8)
#   tessel2_1, tessel2_fsdp2  the two tessel runs with a build against libtorch
#                   2.x (only with TESSEL2_BIN=build/torch2/bin/tessel,
#                   scripts/torch2.sh)
#   base_1, base_fsdp2  the same two tessel runs with another tessel build
#                   (only with BASELINE_BIN=/path/to/tessel: before/after a change)
#
# The layouts run one after another, interleaved over `rounds` rounds (the
# machine is noisy: a drift hits both sides), step 1 of every run left out.
# PyTorch 1.13 is Debian's python3-torch (/usr/bin/python3). Prints ONE JSON
# object: per layout the median step time and tokens/s over all measured
# steps, every step, the first losses (tessel layouts also the median
# comm_wait_s: rank 0's time held up by collectives); and the ratios the
# issue asks for.
# Usage: bench/vs_pytorch/run.sh [build-dir] [steps] [rounds]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:-build/default}
steps=${2:-6}
rounds=${3:-2}
bin="$root/$build/bin/tessel"
[[ -x $bin ]] || { echo "no $bin: build the tessel_bin target" >&2; exit 2; }
py13=${PYTHON13:-/usr/bin/python3}
"$py13" -c "import torch" 2>/dev/null || { echo "no torch for $py13: apt-get install python3-torch" >&2; exit 2; }
source "$root/scripts/env.sh"
out=$(mktemp -d /tmp/vs_pytorch.XXXXXX)
model="$out/model"
"$bin" init-model --config "$root/bench/configs/llama-31m/config.json" "$model" --seed 7 >/dev/null
seq=256
mb=2

tessel_run() {  # name nproc round [binary [extra overrides...]]
  local name=$1 nproc=$2 log_dir="$out/$1.$3" exe=${4:-$bin} extra=("${@:5}")
  # One compute thread per rank on both sides, the BLAS pool included (tessel
  # sets it from TESSEL_NUM_THREADS; older builds need the variable).
  TESSEL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "$exe" train "$root/examples/configs/sft.yaml" \
    "policy.model_name=$model" "policy.tokenizer.name=$model" \
    policy.max_total_sequence_length=$seq \
    "policy.train_global_batch_size=$((mb * nproc))" "policy.train_micro_batch_size=$mb" \
    policy.precision=float32 policy.dtensor_cfg.dp_replicate_size=1 \
    data.train.dataset_name=synthetic '~data.validation' sft.max_num_epochs=1 \
    "sft.max_num_steps=$steps" sft.val_period=0 sft.val_at_start=false sft.val_at_end=false \
    checkpointing.enabled=false "logger.log_dir=$log_dir" "cluster.gpus_per_node=$nproc" "${extra[@]}" \
    --nproc "$nproc" --no-print-config >"$log_dir.log" 2>&1 ||
    { echo "tessel $name failed: $log_dir.log" >&2; tail -n 20 "$log_dir.log" >&2; exit 1; }
  python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [r for r in rows if r.get("split") == "train"]
print(json.dumps({"step_time_s_each": [r["step_time_s"] for r in train],
                  # rank 0 held up by collectives (absent from builds before comm_wait_s)
                  "comm_wait_s_each": [r.get("comm_wait_s") for r in train],
                  "loss_each": [r["loss"] for r in train], "tokens_per_step": train[0]["tokens"]}))
' "$log_dir/metrics.jsonl"
}

torch_run() {  # name python mode nproc
  local name=$1 py=$2 mode=$3 nproc=$4
  local cmd=("$py" "$root/bench/vs_pytorch/peer_llama.py" --model-dir "$model" --mode "$mode"
    --seq $seq --micro-batch $mb --steps "$steps")
  if [[ $nproc -gt 1 ]]; then
    cmd=(mpirun --oversubscribe --bind-to none -np "$nproc" -x OMP_NUM_THREADS=1 "${cmd[@]}")
  fi
  OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 "${cmd[@]}" 2>"$out/$name.err" | tail -n 1 ||
    { echo "torch $name failed: $out/$name.err" >&2; tail -n 20 "$out/$name.err" >&2; exit 1; }
}

layouts=(tessel_1 torch_1 tessel_fsdp2 torch_ddp2 tessel_fsdp2_node_shared)
[[ -n ${PYTHON2X:-} ]] && layouts+=(torch2_1 torch2_fsdp2)
[[ -n ${TESSEL2_BIN:-} ]] && layouts+=(tessel2_1 tessel2_fsdp2)
[[ -n ${BASELINE_BIN:-} ]] && layouts+=(base_1 base_fsdp2)
load_before=$(cat /proc/loadavg)
for r in $(seq 1 "$rounds"); do
  for l in "${layouts[@]}"; do
    case $l in
      tessel_1) res=$(tessel_run tessel_1 1 "$r") ;;
      tessel_fsdp2) res=$(tessel_run tessel_fsdp2 2 "$r") ;;
      tessel_fsdp2_node_shared)
        res=$(tessel_run tessel_fsdp2_node_shared 2 "$r" "$bin" policy.dtensor_cfg.node_shared_params=true) ;;
      torch_1) res=$(torch_run torch_1 "$py13" single 1) ;;
      torch_ddp2) res=$(torch_run torch_ddp2 "$py13" ddp 2) ;;
      torch2_1) res=$(torch_run torch2_1 "$PYTHON2X" single 1) ;;
      torch2_fsdp2) res=$(torch_run torch2_fsdp2 "$PYTHON2X" fsdp2 2) ;;
      tessel2_1) res=$(tessel_run tessel2_1 1 "$r" "$TESSEL2_BIN") ;;
      tessel2_fsdp2) res=$(tessel_run tessel2_fsdp2 2 "$r" "$TESSEL2_BIN") ;;
      base_1) res=$(tessel_run base_1 1 "$r" "$BASELINE_BIN") ;;
      base_fsdp2) res=$(tessel_run base_fsdp2 2 "$r" "$BASELINE_BIN") ;;
    esac
    echo "$l $res" >>"$out/results.txt"
  done
done
load_after=$(cat /proc/loadavg)
python3 - "$out" "$load_before" "$load_after" <<'PY'
import json, os, statistics, sys
out, lb, la = sys.argv[1:]
runs = {}
for line in open(os.path.join(out, "results.txt")):
    name, js = line.split(" ", 1)
    runs.setdefault(name, []).append(json.loads(js))
summary = {}
for name, rs in runs.items():
    steps = [t for r in rs for t in r["step_time_s_each"][1:]]  # step 1 of each run is warm-up
    tps = rs[0]["tokens_per_step"]
    med = statistics.median(steps)
    summary[name] = {"step_time_s_median": round(med, 4), "tokens_per_s": round(tps / med, 1),
                     "tokens_per_step": tps, "measured_steps": len(steps),
                     "step_time_s_each_run": [r["step_time_s_each"] for r in rs],
                     "first_losses": [r["loss_each"][:3] for r in rs],
                     "torch": rs[0].get("torch")}
    waits = [w for r in rs for w in r.get("comm_wait_s_each", [None])[1:]]
    if waits and None not in waits:  # tessel builds that report it
        summary[name]["comm_wait_s_median"] = round(statistics.median(waits), 4)
def ratio(a, b):
    return round(summary[a]["tokens_per_s"] / summary[b]["tokens_per_s"], 3) if a in summary and b in summary else None
print(json.dumps({
    "bench": "vs_pytorch", "model": "bench/configs/llama-31m", "seq": 256, "micro_batch_per_rank": 2,
    "precision": "float32", "threads_per_rank": 1, "host": os.uname().nodename, "cpus": os.cpu_count(),
    "loadavg_before": lb, "loadavg_after": la, "logs": out,
    "layouts": summary,
    "ratios": {
        "tessel_fsdp2_over_torch_ddp2_tokens_per_s": ratio("tessel_fsdp2", "torch_ddp2"),
        "tessel_fsdp2_over_torch2_fsdp2_tokens_per_s": ratio("tessel_fsdp2", "torch2_fsdp2"),
        "tessel_1_over_torch_1_tokens_per_s": ratio("tessel_1", "torch_1"),
        "tessel_fsdp2_step_over_tessel_1_step": round(summary["tessel_fsdp2"]["step_time_s_median"] / summary["tessel_1"]["step_time_s_median"], 3),
        "tessel_fsdp2_node_shared_step_over_tessel_1_step": round(summary["tessel_fsdp2_node_shared"]["step_time_s_median"] / summary["tessel_1"]["step_time_s_median"], 3),
        "tessel_fsdp2_node_shared_over_torch_ddp2_tokens_per_s": ratio("tessel_fsdp2_node_shared", "torch_ddp2"),
        "torch_ddp2_step_over_torch_1_step": round(summary["torch_ddp2"]["step_time_s_median"] / summary["torch_1"]["step_time_s_median"], 3),
        "tessel_1_over_torch2_1_tokens_per_s": ratio("tessel_1", "torch2_1"),
        "tessel2_1_over_torch2_1_tokens_per_s": ratio("tessel2_1", "torch2_1"),
        "tessel2_1_over_torch_1_tokens_per_s": ratio("tessel2_1", "torch_1"),
        "tessel2_fsdp2_over_torch_ddp2_tokens_per_s": ratio("tessel2_fsdp2", "torch_ddp2"),
        "tessel2_fsdp2_over_torch2_fsdp2_tokens_per_s": ratio("tessel2_fsdp2", "torch2_fsdp2"),
        "tessel2_fsdp2_step_over_tessel2_1_step": round(summary["tessel2_fsdp2"]["step_time_s_median"] / summary["tessel2_1"]["step_time_s_median"], 3) if "tessel2_1" in summary else None,
        "tessel_fsdp2_over_base_fsdp2_tokens_per_s": ratio("tessel_fsdp2", "base_fsdp2"),
        "base_fsdp2_step_over_base_1_step": round(summary["base_fsdp2"]["step_time_s_median"] / summary["base_1"]["step_time_s_median"], 3) if "base_1" in summary else None,
    },
}, indent=None))
PY
