#!/usr/bin/env bash
# Runs bench_fsdp (bench/fsdp.cpp) in its four layouts — world 1 (no FSDP),
# FSDP over 2 and 4 ranks, HSDP 2x2 (shard groups of 2 at world 4) — and prints
# their JSON lines. Usage: bench/run_fsdp.sh [build-dir] [extra bench_fsdp args]
set -euo pipefail
build=${1:-build/default}
shift || true
bin="$build/bin/bench_fsdp"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
mpi=(mpirun --oversubscribe --bind-to none)
"${mpi[@]}" -np 1 "$bin" "$@"
"${mpi[@]}" -np 2 "$bin" "$@"
"${mpi[@]}" -np 4 "$bin" "$@"
"${mpi[@]}" -np 4 "$bin" --hsdp 2 "$@"
