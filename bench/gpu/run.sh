#!/usr/bin/env bash
# tessel against PyTorch FSDP2 on one GPU, side by side in one run (issue 40;
# docs/bench/gpu.md): Llama-3.2-1B (bench/configs/llama-3.2-1b, random
# weights written once by `tessel init-model --config`), bf16 compute with
# fp32 master weights and reductions, world 1, the same sequence length and
# micro batch on both sides, synthetic tokens.
#
#   tessel            tessel train on the GPU (TESSEL_DEVICE=cuda)
#   tessel_fused_head the same with policy.fused_lm_head_loss=true (no
#                     [tokens, vocab] logits; FUSED=0 leaves this row out)
#   tessel_lean       the fused head and activation checkpointing (issue 40's
#                     "report both": what lets a micro batch grow; LEAN=1 adds
#                     this row, best with MAX_BATCH=1)
#   tessel_kernels    tessel with its own CUDA kernels for RMSNorm, rotary and
#                     the SiLU product and libtorch's fused AdamW
#                     (TESSEL_DEVICE_KERNELS=fused, nn/device_kernels.h,
#                     optim/fused_adamw.h; KERNELS=0 leaves this row out)
#   pytorch_eager     bench/gpu/peer_fsdp2.py: fully_shard, MixedPrecisionPolicy(bf16, fp32), fused AdamW, SDPA
#   pytorch_compiled  the same with torch.compile
#
# Each prints its median step time (steps 3..N), tokens/s, MFU (6 x params +
# 12 x layers x hidden x seq FLOPs per token over 989 TFLOP/s, the H100/H200
# dense bf16 peak) and peak device memory (the allocator's high-water mark:
# tessel's metrics.jsonl peak_device_bytes, PyTorch's max_memory_allocated;
# tessel's rows also `tessel plan --predict`'s tensor_bytes for the run);
# with MAX_BATCH=1 also the largest micro batch that fits (doubling, up to
# MAX_BATCH_LIMIT, default 64). One JSON
# object per line, then one summary line with the ratios the issue asks for.
# Usage: bench/gpu/run.sh BUILD_DIR [seq] [micro_batch] [steps]
#   (BUILD_DIR: a CUDA build, e.g. build/device from scripts/device/gpu_check.sh)
# Dry run on a CPU: CONFIG=bench/configs/llama-31m/config.json DEVICE=cpu
# bench/gpu/run.sh build/ci 64 2 4 (both sides and the summary; the peer
# runs on gloo and needs a python3 with torch and transformers, as the GPU
# machine has: PEERS=0 leaves it out).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:?usage: bench/gpu/run.sh BUILD_DIR [seq] [micro_batch] [steps]}
seq=${2:-2048}
batch=${3:-4}
steps=${4:-8}
bin=$build/bin/tessel
[[ -x $bin ]] || { echo "no $bin: build the CUDA build first" >&2; exit 2; }
out=${OUT:-$(mktemp -d /tmp/gpu_bench.XXXXXX)}
config=${CONFIG:-$root/bench/configs/llama-3.2-1b/config.json}
model=${MODEL_DIR:-$out/model}  # MODEL_DIR: elsewhere, when $out must stay small (the device check's)
[[ -f $model/model.safetensors ]] || "$bin" init-model --config "$config" "$model" --seed 7 >/dev/null

tessel_run() {  # micro_batch log_dir steps [fused] [kernels] [checkpointing] -> exit status
  local b=$1 log_dir=$2 n=$3 fused=${4:-false} kernels=${5:-aten} checkpointing=${6:-false}
  TESSEL_DEVICE=${DEVICE:-cuda} TESSEL_DEVICE_KERNELS=$kernels "$bin" train "$root/examples/configs/sft.yaml" "policy.model_name=$model" \
    "policy.max_total_sequence_length=$seq" "data.max_input_seq_length=$seq" \
    "policy.train_global_batch_size=$b" "policy.train_micro_batch_size=$b" policy.precision=bfloat16 \
    policy.max_grad_norm=1.0 data.train.dataset_name=synthetic '~data.validation' sft.max_num_epochs=1 \
    "sft.max_num_steps=$n" sft.val_period=0 sft.val_at_start=false sft.val_at_end=false checkpointing.enabled=false \
    "policy.fused_lm_head_loss=$fused" "policy.dtensor_cfg.activation_checkpointing=$checkpointing" \
    "logger.log_dir=$log_dir" +logger.rank_metrics_period=1 --nproc 1 --no-print-config >"$log_dir.log" 2>&1
}

# `tessel plan --predict`'s tensor peak for the same run (its memory_per_rank
# tensor_bytes, set against the device allocator's measured peak), or null.
predicted_tensor_bytes() {  # micro_batch fused checkpointing
  "$bin" plan "$root/examples/configs/sft.yaml" "policy.model_name=$model" "policy.max_total_sequence_length=$seq" \
    "policy.train_global_batch_size=$1" "policy.train_micro_batch_size=$1" policy.precision=bfloat16 \
    "policy.fused_lm_head_loss=$2" "policy.dtensor_cfg.activation_checkpointing=$3" --world 1 --predict --json --gflops 1000 2>/dev/null |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["prediction"]["this_layout"]["memory_per_rank"]["tensor_bytes"])' ||
    echo null
}

