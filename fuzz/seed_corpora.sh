#!/usr/bin/env bash
# Fills <out>/<target>/ with the seed inputs of each fuzz target, taken from
# the files the tests and examples already use (fuzz/README.md).
# Usage: fuzz/seed_corpora.sh OUT_DIR
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
out=$1
seed() {  # seed TARGET FILES...
  local target=$1
  shift
  mkdir -p "$out/$target"
  for f in "$@"; do cp "$f" "$out/$target/$(echo "${f#"$root"/}" | tr / _)"; done
}
seed safetensors_header "$root"/tests/golden/*/model.safetensors
seed model_config "$root"/tests/golden/*/config.json "$root"/tests/models/hf_configs/*/config.json \
  "$root"/bench/configs/*/config.json
seed yaml_config "$root"/examples/configs/*.yaml "$root"/examples/configs/recipes/llm/*.yaml
# One seed with overrides after the NUL byte, in each of their forms.
printf 'a: {b: 1, c: [1, 2]}\nd: ${a.b}\n\0a.b=2\n+e.f=x\n~a.c\n++d=${mul:2,3}\n' \
  >"$out/yaml_config/with_overrides.yaml"
seed jsonl_dataset "$root"/examples/data/*.jsonl
printf '{"tokens": [1, 2, 3], "loss_mask": [0, 1, 1]}\n{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}]}\n' \
  >"$out/jsonl_dataset/other_formats.jsonl"
seed tokenizer_json "$root"/fuzz/seeds/tokenizer_json/*.json
seed plan_yaml "$root"/examples/custom_parallel/*.yaml
seed python_plan "$root"/examples/custom_parallel/*.py
# metadata.json of real checkpoints, one per layout (fuzz/seeds/checkpoint_metadata/regenerate.sh).
seed checkpoint_metadata "$root"/fuzz/seeds/checkpoint_metadata/*.json
