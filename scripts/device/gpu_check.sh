#!/usr/bin/env bash
# The device check (issue 39, docs/gpu.md): on a GPU machine, builds tessel's
# CUDA build against that machine's own PyTorch (its libtorch, CUDA and
# NCCL), with the Debian packages prepare.sh put in .device/debs/ unpacked
# into a private prefix; runs the GPU tests (test_gpu) at one process and at
# four sharing the GPU, and `tessel train` on the GPU at one and four
# processes; prints one JSON summary as its last line and writes it, with
# the logs, to $OUT (or .device/out). Each phase has a time limit; the
# whole check is meant to take under 8 minutes on a 16-core machine. The
# phases run in the order of what matters most (one call may have to do it
# all within a session's device time, scripts/device/README.md): the tests
# and the trains (issue 39), the benchmark and its profile (issue 40), the
# attention rows, compute-sanitizer.
#
# Usage, from the repository root:   bash scripts/device/gpu_check.sh
# Environment: TESSEL_CHECK_JOBS (build jobs, default: the cores),
# TESSEL_CHECK_DEPS (the prefix, default /tmp/tessel-deps),
# TESSEL_CHECK_TORCH (a torch folder, default: python3's),
# TESSEL_CHECK_DEVICE (the trains' TESSEL_DEVICE, default cuda),
# TESSEL_CHECK_PREBUILT (the carried build, default .device/prebuilt: used
# when it is of this tree's sources and this machine's torch, else the check
# builds here; "off": always build here; scripts/device/prebuilt.sh),
# TESSEL_CHECK_BUILD_DIR (default build/device),
# TESSEL_CHECK_SKIP_BUILD=1 (reuse the build folder), TESSEL_CHECK_TESTS=0 (leave
# out the GPU tests, compute-sanitizer and the trains: a second call for what
# the first's deadline skipped), TESSEL_CHECK_DEADLINE_S (default 570: no phase runs past that
# many seconds from the start, so the summary is written within a device
# call's 600 s; 0: no deadline), TESSEL_CHECK_SANITIZE=0 (leave
# out compute-sanitizer's memcheck and racecheck of tessel's kernels, which
# run where it is installed and a GPU is present), TESSEL_CHECK_BENCH=1 (also
# bench/gpu/run.sh, issue 40: tessel against PyTorch FSDP2; TESSEL_CHECK_BENCH_SHAPE
# "seq micro_batch steps", default "2048 4 8", TESSEL_CHECK_BENCH_LIMIT seconds,
# default 300, and run.sh's own CONFIG; and bench_attention_kernels on packed
# rows, TESSEL_CHECK_ATTENTION_SEQS / _DOCUMENTS, and a sliding window,
# TESSEL_CHECK_ATTENTION_WINDOW, default 512, at _WINDOW_SEQS), TESSEL_CHECK_PROFILE=1
# (also bench/gpu/profile.sh: each side's step under ncu, where the time
# goes), TESSEL_CHECK_BENCH_ENV (run.sh's switches for the benchmark, e.g.
# "MAX_BATCH=1 LEAN=1 FUSED=0 KERNELS=0"), TESSEL_CHECK_ATTENTION=0 (leave the
# attention rows out of a benchmark call), TESSEL_CHECK_BUILD_LIMIT
# (seconds, default 360: a 16-core machine's build; the dry run on 2 cores
# needs far more).
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
out=${OUT:-$root/.device/out}
mkdir -p "$out"
deps=${TESSEL_CHECK_DEPS:-/tmp/tessel-deps}
build=${TESSEL_CHECK_BUILD_DIR:-$root/build/device}
prebuilt=${TESSEL_CHECK_PREBUILT:-$root/.device/prebuilt}
jobs=${TESSEL_CHECK_JOBS:-$(nproc)}
summary=$out/gpu_check.json
phases=$out/phases.tsv
: >"$phases"
check_start=$(date +%s)

deadline=${TESSEL_CHECK_DEADLINE_S:-570}

