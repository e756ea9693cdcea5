#!/usr/bin/env bash
# Where a training step's GPU time goes, tessel and PyTorch FSDP2 side by
# side (issue 40: "the profile that shows where the time goes"): the same
# model, batch and precision as bench/gpu/run.sh, each side's step 3 (after
# warm-up) under Nsight Compute with collection only inside that step
# (`ncu --profile-from-start off`: tessel's TESSEL_PROFILE_STEP,
# train/profiled_step.h; peer_fsdp2.py --profile-step), one metric per kernel
# (gpu__time_duration.sum), the clocks left as they are (--clock-control
# none). ncu runs the kernels one at a time, so the sum is kernel time, not
# the step's wall time (there is no overlap to lose at world 1).
# Prints one JSON line per side: kernel time, launches, time by kind
# (matrix products, attention, tessel's own kernels, optimizer, NCCL, the
# rest) and the 25 kernels that took longest. Raw reports stay in $OUT, or
# in RAW_DIR when given (the device check keeps them out of what comes back:
# a report of a 1B model's step is tens of MiB); the model in MODEL_DIR
# when given (else $OUT/model).
#   tessel          TESSEL_DEVICE_KERNELS=aten (the default)
#   tessel_kernels  TESSEL_DEVICE_KERNELS=fused (KERNELS=0 leaves it out)
#   pytorch_eager   bench/gpu/peer_fsdp2.py (PEERS=0 leaves it out)
# Usage: bench/gpu/profile.sh BUILD_DIR [seq] [micro_batch]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=${1:?usage: bench/gpu/profile.sh BUILD_DIR [seq] [micro_batch]}
seq=${2:-2048}
batch=${3:-4}
bin=$build/bin/tessel
[[ -x $bin ]] || { echo "no $bin: build the CUDA build first" >&2; exit 2; }
command -v ncu >/dev/null || { echo "no ncu (Nsight Compute) on PATH" >&2; exit 2; }
out=${OUT:-$(mktemp -d /tmp/gpu_profile.XXXXXX)}
mkdir -p "$out"
config=${CONFIG:-$root/bench/configs/llama-3.2-1b/config.json}
raw=${RAW_DIR:-$out}
mkdir -p "$raw"
model=${MODEL_DIR:-$out/model}
[[ -f $model/model.safetensors ]] || "$bin" init-model --config "$config" "$model" --seed 7 >/dev/null
ncu_flags=(--profile-from-start off --clock-control none --target-processes all
           --metrics gpu__time_duration.sum --force-overwrite)

profile() {  # side command... -> $raw/side.ncu-rep, $raw/side.csv, $out/side.log
  local side=$1
  shift
  ncu "${ncu_flags[@]}" --export "$raw/$side" "$@" >"$out/$side.log" 2>&1
  ncu --import "$raw/$side.ncu-rep" --csv --page raw >"$raw/$side.csv"
}

sides=(tessel)
[[ ${KERNELS:-1} == 1 ]] && sides+=(tessel_kernels)
for side in "${sides[@]}"; do
  kernels=$([[ $side == tessel_kernels ]] && echo fused || echo aten)
  profile "$side" env TESSEL_DEVICE=cuda TESSEL_PROFILE_STEP=3 TESSEL_DEVICE_KERNELS="$kernels" "$bin" train \
    "$root/examples/configs/sft.yaml" "policy.model_name=$model" "policy.max_total_sequence_length=$seq" \
    "data.max_input_seq_length=$seq" "policy.train_global_batch_size=$batch" "policy.train_micro_batch_size=$batch" \
    policy.precision=bfloat16 policy.max_grad_norm=1.0 data.train.dataset_name=synthetic '~data.validation' \
    sft.max_num_epochs=1 sft.max_num_steps=3 sft.val_period=0 sft.val_at_start=false sft.val_at_end=false \
    checkpointing.enabled=false "logger.log_dir=$out/${side}_logs" --nproc 1 --no-print-config
done
if [[ ${PEERS:-1} == 1 ]]; then
  sides+=(pytorch_eager)
  profile pytorch_eager python3 "$root/bench/gpu/peer_fsdp2.py" --config "$config" --seq "$seq" --batch "$batch" \
    --steps 3 --profile-step 3
fi
for side in "${sides[@]}"; do
  python3 "$root/bench/gpu/kernel_breakdown.py" --side "$side" "$raw/$side.csv"
done
