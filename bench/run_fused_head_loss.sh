#!/usr/bin/env bash
# policy.fused_lm_head_loss against the unfused head, side by side (issue 40's
# memory item, measured on the CPU): a model whose step is dominated by its
# head, bench/configs/qwen2-wide-vocab-80m (Qwen2.5's 151,936-token
# vocabulary, hidden 256, 2 layers, untied: 78M of its 80M parameters are
# the embedding and lm_head), random fp32 weights from `tessel init-model`,
# one process, synthetic rows of SEQ tokens, micro batch MB, STEPS steps.
# Runs alternate off / on PAIRS times (the machine's load moves both alike).
# One JSON line per run: peak RSS (VmHWM, which tessel reads from
# /proc/self/status into metrics.jsonl), the mean step time of steps 2..,
# and every step's loss (the two must agree).
# RECIPE=dpo: DPO instead (the policy's and the reference's log-probs from
# the fused head) on MB preference pairs per step of generated text, each
# row a 600-byte prompt and a 1200-byte response (byte-level tokens).
# RECIPE=grpo: GRPO instead (the previous, reference and training log-probs
# from the fused head at the sampling temperature 0.7): one demo prompt, MB
# rollouts per step decoded to SEQ tokens (a random model rarely stops),
# one micro batch of them; step_time_s then includes the decoding. A random
# model earns no reward (loss 0): the JSON adds the log-probs' agreement
# with the sampler's (token_mult_prob_error) and approx_entropy per step.
# Usage: bench/run_fused_head_loss.sh [build-dir]   env: SEQ=2048 MB=1 STEPS=3 PAIRS=2 THREADS=2 RECIPE=sft (or dpo, grpo)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$root/build/ci}
bin=$build/bin/tessel
[[ -x $bin ]] || { echo "no $bin: build the tessel_bin target" >&2; exit 2; }
seq=${SEQ:-2048} mb=${MB:-1} steps=${STEPS:-3} pairs=${PAIRS:-2} threads=${THREADS:-2}
work=$(mktemp -d /tmp/fused_head_loss.XXXXXX)  # the runs' logs stay there (printed at the end)
model=$work/model
trap 'rm -rf "$model"' EXIT  # 320 MB of random weights, remade by every run of this script
"$bin" init-model --config "$root/bench/configs/qwen2-wide-vocab-80m/config.json" "$model" --seed 5 >/dev/null
recipe=${RECIPE:-sft}
if [[ $recipe == dpo ]]; then
  python3 - "$work/pairs.jsonl" <<'PY'
import json, random, sys
random.seed(3)
words = "alpha beta gamma delta epsilon zeta theta kappa lambda sigma omega river stone cloud ember".split()
def text(n):
    out = []
    while len(" ".join(out)) < n:
        out.append(random.choice(words))
    return " ".join(out)[:n]
with open(sys.argv[1], "w") as f:
    for _ in range(16):
        f.write(json.dumps({"prompt": text(600), "chosen": text(1200), "rejected": text(1200)}) + "\n")
PY
fi
for ((i = 0; i < 2 * pairs; i++)); do
  fused=$([[ $((i % 2)) == 1 ]] && echo true || echo false)
  log=$work/run$i.$fused
  common=("policy.model_name=$model" "policy.tokenizer.name=$model" "policy.max_total_sequence_length=$seq"
          "policy.train_global_batch_size=$mb" "policy.train_micro_batch_size=$mb" policy.precision=float32
          '~data.validation' checkpointing.enabled=false "policy.fused_lm_head_loss=$fused"
          +logger.rank_metrics_period=1 "logger.log_dir=$log" --no-print-config)
  if [[ $recipe == grpo ]]; then
    run=(grpo "$root/examples/configs/grpo.yaml" data.train.dataset_name=demo_sft grpo.num_prompts_per_step=1
         "grpo.num_generations_per_prompt=$mb" "grpo.max_num_steps=$steps" grpo.val_period=0 grpo.val_at_start=false
         grpo.val_at_end=false loss_fn.reference_policy_kl_penalty=0.01 policy.generation.temperature=0.7
         "policy.generation.max_new_tokens=$((seq - 32))" policy.logprob_batch_size=0 --nproc 1)
  elif [[ $recipe == dpo ]]; then
    run=(dpo "$root/examples/configs/dpo.yaml" "data.train.dataset_name=$work/pairs.jsonl" dpo.max_num_epochs=10
         "dpo.max_num_steps=$steps" dpo.val_period=0 dpo.val_at_start=false dpo.val_at_end=false --nproc 1)
  else
    run=(train "$root/examples/configs/sft.yaml" data.train.dataset_name=synthetic sft.max_num_epochs=1
         "sft.max_num_steps=$steps" sft.val_period=0 sft.val_at_start=false sft.val_at_end=false)
  fi
  TESSEL_NUM_THREADS=$threads "$bin" "${run[@]}" "${common[@]}" >"$log.log" 2>&1 ||
    { echo "run failed: $log.log" >&2; tail -20 "$log.log" >&2; exit 1; }
  python3 - "$log/metrics.jsonl" "$fused" "$seq" "$mb" "$recipe" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [r for r in rows if r.get("split") == "train"]
timed = train[1:] if len(train) > 1 else train
print(json.dumps({
    "bench": "fused_head_loss", "recipe": sys.argv[5], "model": "qwen2-wide-vocab-80m", "seq": int(sys.argv[3]),
    "micro_batch": int(sys.argv[4]),
    "fused_lm_head_loss": sys.argv[2] == "true",
    "peak_rss_mib": round(max(r.get("peak_rss_bytes_max", 0) for r in train) / 2**20, 1),
    "step_time_s": round(statistics.mean(r["step_time_s"] for r in timed), 3),
    "loss_each": [round(r["loss"], 6) for r in train],
    # GRPO's log-probs checked against the sampler's own (1 = equal) and
    # their mean entropy estimate: the two runs must agree.
    **({k + "_each": [round(r[k], 6) for r in train] for k in ("token_mult_prob_error", "approx_entropy")}
       if sys.argv[5] == "grpo" else {})}))
PY
done
echo "logs: $work" >&2
