#!/usr/bin/env bash
# Installs every Debian package tessel needs to build, test and run.
# Safe to run again: packages already present are skipped without touching apt.
set -euo pipefail

packages=(
  build-essential cmake ninja-build ccache pkg-config
  libtorch-dev libopenblas0-pthread libjemalloc-dev
  libopenmpi-dev openmpi-bin
  libyaml-cpp-dev nlohmann-json3-dev libcli11-dev libfmt-dev libspdlog-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev  # the fuzz targets (fuzz/): libFuzzer and AddressSanitizer
  slurmctld slurmd slurm-client munge  # SLURM on the pretend cluster (scripts/cluster/slurm_up.sh, tests/cluster/slurm_test.sh)
)
# python3-torch only generates golden test data (tests/golden/); the project is C++.
if [[ "${TESSEL_WITH_PYTHON_GOLDEN:-0}" == 1 ]]; then packages+=(python3-torch); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "tessel setup: installing ${missing[*]}"
  sudo_cmd=()
  if [[ $(id -u) -ne 0 ]]; then sudo_cmd=(sudo); fi
  "${sudo_cmd[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "tessel setup: all packages present"
fi
