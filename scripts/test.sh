#!/usr/bin/env bash
# The README's test command: installs, builds and runs every test, then a
# short run of every fuzz target (fuzz/run.sh, TESSEL_FUZZ_SECONDS each,
# default 5; 0 skips it): a parser that crashes on its seeds or on what
# libFuzzer derives from them in seconds fails the run.
# Usage: scripts/test.sh [ctest args...]     (preset: $TESSEL_PRESET or "default")
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
preset=${TESSEL_PRESET:-default}
bash scripts/build.sh "$preset"
source scripts/env.sh
# Two test programs at a time: multi-rank tests oversubscribe the cores anyway.
ctest --preset "$preset" -j2 "$@"
# The CUDA build compiles and links too (scripts/cuda.sh: tessel and the
# GPU test program against PyPI's CUDA libtorch; nothing runs it here, where
# there is no GPU). TESSEL_CUDA_BUILD=0 skips it; without a CUDA toolkit it is
# skipped with a line saying so, unless TESSEL_CUDA_BUILD=1 demands it.
cuda_build=${TESSEL_CUDA_BUILD:-auto}
if [[ $cuda_build != 0 ]]; then
  if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then
    bash scripts/cuda.sh
  elif [[ $cuda_build == 1 ]]; then
    echo "TESSEL_CUDA_BUILD=1 but this machine has no CUDA toolkit (nvcc)" >&2
    exit 2
  else
    echo "CUDA build skipped: no CUDA toolkit (nvcc) on this machine"
  fi
fi
fuzz_seconds=${TESSEL_FUZZ_SECONDS:-5}
if [[ $fuzz_seconds != 0 ]]; then
  echo "fuzz targets, ${fuzz_seconds}s each (fuzz/run.sh; TESSEL_FUZZ_SECONDS=0 skips):"
  bash fuzz/run.sh "$fuzz_seconds"
fi
