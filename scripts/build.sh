#!/usr/bin/env bash
# Installs what is needed (scripts/setup.sh) and builds tessel with CMake presets.
# Usage: scripts/build.sh [preset [targets...]]   (preset default: $TESSEL_PRESET
# or "default"; no targets: everything, tests and benchmarks included)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
bash scripts/setup.sh
source scripts/env.sh
preset=${1:-${TESSEL_PRESET:-default}}
shift || true
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --preset "$preset" >/dev/null
jobs=$(nproc)
cmake --build --preset "$preset" "${targets[@]}" -- -j"$jobs"
