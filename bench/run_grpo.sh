#!/usr/bin/env bash
# One GRPO step's time split and generation speed (issue 42): `tessel grpo`
# itself on bench/configs/llama-31m (Llama, hidden 512, 8 layers, 8/4 heads,
# vocab 8192: 31M parameters; random fp32 weights from `tessel init-model`,
# written once), on one process and at FSDP 2 (2 processes), one mpirun launch
# each, interleaved over rounds (this machine's speed drifts between runs).
# Each step: 4 prompts of the demo tasks x 4 rollouts of up to 32 new tokens
# (a random model seldom samples eos among 8192 ids, so nearly all run to 32),
# the reference's log-probs (KL 0.01), one optimizer step.
# The split comes from the run's own metrics.jsonl (policy/grpo_recipe.h):
#   refit_s      the decoding copy made from the shards
#   generation_s decoding (prefill + one forward per token), the slowest rank
#   logprobs_s   previous and reference log-probs
#   train_s      step_time_s - rollout_s - logprobs_s (the clipped loss,
#                backward, clipping, AdamW)
# and generation_tokens_per_s (generated tokens of all ranks / generation_s).
# Prints each run's JSON line and a summary line (medians over steps 2..,
# step 1 warming up, then over rounds).
# Usage: bench/run_grpo.sh [build-dir] [steps] [rounds]   (defaults build/default 5 2)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build/default}
steps=${2:-5}
rounds=${3:-2}
tessel="$build/bin/tessel"
[[ -x $tessel ]] || { echo "no $tessel: build tessel_bin" >&2; exit 2; }
export TESSEL_SOURCE_DIR=$root OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
work=$(mktemp -d /tmp/grpo_bench.XXXXXX)
"$tessel" init-model --config "$root/bench/configs/llama-31m/config.json" "$work/model" >"$work/init.log" 2>&1
lines="$work/results.jsonl"
for ((round = 1; round <= rounds; ++round)); do
  for world in 1 2; do
    logs="$work/logs_w${world}_r$round"
    "$tessel" grpo "$root/examples/configs/grpo.yaml" --no-print-config --nproc "$world" \
      "policy.model_name=$work/model" grpo.num_prompts_per_step=4 grpo.num_generations_per_prompt=4 \
      "grpo.max_num_steps=$steps" grpo.val_period=0 checkpointing.enabled=false data.validation=null \
      policy.train_micro_batch_size=2 policy.logprob_batch_size=2 policy.max_total_sequence_length=64 \
      policy.generation.max_new_tokens=32 loss_fn.reference_policy_kl_penalty=0.01 \
      "logger.log_dir=$logs" >"$work/w${world}_r$round.log" 2>&1
    python3 - "$logs/metrics.jsonl" "$world" "$round" <<'PY' | tee -a "$lines"
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
steps = [r for r in rows if r.get("split") == "train"][1:]  # step 1 warms up
med = lambda f: statistics.median(f(r) for r in steps)
print(json.dumps({"bench": "grpo", "world": int(sys.argv[2]), "round": int(sys.argv[3]), "steps": len(steps),
                  "step_s": med(lambda r: r["step_time_s"]), "refit_s": med(lambda r: r["refit_s"]),
                  "generation_s": med(lambda r: r["generation_s"]), "logprobs_s": med(lambda r: r["logprobs_s"]),
                  "train_s": med(lambda r: r["step_time_s"] - r["rollout_s"] - r["logprobs_s"]),
                  "generation_tokens": med(lambda r: r["generation_tokens"]),
                  "generation_tokens_per_s": med(lambda r: r["generation_tokens_per_s"]),
                  "decoding_weight_mib": steps[-1]["decoding_weight_mib"], "kv_cache_mib": steps[-1]["kv_cache_mib"],
                  "peak_rss_bytes_max": steps[-1].get("peak_rss_bytes_max")}))
PY
  done
done
python3 - "$lines" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
out = {"bench": "grpo", "kind": "summary", "per_world": {}}
for world in sorted({r["world"] for r in rows}):
    mine = [r for r in rows if r["world"] == world]
    out["per_world"][world] = {k: round(statistics.median(r[k] for r in mine), 4)
                               for k in ("step_s", "refit_s", "generation_s", "logprobs_s", "train_s",
                                         "generation_tokens_per_s")}
    out["per_world"][world]["generation_tokens_per_s_each_round"] = [round(r["generation_tokens_per_s"], 1) for r in mine]
print(json.dumps(out))
PY
echo "results: $lines" >&2
