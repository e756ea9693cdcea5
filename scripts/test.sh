#!/usr/bin/env bash
# The README's test command: installs, builds and runs every test.
# Usage: scripts/test.sh [ctest args...]     (preset: $TESSEL_PRESET or "default")
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
preset=${TESSEL_PRESET:-default}
bash scripts/build.sh "$preset"
source scripts/env.sh
# Two test programs at a time: multi-rank tests oversubscribe the cores anyway.
ctest --preset "$preset" -j2 "$@"
