#!/usr/bin/env bash
# Runs bench_tp (bench/tp.cpp) on llama-100m: the plain model on 1 rank (the
# baseline row), then tensor parallelism over 2 ranks with the optimized plan,
# the optimized plan with sequence parallelism, and the HF plan (vocab-parallel
# head). One mpirun launch at a time; prints the JSON lines of each (one per
# rank, one summary) preceded by a {"loadavg": ...} line taken just before.
# Usage: bench/run_tp.sh [build-dir] [extra bench_tp args, e.g. --steps 5]
# TP_PLANS="hf optimized_sp optimized none" changes the order (and the set).
set -euo pipefail
build=${1:-build/default}
shift || true
bin="$build/bin/bench_tp"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
mpi=(mpirun --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS -x OMP_NUM_THREADS)
# TP_RSS=1: glibc mmaps every block over 64 KiB and unmaps it when freed, so
# VmRSS / VmHWM track live memory and the rss_* fields mean something (the
# alloc_* fields are exact either way). It costs a page fault per page of
# every new tensor: step times are then NOT comparable (measured on
# llama-100m: +35-40 % CPU time per step).
if [[ ${TP_RSS:-0} == 1 ]]; then
  export MALLOC_MMAP_THRESHOLD_=65536
  mpi+=(-x MALLOC_MMAP_THRESHOLD_)
fi
load() { printf '{"bench":"tp","kind":"load","before":"%s","loadavg":"%s"}\n' "$1" "$(cat /proc/loadavg)"; }
for plan in ${TP_PLANS:-none optimized optimized_sp hf}; do
  load "$plan"
  np=2
  [[ $plan == none ]] && np=1
  "${mpi[@]}" -np "$np" "$bin" --plan "$plan" "$@"
done
load "end"
