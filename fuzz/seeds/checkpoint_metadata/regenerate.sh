#!/usr/bin/env bash
# Writes the seeds of fuzz_checkpoint_metadata: the metadata.json of real
# checkpoints tessel saves, one per layout (world 1; FSDP x TP; HSDP; FSDP x
# EP with a mixture-of-experts model; FSDP x CP), each after two steps of the
# demo data. Run from anywhere after building tessel (build/ci, or BUILD=dir);
# the files are committed, so this runs only when the format changes.
# Usage: fuzz/seeds/checkpoint_metadata/regenerate.sh
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)
here=$root/fuzz/seeds/checkpoint_metadata
tessel=${BUILD:-$root/build/ci}/bin/tessel
source "$root/scripts/env.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
save() {  # save NAME NPROC OVERRIDES...: two steps, then the step's metadata.json as NAME.json
  local name=$1 nproc=$2
  shift 2
  "$tessel" train "$root/examples/configs/sft.yaml" --nproc "$nproc" \
    sft.max_num_steps=2 sft.val_period=0 sft.val_at_start=false sft.val_at_end=false \
    policy.train_global_batch_size=4 policy.train_micro_batch_size=1 \
    policy.max_total_sequence_length=64 checkpointing.enabled=true checkpointing.save_period=2 \
    "checkpointing.checkpoint_dir=$work/$name" "logger.log_dir=$work/$name-logs" "$@" >/dev/null
  cp "$work/$name/step_2/metadata.json" "$here/$name.json"
}
save world1 1 policy.model_name=tiny-llama
save fsdp2_tp2 4 policy.model_name=tiny-llama policy.dtensor_cfg.tensor_parallel_size=2
save hsdp2x2 4 policy.model_name=tiny-qwen3 policy.dtensor_cfg.dp_replicate_size=2
save fsdp4_ep2_moe 4 policy.model_name=tiny-qwen3-moe policy.dtensor_cfg.expert_parallel_size=2
save fsdp2_cp2 4 policy.model_name=tiny-llama policy.dtensor_cfg.context_parallel_size=2
ls -l "$here"/*.json
