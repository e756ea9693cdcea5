#!/usr/bin/env bash
# Runs bench_expert_parallel (bench/expert_parallel.cpp) on mixtral-115m at
# expert_parallel_size 1, 2 and 4 over 4 ranks, interleaved over rounds (this
# machine's speed drifts between runs), one mpirun launch per case; then
# `tessel plan --json` of each layout for its closed-form expert bytes per
# rank and all-to-all bytes per step (uniform routing). Prints every case's
# JSON line, the plan's figures, and one summary line (medians over rounds).
# Usage: bench/run_expert_parallel.sh [build-dir] [steps] [rounds] [ep...]
#   (defaults build/default 6 2, ep 1 2 4)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build/default}
steps=${2:-6}
rounds=${3:-2}
shift 3 || shift $# || true
eps=("$@")
[[ ${#eps[@]} -gt 0 ]] || eps=(1 2 4)
bin="$build/bin/bench_expert_parallel"
tessel="$build/bin/tessel"
for b in "$bin" "$tessel"; do [[ -x $b ]] || { echo "no $b: build bench_expert_parallel and tessel_bin" >&2; exit 2; }; done
export TESSEL_SOURCE_DIR=$root
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpi=(mpirun --oversubscribe --bind-to none -np 4 -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x TESSEL_SOURCE_DIR)
work=$(mktemp -d /tmp/expert_parallel.XXXXXX)  # the model's weights (written once) and the results
lines="$work/results.jsonl"
for ((round = 1; round <= rounds; ++round)); do
  for ep in "${eps[@]}"; do
    "${mpi[@]}" "$bin" --weights-dir "$work/weights" --ep "$ep" --steps "$steps" 2>"$work/ep$ep.round$round.log" |
      tee -a "$lines"
  done
done
for ep in "${eps[@]}"; do
  "$tessel" plan "$root/examples/configs/sft.yaml" "policy.model_name=$work/weights" policy.precision=float32 \
    policy.max_total_sequence_length=256 policy.train_global_batch_size=4 policy.train_micro_batch_size=1 \
    "policy.dtensor_cfg.expert_parallel_size=$ep" --world 4 --json |
    python3 -c 'import json,sys; d=json.load(sys.stdin); e=d["experts"]; print(json.dumps({"bench":"expert_parallel","kind":"plan","ep":e["ep"],"expert_bytes_per_rank":e["expert_bytes_per_rank"],"all_to_all_bytes_per_step":e["all_to_all"]["bytes_all_ranks"],"param_bytes_per_rank":[r["param_bytes"] for r in d["ranks"]]}))' |
    tee -a "$lines"
done
python3 - "$lines" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
runs = [r for r in rows if r.get("kind") != "plan"]
plans = {r["ep"]: r for r in rows if r.get("kind") == "plan"}
out = {"bench": "expert_parallel", "kind": "summary", "per_ep": {}}
for ep in sorted({r["ep"] for r in runs}):
    mine = [r for r in runs if r["ep"] == ep]
    a2a = mine[-1]["all_to_all"]
    steps = mine[-1]["steps"]
    out["per_ep"][ep] = {
        "tokens_per_s_median_of_rounds": statistics.median(r["tokens_per_s_median"] for r in mine),
        "tokens_per_s_each_round": [round(r["tokens_per_s_median"], 1) for r in mine],
        "expert_bytes_per_rank": max(mine[-1]["expert_bytes_per_rank"]),
        "expert_bytes_per_rank_plan": plans.get(ep, {}).get("expert_bytes_per_rank"),
        "peak_rss_bytes_max_rank": max(max(r["peak_rss_bytes_per_rank"]) for r in mine),
        "all_to_all_counted_bytes_per_step": a2a["counted_bytes"] / steps,
        "all_to_all_closed_form_bytes_per_step": a2a["closed_form_bytes"] / steps,
        "all_to_all_uniform_estimate_bytes_per_step": a2a["uniform_estimate_bytes"] / steps,
        "all_to_all_plan_bytes_per_step": plans.get(ep, {}).get("all_to_all_bytes_per_step"),
        "sent_bytes_per_step_by_group": {g: round(b) for g, b in mine[-1]["sent_bytes_per_step_by_group"].items()},
    }
base = out["per_ep"].get(1, {}).get("tokens_per_s_median_of_rounds")
if base:
    for ep, v in out["per_ep"].items():
        v["speed_vs_ep1"] = round(v["tokens_per_s_median_of_rounds"] / base, 3)
print(json.dumps(out))
PY
echo "results: $lines" >&2
