#!/usr/bin/env bash
# Runs bench_comm (bench/comm.cpp) under mpirun at 2 and 4 ranks and prints its
# JSON lines. Usage: bench/run_comm.sh [build-dir] [rounds]
set -euo pipefail
build=${1:-build/default}
rounds=${2:-3}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
for np in 2 4; do
  mpirun --oversubscribe --bind-to none -np "$np" "$build/bin/bench_comm" "$rounds"
done
