#!/usr/bin/env bash
# Builds tessel's CUDA build (preset cuda, folder build/cuda) on any machine
# with the CUDA toolkit's headers and runtime (nvcc, CUDA 13), no GPU needed:
# libtorch comes from PyPI's torch wheel, installed without its dependencies
# (tessel compiles against the toolkit's CUDA and NCCL). CI runs this after
# the CPU tests (scripts/test.sh); docs/gpu.md says how a GPU runs it.
# Usage: scripts/cuda.sh [targets...]   (default: tessel_bin test_gpu)
# torch $TESSEL_CUDA_TORCH_VERSION (default 2.11.0: CUDA 13.0 and NCCL
# 2.28.9, as this toolkit and the PyTorch of the GPU machines the device
# check runs on) goes to $TESSEL_CUDA_TORCH_DIR (default
# ~/.cache/tessel/torch-<version>, outside the clone, so later clones and CI
# runs on the machine reuse it).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
version=${TESSEL_CUDA_TORCH_VERSION:-2.11.0}
dir=${TESSEL_CUDA_TORCH_DIR:-$HOME/.cache/tessel/torch-$version}
if ! command -v nvcc >/dev/null 2>&1 && [[ ! -x /usr/local/cuda/bin/nvcc ]]; then
  echo "tessel cuda: no CUDA toolkit (nvcc) on this machine; install CUDA 13 to build the CUDA build" >&2
  exit 2
fi
command -v nvcc >/dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH
if [[ ! -f $dir/torch/lib/libtorch_cuda.so ]]; then
  echo "tessel cuda: installing torch==$version (the wheel only, about 530 MB) into $dir"
  rm -rf "$dir.partial"
  python3 -m pip install -q --no-deps --no-compile --disable-pip-version-check --target "$dir.partial" "torch==$version"
  rm -rf "$dir"
  mv "$dir.partial" "$dir"
fi
export TESSEL_TORCH_PACKAGE=$dir/torch
targets=("$@")
((${#targets[@]})) || targets=(tessel_bin test_gpu)
echo "tessel cuda: libtorch $version (CUDA) from $TESSEL_TORCH_PACKAGE; building ${targets[*]}"
exec bash scripts/build.sh cuda "${targets[@]}"
