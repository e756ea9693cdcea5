#!/usr/bin/env bash
# Builds (and with `test`, tests) tessel against the libtorch 2.x inside
# PyPI's `torch` wheel instead of Debian's libtorch 1.13: preset `torch2`,
# build folder build/torch2. CI builds and tests the default (1.13) build;
# docs/libtorch2.md says what this one costs and gives.
# Usage: scripts/torch2.sh [build [targets...] | test [ctest args...]]
# The wheel goes into a virtual environment at $TESSEL_TORCH2_VENV (default
# build/torch2-venv), installed from PyPI if absent; version
# $TESSEL_TORCH2_VERSION (default 2.15.0). The wheel is a CUDA build (about
# 5 GB with its CUDA dependencies); tessel links only its CPU libraries.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv=${TESSEL_TORCH2_VENV:-$root/build/torch2-venv}
version=${TESSEL_TORCH2_VERSION:-2.15.0}
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import torch" 2>/dev/null; then
  echo "tessel torch2: installing torch==$version from PyPI into $venv (several GB)"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q "torch==$version"
fi
TESSEL_TORCH_PACKAGE=$("$venv/bin/python" -c "import os, torch; print(os.path.dirname(torch.__file__))")
export TESSEL_TORCH_PACKAGE
echo "tessel torch2: libtorch $("$venv/bin/python" -c "import torch; print(torch.__version__)") from $TESSEL_TORCH_PACKAGE"
mode=${1:-build}
shift || true
case $mode in
  build) exec bash scripts/build.sh torch2 "$@" ;;
  test) TESSEL_PRESET=torch2 exec bash scripts/test.sh "$@" ;;
  *) echo "usage: scripts/torch2.sh [build [targets...] | test [ctest args...]]" >&2; exit 2 ;;
esac
