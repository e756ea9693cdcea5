#!/usr/bin/env bash
# Runs the device check (gpu_check.sh) here, on a machine without a GPU, as
# the GPU machine would run it: against the CUDA wheel scripts/cuda.sh
# installs, with the runtime libraries its libtorch_cuda loads installed
# beside it, and with this system's own copies of the carried Debian
# packages hidden (a private mount namespace puts /dev/null over each of
# their files), so a package missing from debs.txt fails here, not there.
# The GPU tests skip (no device) and `tessel train` runs on the CPU; the
# build, the launches and the summary run for real. Needs root (unshare).
# Usage: bash scripts/device/dry_run.sh        (OUT: where the logs go, default build/device-dry-run;
#        TESSEL_CHECK_BENCH=1 adds bench/gpu/run.sh, both sides, at a small shape)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
version=${TESSEL_CUDA_TORCH_VERSION:-2.11.0}
torch=${TESSEL_CUDA_TORCH_DIR:-$HOME/.cache/tessel/torch-$version}
extras=$HOME/.cache/tessel/cuda-runtime-extras
[[ -f $torch/torch/lib/libtorch_cuda.so ]] || { echo "no CUDA wheel at $torch: run scripts/cuda.sh first" >&2; exit 2; }
if [[ ! -f $extras/nvidia/cusparselt/lib/libcusparseLt.so.0 ]]; then
  # What libtorch_cuda needs to load beyond the CUDA toolkit here (the GPU
  # machine's PyTorch has them): cuSPARSELt, NVSHMEM and cuFile.
  python3 -m pip install -q --no-deps --no-compile --disable-pip-version-check --target "$extras" \
    nvidia-cusparselt-cu13==0.8.0 nvidia-nvshmem-cu13==3.4.5 "nvidia-cufile==1.15.1.6.*"
fi
[[ -d .device/debs ]] || bash scripts/device/prepare.sh
# With TESSEL_CHECK_BENCH=1 the benchmark runs too, both sides, on the CPU
# at a small shape (llama-31m, seq 64): PyTorch's side under the GPU
# machine's versions (torch 2.11 from the wheel above, transformers 5.17 as
# its image lists it, installed here once).
bench_python=
if [[ ${TESSEL_CHECK_BENCH:-0} == 1 ]]; then
  peer_site=$HOME/.cache/tessel/peer-site
  [[ -d $peer_site/transformers ]] || python3 -m pip install -q --disable-pip-version-check --target "$peer_site" \
    "transformers==${TESSEL_PEER_TRANSFORMERS_VERSION:-5.17.0}" numpy
  bench_python=$torch:$peer_site
  export CONFIG=${CONFIG:-$root/bench/configs/llama-31m/config.json} TESSEL_CHECK_BENCH_SHAPE=${TESSEL_CHECK_BENCH_SHAPE:-64 2 4}
  export TESSEL_CHECK_BENCH_LIMIT=${TESSEL_CHECK_BENCH_LIMIT:-1800}
  export TESSEL_CHECK_ATTENTION_SEQS=${TESSEL_CHECK_ATTENTION_SEQS:-256}
  export TESSEL_CHECK_ATTENTION_DOCUMENTS=${TESSEL_CHECK_ATTENTION_DOCUMENTS:-4}
  export TESSEL_CHECK_ATTENTION_WINDOW=${TESSEL_CHECK_ATTENTION_WINDOW:-32}
  export TESSEL_CHECK_ATTENTION_WINDOW_SEQS=${TESSEL_CHECK_ATTENTION_WINDOW_SEQS:-96 128}
fi
mapfile -t packages < <(grep -v -E '^\s*(#|$)' scripts/device/debs.txt)
hide=$(mktemp)
# Their regular files (links lead to them; folders stay, shared with others).
dpkg -L "${packages[@]}" 2>/dev/null | python3 -c '
import os, sys
for f in sorted(set(l.strip() for l in sys.stdin)):
    if f and os.path.isfile(f) and not os.path.islink(f):
        print(f)' >"$hide"
echo "dry run: hiding $(wc -l <"$hide") files of ${#packages[@]} packages"
# Outside .device: what the GPU machine is given (.device) must stay within a run's 64 MiB.
export OUT=${OUT:-$root/build/device-dry-run}
rm -rf "$OUT" /tmp/tessel-deps-dry /tmp/tessel-deps-carried "$root/.device/dry-run" "$root/build/device-carried"
mkdir -p "$OUT"
cuda_libs=/usr/local/cuda/lib64:$extras/nvidia/cusparselt/lib:$extras/nvidia/nvshmem/lib:$extras/nvidia/cu13/lib
# 1. The check as the GPU machine runs it when it must build (no carried build).
# 2. Its binaries staged as the carried build (.device/prebuilt, prebuilt.sh),
#    when every phase passed.
# 3. The check again from the carried build, with the folders its run path
#    names hidden (as on the GPU machine, where they do not exist): the
#    unpacked packages and this torch's lib/ (the torch is seen elsewhere).
unshare --mount --propagation private bash -c '
  set -e
  while read -r f; do mount --bind /dev/null "$f"; done <"$1"
  export LD_LIBRARY_PATH=$2 TESSEL_CHECK_DEPS=/tmp/tessel-deps-dry PATH=/usr/local/cuda/bin:$PATH
  [[ -z $4 ]] || export PYTHONPATH=$4
  export TESSEL_CHECK_BUILD_LIMIT=${TESSEL_CHECK_BUILD_LIMIT:-7200}  # two cores, not sixteen
  export TESSEL_CHECK_DEADLINE_S=${TESSEL_CHECK_DEADLINE_S:-0}  # and no device call to fit in
  export TESSEL_CHECK_DEVICE=cpu  # no GPU here: the trains check the launch on the CPU
  TESSEL_CHECK_TORCH=$3/torch TESSEL_CHECK_PREBUILT=off bash scripts/device/gpu_check.sh
  if ! python3 scripts/device/summary_ok.py "$OUT/gpu_check.json"; then
    echo "dry run: the check failed (above); no carried build staged" >&2
    exit 1
  fi
  # (the unpacked libraries found as the check found them: CMake links a test MPI program)
  deps_lib=/tmp/tessel-deps-dry/usr/lib/x86_64-linux-gnu
  LD_LIBRARY_PATH=$deps_lib:$deps_lib/openmpi/lib:/tmp/tessel-deps-dry/lib/x86_64-linux-gnu:$LD_LIBRARY_PATH \
    bash scripts/device/prebuilt.sh stage build/device "$3/torch"
  mkdir -p /tmp/tessel-torch-elsewhere
  mount --bind "$3" /tmp/tessel-torch-elsewhere
  mount -t tmpfs none "$3/torch/lib"
  mount -t tmpfs none /tmp/tessel-deps-dry
  echo "== the check again, from the carried build"
  unset PYTHONPATH  # the benchmark'\''s torch: its lib/ is hidden now, and the benchmark does not run again
  OUT=$OUT/carried TESSEL_CHECK_BENCH=0 TESSEL_CHECK_TORCH=/tmp/tessel-torch-elsewhere/torch \
    TESSEL_CHECK_DEPS=/tmp/tessel-deps-carried TESSEL_CHECK_BUILD_DIR=$PWD/build/device-carried \
    bash scripts/device/gpu_check.sh
  python3 scripts/device/summary_ok.py "$OUT/carried/gpu_check.json" --carried
' dry_run "$hide" "$cuda_libs" "$torch" "$bench_python"
carried=$(du -sm "$root/.device" | cut -f1)
echo "dry run: ok; the GPU machine is given .device: ${carried} MiB (at most 64 with the working tree)"