# phase NAME LIMIT_S LOG COMMAND...: runs COMMAND with a time limit (at most
# what is left before the deadline, less the kill's grace and the summary's
# time), its output in $out/LOG, and records name, exit code and seconds.
# With under 20 s left it is skipped: rc 125.
phase() {
  local name=$1 limit=$2 log=$3
  shift 3
  local t0 rc
  if ((deadline > 0)); then
    local left=$((deadline - ($(date +%s) - check_start) - 15))
    if ((left < 20)); then
      echo "== $name: skipped, the check's ${deadline} s are nearly spent" | tee "$out/$log"
      printf '%s\t%s\t%s\t%s\n' "$name" 125 0 "$log" >>"$phases"
      return 125
    fi
    ((limit > left)) && limit=$left
  fi
  t0=$(date +%s.%N)
  echo "== $name (limit ${limit}s)"
  timeout --kill-after=10 "$limit" "$@" >"$out/$log" 2>&1
  rc=$?
  local seconds
  seconds=$(python3 -c "print(round($(date +%s.%N) - $t0, 1))")
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$seconds" "$log" >>"$phases"
  echo "   rc $rc in ${seconds}s; last lines of $log:"
  tail -n 5 "$out/$log" | sed 's/^/   | /'
  return "$rc"
}

# --- the machine ---------------------------------------------------------
# An image may force TF32 for every fp32 matrix product
# (TORCH_ALLOW_TF32_CUBLAS_OVERRIDE=1, as NVIDIA's PyTorch images set;
# libtorch then ignores the precision a program asks for): the GPU tests
# compare fp32 with the CPU at 1e-4, which TF32's 10-bit mantissa breaks.
# Unset for the whole check (both sides of the benchmark alike); machine.json
# says what it was.
export TESSEL_CHECK_TF32_OVERRIDE_WAS=${TORCH_ALLOW_TF32_CUBLAS_OVERRIDE-unset}
unset TORCH_ALLOW_TF32_CUBLAS_OVERRIDE
torch_dir=${TESSEL_CHECK_TORCH:-$(python3 -c 'import os, torch; print(os.path.dirname(torch.__file__))')}
python3 - >"$out/machine.json" <<'PY'
import json, os, subprocess
info = {"TORCH_ALLOW_TF32_CUBLAS_OVERRIDE (unset for the check)": os.environ["TESSEL_CHECK_TF32_OVERRIDE_WAS"]}
try:
    import torch
    info.update({"torch": torch.__version__, "torch_cuda": torch.version.cuda,
                 "cuda_available": torch.cuda.is_available()})
    try:
        info["torch_nccl"] = ".".join(str(v) for v in torch.cuda.nccl.version())
    except Exception as e:  # noqa: BLE001 - a fact to report, not to handle
        info["torch_nccl"] = f"unknown ({e})"
    if torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name(0)
        info["gpu_count"] = torch.cuda.device_count()
except Exception as e:  # noqa: BLE001 - no torch, or one that does not load: a fact to report
    info["torch"] = f"python3's torch is unusable ({type(e).__name__}: {e}); TESSEL_CHECK_TORCH gives the libtorch"
try:
    info["nvidia_smi"] = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        capture_output=True, text=True, timeout=30).stdout.strip()
except Exception as e:  # noqa: BLE001
    info["nvidia_smi"] = f"unavailable ({e})"
print(json.dumps(info))
PY
echo "machine: $(cat "$out/machine.json")"
nccl_root=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null || true)

