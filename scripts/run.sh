#!/usr/bin/env bash
# The README's run command: installs, builds, and runs the main job.
# With no arguments: `tessel train` on its built-in default recipe (a small
# Llama trained on 4 local processes as HSDP 2x2 on the demo dataset).
# Any arguments are passed to `tessel` instead, e.g.
#   scripts/run.sh mesh --world 16 policy.dtensor_cfg.dp_replicate_size=2
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
# Only the program: the test command builds the tests and benchmarks.
bash scripts/build.sh default tessel_bin
source scripts/env.sh
if (($# == 0)); then set -- train; fi
exec build/default/bin/tessel "$@"