summarize_tessel() {  # log_dir micro_batch side predicted_tensor_bytes
  python3 - "$1" "$2" "$seq" "$config" "$3" "${4:-null}" <<'PY'
import json, statistics, sys
log_dir, batch, seq, config, side = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), json.load(open(sys.argv[4])), sys.argv[5]
predicted = json.loads(sys.argv[6])
steps = [r for r in map(json.loads, open(f"{log_dir}/metrics.jsonl")) if "step_time_s" in r]
setup = [r for r in map(json.loads, open(f"{log_dir}/metrics.jsonl")) if r.get("split") == "setup"]
measured = steps[2:] if len(steps) > 2 else steps
step = statistics.median(r["step_time_s"] for r in measured)
h, L, V, I = config["hidden_size"], config["num_hidden_layers"], config["vocab_size"], config["intermediate_size"]
kv = config["num_key_value_heads"] * config.get("head_dim", h // config["num_attention_heads"])
params = V * h + L * (2 * h * h + 2 * h * kv + 3 * h * I + 2 * h) + h + (0 if config.get("tie_word_embeddings") else V * h)
tps = batch * seq / step
print(json.dumps({"side": side, "params": params, "seq": seq, "micro_batch": batch, "steps": len(steps),
                  "step_time_s": step, "step_times_s": [r["step_time_s"] for r in steps], "tokens_per_s": tps,
                  "mfu": tps * (6 * params + 12 * L * h * seq) / 989e12,
                  "peak_device_bytes": max(r.get("peak_device_bytes_max", 0) for r in steps),
                  "predicted_tensor_bytes": predicted,
                  "comm_wait_s": statistics.median(r["comm_wait_s"] for r in measured),
                  "last_loss": steps[-1]["loss"]}))
PY
}

results=()
sides=(tessel)
[[ ${FUSED:-1} == 1 ]] && sides+=(tessel_fused_head)
[[ ${LEAN:-0} == 1 ]] && sides+=(tessel_lean)
# The kernels are CUDA kernels: a run on the CPU has nothing to switch.
[[ ${KERNELS:-1} == 1 && ${DEVICE:-cuda} != cpu ]] && sides+=(tessel_kernels)
for side in "${sides[@]}"; do
  fused=$([[ $side == tessel_fused_head || $side == tessel_lean ]] && echo true || echo false)
  kernels=$([[ $side == tessel_kernels ]] && echo fused || echo aten)
  checkpointing=$([[ $side == tessel_lean ]] && echo true || echo false)
  mkdir -p "$out/$side"
  tessel_run "$batch" "$out/$side/b$batch" "$steps" "$fused" "$kernels" "$checkpointing"
  line=$(summarize_tessel "$out/$side/b$batch" "$batch" "$side" \
    "$(predicted_tensor_bytes "$batch" "$fused" "$checkpointing")")
  if [[ ${MAX_BATCH:-0} == 1 ]]; then
    b=$batch
    while ((b * 2 <= ${MAX_BATCH_LIMIT:-64})) && tessel_run $((b * 2)) "$out/$side/b$((b * 2))" 2 "$fused" "$kernels" \
      "$checkpointing"; do
      b=$((b * 2))
    done
    line=$(python3 -c "import json,sys; d=json.loads(sys.argv[1]); d['largest_micro_batch']=int(sys.argv[2]); print(json.dumps(d))" "$line" "$b")
  fi
  results+=("$line")
  echo "$line"
done
peers=(eager compiled)
[[ ${PEERS:-1} == 0 ]] && peers=()
for mode in "${peers[@]}"; do
  flags=(--config "$config" --seq "$seq" --batch "$batch" --steps "$steps" --device "${DEVICE:-cuda}")
  [[ $mode == compiled ]] && flags+=(--compile)
  [[ ${MAX_BATCH:-0} == 1 ]] && flags+=(--max-batch --max-batch-limit "${MAX_BATCH_LIMIT:-64}")
  line=$(python3 "$root/bench/gpu/peer_fsdp2.py" "${flags[@]}" 2>"$out/pytorch_$mode.log" | tail -n 1)
  results+=("$line")
  echo "$line"
done
python3 - "${results[@]}" <<'PY'
import json, sys
r = {d["side"]: d for d in map(json.loads, sys.argv[1:])}
t, e, c = r["tessel"], r.get("pytorch_fsdp2_eager"), r.get("pytorch_fsdp2_compiled")
summary = {"date": __import__("datetime").date.today().isoformat(), "gpu": (e or c or {}).get("gpu"),
           "seq": t["seq"], "micro_batch": t["micro_batch"], "tessel_mfu": t["mfu"]}
for mine, prefix in ((t, ""), (r.get("tessel_fused_head"), "fused_head_"), (r.get("tessel_lean"), "lean_"),
                     (r.get("tessel_kernels"), "kernels_")):
    if not mine:
        continue
    if prefix:
        summary[f"{prefix}mfu"] = mine["mfu"]
        summary[f"{prefix}step_time_vs_tessel"] = mine["step_time_s"] / t["step_time_s"]
    for name, peer in (("eager", e), ("compiled", c)):
        if peer:
            summary[f"{prefix}tokens_per_s_vs_{name}"] = mine["tokens_per_s"] / peer["tokens_per_s"]
            if mine["peak_device_bytes"] and peer["peak_device_bytes"]:  # none on a CPU dry run
                summary[f"{prefix}peak_memory_vs_{name}"] = mine["peak_device_bytes"] / peer["peak_device_bytes"]
            if "largest_micro_batch" in mine and "largest_micro_batch" in peer:
                summary[f"{prefix}largest_batch_vs_{name}"] = mine["largest_micro_batch"] / peer["largest_micro_batch"]
print(json.dumps({"summary": summary}))
PY