# --- the Debian packages -------------------------------------------------
shopt -s nullglob
debs=("$root"/.device/debs/*.deb)
if ((${#debs[@]} == 0)); then
  echo "no .deb files in .device/debs: run scripts/device/prepare.sh first and carry .device" >&2
  exit 2
fi
mkdir -p "$deps"
for f in "${debs[@]}"; do dpkg -x "$f" "$deps"; done
arch_lib=$deps/usr/lib/x86_64-linux-gnu
mpi_dir=$arch_lib/openmpi
export LD_LIBRARY_PATH=$arch_lib:$mpi_dir/lib:$deps/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export OPAL_PREFIX=$deps/usr  # OpenMPI finds its plugins and help files under the prefix it was unpacked to
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export TESSEL_SOURCE_DIR=$root  # the tests' and the trains' data, wherever the binaries were built
mpirun=$deps/usr/bin/mpirun.openmpi
export TESSEL_TEST_MPIRUN=$mpirun  # the GPU tests that launch a job of their own (device_faults_test.cpp)

# --- build ------------------------------------------------------------------
configure=(cmake -G Ninja -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release
  -DTESSEL_CUDA=ON "-DTESSEL_TORCH_PACKAGE=$torch_dir" -DTESSEL_BUILD_BENCH=OFF
  "-DCMAKE_PREFIX_PATH=$deps/usr" "-DCMAKE_IGNORE_PREFIX_PATH=/usr/lib/x86_64-linux-gnu/openmpi"
  -DMPI_SKIP_COMPILER_WRAPPER=ON "-DMPI_C_HEADER_DIR=$mpi_dir/include" -DMPI_C_LIB_NAMES=mpi
  "-DMPI_mpi_LIBRARY=$mpi_dir/lib/libmpi.so" "-DMPIEXEC_EXECUTABLE=$mpirun")
[[ -n $nccl_root ]] && configure+=("-DTESSEL_NCCL_ROOT=$nccl_root")
# The carried build (prebuilt.sh) when it fits this tree and this machine:
# seconds instead of minutes of the GPU machine's time. Its run path names
# the folders of the machine it was built on, so the libraries it needs are
# found through LD_LIBRARY_PATH (also when a later call reuses it).
carried_libraries() {
  local folders
  folders=$(bash "$root/scripts/device/prebuilt.sh" libraries "$torch_dir")
  export LD_LIBRARY_PATH=${folders:+$folders:}$LD_LIBRARY_PATH
}
built=1 carried=0
if [[ ${TESSEL_CHECK_SKIP_BUILD:-0} == 1 ]]; then
  [[ -f $build/carried_build.json ]] && carried=1 && carried_libraries
else
  if [[ $prebuilt != off && -d $prebuilt ]]; then
    (carried_libraries && phase prebuilt 90 prebuilt.log bash "$root/scripts/device/prebuilt.sh" use "$prebuilt" "$build" "$torch_dir") &&
      carried=1 && carried_libraries && cp "$prebuilt/manifest.json" "$build/carried_build.json"
  fi
  if ((!carried)); then
    rm -f "$build/carried_build.json"
    phase configure 120 configure.log "${configure[@]}" &&
      phase build "${TESSEL_CHECK_BUILD_LIMIT:-360}" build.log cmake --build "$build" --target tessel_bin test_gpu -- -j"$jobs" || built=0
  fi
fi

# --- tests and runs -----------------------------------------------------
tests=${TESSEL_CHECK_TESTS:-1}
device=${TESSEL_CHECK_DEVICE:-cuda}  # the dry run trains and benchmarks on the CPU
if ((built && tests)); then
  phase test_gpu_np1 300 test_gpu_np1.log "$build/tests/test_gpu" "--gtest_output=json:$out/test_gpu_np1.json"
  phase test_gpu_np4 300 test_gpu_np4.log "$mpirun" --oversubscribe --bind-to none -np 4 \
    -x LD_LIBRARY_PATH -x OPAL_PREFIX -x TESSEL_COLLECTIVE_TIMEOUT_S=120 \
    bash -c "exec '$build/tests/test_gpu' --gtest_output=json:$out/test_gpu_np4_rank\${OMPI_COMM_WORLD_RANK}.json"
  # The default job (tiny Llama, HSDP 2x2) on the GPU, and one process.
  phase train_np1 120 train_np1.log env TESSEL_DEVICE="$device" "$build/bin/tessel" train --nproc 1 \
    policy.dtensor_cfg.dp_replicate_size=1 "logger.log_dir=$out/train_np1_logs" --no-print-config
  phase train_np4 180 train_np4.log env TESSEL_DEVICE="$device" TESSEL_ALLOW_SHARED_GPU=1 "$build/bin/tessel" train \
    --nproc 4 --mpirun "$mpirun" "logger.log_dir=$out/train_np4_logs" --no-print-config
fi
if ((built)); then
  # The benchmark's model (GBs for Llama-3.2-1B) stays out of $out, which
  # comes back from the GPU machine; written once, for the bench and the profile.
  bench_config=${CONFIG:-$root/bench/configs/llama-3.2-1b/config.json}
  bench_model=/tmp/tessel-check-bench-models/$(basename "$(dirname "$bench_config")")
  # Issue 40's side-by-side benchmark against PyTorch FSDP2, when asked for.
  if [[ ${TESSEL_CHECK_BENCH:-0} == 1 ]]; then
    # TESSEL_CHECK_BENCH_ENV: run.sh's own switches (assignments, e.g. "MAX_BATCH=1 LEAN=1").
    # shellcheck disable=SC2086 # the shape is three words: seq, micro batch, steps; the switches words too
    phase bench "${TESSEL_CHECK_BENCH_LIMIT:-300}" bench.log env OUT="$out/bench" DEVICE="$device" \
      MODEL_DIR="$bench_model" ${TESSEL_CHECK_BENCH_ENV:-} \
      bash "$root/bench/gpu/run.sh" "$build" ${TESSEL_CHECK_BENCH_SHAPE:-2048 4 8}
  fi
  if [[ ${TESSEL_CHECK_PROFILE:-0} == 1 ]]; then
    phase profile 240 profile.log env OUT="$out/profile" MODEL_DIR="$bench_model" RAW_DIR=/tmp/tessel-check-profile \
      bash "$root/bench/gpu/profile.sh" "$build" 2048 4
  fi
  # Packed rows' attention there, with the benchmark: one masked pass against
  # each document through the causal kernel, at document counts around the
  # crossing nn/document_runs.h estimates for a device (bfloat16); and a
  # sliding window (Gemma 3's 512) as one mask against bands of queries
  # (nn/window_bands.h), at rows of 1.5 to 8 windows (bands from 2: the CPU's
  # library kernel measured 1.25x there).
  if [[ ${TESSEL_CHECK_BENCH:-0} == 1 && ${TESSEL_CHECK_ATTENTION:-1} == 1 ]]; then
    phase attention_packed 150 attention_packed.log bash -c '
      set -e
      if [[ -f $1/CMakeCache.txt ]]; then  # else the carried build has it
        cmake -DTESSEL_BUILD_BENCH=ON "$1" >/dev/null
        cmake --build "$1" --target bench_attention_kernels -- -j"$2" >/dev/null
      fi
      for n in $5; do
        for t in $4; do
          "$1/bin/bench_attention_kernels" --device "$3" --bfloat16 --seq "$t" --documents "$n" --rounds 5
        done
      done | tee "$6"
      for t in $8; do
        "$1/bin/bench_attention_kernels" --device "$3" --bfloat16 --seq "$t" --window "$7" --rounds 5
      done | tee -a "$6"' _ "$build" "$jobs" "$device" "${TESSEL_CHECK_ATTENTION_SEQS:-2048 4096}" \
      "${TESSEL_CHECK_ATTENTION_DOCUMENTS:-8 32 128}" "$out/attention_packed.jsonl" \
      "${TESSEL_CHECK_ATTENTION_WINDOW:-512}" "${TESSEL_CHECK_ATTENTION_WINDOW_SEQS:-768 1024 2048 4096}"
  fi
  # tessel's own kernels under compute-sanitizer (out-of-bounds accesses,
  # shared-memory races), where it is installed and a GPU is present; last,
  # so that a slow sanitizer never takes the deadline's time from the parity
  # tests, the trains, the benchmark or its profile (the order is what
  # matters most first: one call may have to do it all, scripts/device/README.md).
  if ((tests)) && command -v compute-sanitizer >/dev/null 2>&1 && [[ ${TESSEL_CHECK_SANITIZE:-1} == 1 ]] \
    && python3 -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then
    for tool in memcheck racecheck; do
      phase "sanitize_$tool" 150 "sanitize_$tool.log" compute-sanitizer --tool "$tool" --error-exitcode 1 \
        "$build/tests/test_gpu" --gtest_filter='DeviceKernels.*:FusedAdamW.*'
    done
  fi
fi

# --- summary ---------------------------------------------------------------
python3 "$root/scripts/device/summarize.py" "$out" "$check_start" "$build" "$tests" >"$summary"
cat "$summary"
