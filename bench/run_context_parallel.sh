#!/usr/bin/env bash
# Runs bench_context_parallel (bench/context_parallel.cpp) on llama-31m at one
# row length: the plain model on 1 rank (causal_attention over whole rows),
# the ring kernel on 1 rank (--ring-at-one: no transfers, the arithmetic and
# saved tensors of cp > 1), then cp 2 and cp 4. One mpirun launch at a time;
# prints the JSON lines of each, each case preceded by a {"loadavg": ...} line.
# Usage: bench/run_context_parallel.sh [build-dir] [extra args, e.g. --seq 4096]
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-build/default}
shift || true
bin="$build/bin/bench_context_parallel"
export TESSEL_SOURCE_DIR=$root
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpi=(mpirun --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS -x TESSEL_SOURCE_DIR)
load() { printf '{"bench":"context_parallel","kind":"load","before":"%s","loadavg":"%s"}\n' "$1" "$(cat /proc/loadavg)"; }
load "cp1"
"$bin" "$@"
load "cp1 ring"
"$bin" --ring-at-one "$@"
for cp in 2 4; do
  load "cp$cp"
  "${mpi[@]}" -np "$cp" "$bin" "$@"
done
load "end"
