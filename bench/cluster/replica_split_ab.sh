#!/usr/bin/env bash
# Issue 43: HSDP 2x2 with the optimizer split over replicas
# (policy.dtensor_cfg.shard_optimizer_over_replicas) against today's
# replicate all-reduce, runs alternated (off, on, off, on, ...) so that the
# machine's load moves both alike. One JSON line per run: the mean step
# time of steps 3..STEPS (the first two carry start-up and, with the split,
# the first forward's gathers), every step's time, the bytes each node sent
# per step (tessel's count), peak RSS per rank and the losses.
#
# Usage (root): bench/cluster/replica_split_ab.sh RATE [PAIRS]
#   RATE as scripts/cluster/up.sh takes it (300mbit, 1gbit, none); PAIRS
#   off/on pairs (default 3). The environment: STEPS=9 SEQ=128,
#   TESSEL_CLUSTER_NAME (namespaces' prefix), TESSEL_BIN, and
#   TESSEL_ENGINE_NICE, passed on to the ranks when set.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${TESSEL_BIN:-$root/build/ci/bin/tessel}
[[ -x $bin ]] || { echo "build tessel first ($bin)" >&2; exit 2; }
rate=${1:?usage: replica_split_ab.sh RATE [PAIRS]}
pairs=${2:-3}
steps=${STEPS:-9}
seq=${SEQ:-128}
out=$(mktemp -d /tmp/replica_split_ab.XXXXXX)
trap 'bash "$root/scripts/cluster/down.sh" >/dev/null 2>&1 || true' EXIT
model=$out/llama-31m
"$bin" init-model --config "$root/bench/configs/llama-31m/config.json" "$model" --seed 7 >/dev/null
bash "$root/scripts/cluster/up.sh" 2 "$rate" >/dev/null
for ((i = 0; i < 2 * pairs; i++)); do
  split=$([[ $((i % 2)) == 1 ]] && echo true || echo false)
  log=$out/run$i.$split
  bash "$root/scripts/cluster/mpirun.sh" 2 --bind-to none -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1 \
    -x TESSEL_NUM_THREADS=1 ${TESSEL_ENGINE_NICE:+-x TESSEL_ENGINE_NICE} -x LD_LIBRARY_PATH "$bin" train "$root/examples/configs/sft.yaml" \
    "policy.model_name=$model" "policy.tokenizer.name=$model" policy.max_total_sequence_length=$seq \
    policy.train_global_batch_size=4 policy.train_micro_batch_size=1 policy.precision=float32 \
    data.train.dataset_name=synthetic '~data.validation' sft.max_num_epochs=1 "sft.max_num_steps=$steps" \
    sft.val_period=0 sft.val_at_start=false sft.val_at_end=false checkpointing.enabled=false \
    cluster.num_nodes=2 cluster.gpus_per_node=2 policy.dtensor_cfg.dp_replicate_size=2 \
    "policy.dtensor_cfg.shard_optimizer_over_replicas=$split" +logger.rank_metrics_period=1 \
    "logger.log_dir=$log" --no-print-config >"$log.log" 2>&1 || { echo "run failed: $log.log" >&2; tail -20 "$log.log" >&2; exit 1; }
  python3 - "$log/metrics.jsonl" "$rate" "$split" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [r for r in rows if r.get("split") == "train"]
timed = train[2:] if len(train) > 2 else train
print(json.dumps({
    "bench": "replica_split", "rate": sys.argv[2], "shard_optimizer_over_replicas": sys.argv[3] == "true",
    "step_time_s": round(statistics.mean(r["step_time_s"] for r in timed), 3),
    "step_time_s_each": [round(r["step_time_s"], 3) for r in train],
    "inter_node_bytes_per_step": timed[-1].get("inter_node_bytes"),
    "peak_rss_bytes": train[-1]["peak_rss_bytes"],
    "loss_each": [round(r["loss"], 5) for r in train]}))
PY
done
echo "logs: $out" >&2
