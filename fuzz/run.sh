#!/usr/bin/env bash
# Builds the fuzz targets (preset fuzz: clang, libFuzzer, AddressSanitizer)
# and runs each for SECONDS (default 10), one at a time, on a corpus seeded
# from the tests' files and kept in build/fuzz/corpus/<target> between runs.
# Prints one line per target: executions, corpus size, and findings; inputs
# that crash are kept in build/fuzz/artifacts/<target>/. Exit 1 on a finding.
# Usage: fuzz/run.sh [SECONDS] [TARGET...]   (targets: names without fuzz_)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
seconds=${1:-10}
shift || true
source scripts/env.sh
# The build's own output is kept out of the way, and shown when it fails.
build_log=$(mktemp)
if ! { cmake --preset fuzz && cmake --build --preset fuzz -- -j"$(nproc)"; } >"$build_log" 2>&1; then
  echo "fuzz build failed; its last lines:" >&2
  grep -v '^\[[0-9]*/[0-9]*\] ' "$build_log" | tail -40 >&2
  rm -f "$build_log"
  exit 1
fi
rm -f "$build_log"
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
  targets=(safetensors_header model_config yaml_config jsonl_dataset tokenizer_json plan_yaml python_plan
    checkpoint_metadata)
fi
out=build/fuzz
seeds=$(mktemp -d)
trap 'rm -rf "$seeds"' EXIT
bash fuzz/seed_corpora.sh "$seeds"
# libtorch's own allocations at exit are not the parsers' leaks.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
failed=0
for t in "${targets[@]}"; do
  corpus=$out/corpus/$t
  artifacts=$out/artifacts/$t
  mkdir -p "$corpus" "$artifacts"
  log=$out/fuzz_$t.log
  set +e
  "$out/fuzz/fuzz_$t" "$corpus" "$seeds/$t" -max_total_time="$seconds" -max_len=65536 \
    -timeout=10 -rss_limit_mb=4096 -artifact_prefix="$artifacts/" -print_final_stats=1 >"$log" 2>&1
  rc=$?
  set -e
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo "?")
  finds=$(ls "$artifacts" | wc -l)
  printf '%-20s %ss  %10s executions  corpus %5s  findings %s%s\n' "$t" "$seconds" "$execs" \
    "$(ls "$corpus" | wc -l)" "$finds" "$([[ $rc -ne 0 ]] && echo "  (exit $rc, see $log)")"
  [[ $rc -ne 0 ]] && failed=1
done
exit $failed
