#!/usr/bin/env bash
# The device check's own tools (scripts/device/), which decide on the GPU
# machine whether its minutes go to tests or to a compiler, and which write
# its figures into docs/bench: no GPU and no CUDA build needed.
#   - source_hash.py changes with a C++ or CMake file's bytes and not with a
#     document's or a script's; it does not depend on where the tree is;
#   - prebuilt.sh use refuses a carried build of other sources, of another
#     torch, with a file not the manifest's, or one that does not load, each
#     with its reason and without leaving binaries behind; and takes one
#     that fits;
#   - summarize.py reads what the phases left, also a test program killed
#     before its report and a line cut short;
#   - summary_ok.py judges a summary's phases;
#   - record.py writes the goals of a hand-written summary as met or not.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
tools=$root/scripts/device
work=$(mktemp -d /tmp/tessel_device_check_tools.XXXXXX)
trap 'rm -rf "$work"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
expect_eq() { [[ $1 == "$2" ]] || fail "$3: '$1' != '$2'"; }
expect_ne() { [[ $1 != "$2" ]] || fail "$3: both '$1'"; }
expect_contains() { [[ $1 == *"$2"* ]] || fail "$3: no '$2' in: $1"; }

# --- source_hash.py --------------------------------------------------------
tree=$work/tree
mkdir -p "$tree/src/core" "$tree/docs" "$tree/scripts" "$tree/build/ci" "$tree/.git"
echo 'int f() { return 1; }' >"$tree/src/core/f.cpp"
echo 'project(x)' >"$tree/CMakeLists.txt"
echo '# notes' >"$tree/docs/notes.md"
h0=$(python3 "$tools/source_hash.py" "$tree")
echo 'int g;' >"$tree/build/ci/generated.cpp"   # build outputs and .git are not sources
echo 'x' >"$tree/.git/config.cpp"
echo 'more notes' >>"$tree/docs/notes.md"
echo 'echo' >"$tree/scripts/run.sh"
expect_eq "$(python3 "$tools/source_hash.py" "$tree")" "$h0" "a document, a script, build/ and .git changed the hash"
cp -r "$tree" "$work/elsewhere"
expect_eq "$(python3 "$tools/source_hash.py" "$work/elsewhere")" "$h0" "the same files elsewhere hash differently"
echo 'int f() { return 2; }' >"$tree/src/core/f.cpp"
h1=$(python3 "$tools/source_hash.py" "$tree")
expect_ne "$h1" "$h0" "a C++ file's bytes did not change the hash"
echo 'project(y)' >"$tree/CMakeLists.txt"
expect_ne "$(python3 "$tools/source_hash.py" "$tree")" "$h1" "CMakeLists.txt did not change the hash"
mv "$tree/src/core/f.cpp" "$tree/src/core/g.cpp"
h2=$(python3 "$tools/source_hash.py" "$tree")
mv "$tree/src/core/g.cpp" "$tree/src/core/f.cpp"
expect_ne "$h2" "$(python3 "$tools/source_hash.py" "$tree")" "a renamed file did not change the hash"

# --- prebuilt.sh use ---------------------------------------------------------
# A carried "build" of this repository's sources: small programs standing in
# for tessel, test_gpu and the attention bench (each must run with --help /
# --gtest_list_tests), a torch folder with its version.py.
torch=$work/torch
mkdir -p "$torch"
printf "__version__ = '2.11.0+cu130'\ngit_version = 'abc123'\n" >"$torch/version.py"
carried=$work/prebuilt
mkdir -p "$carried/bin" "$carried/tests"
for f in bin/tessel tests/test_gpu tests/device_fault_peer bin/bench_attention_kernels; do
  printf '#!/bin/sh\nexit 0\n' >"$carried/$f"
  chmod +x "$carried/$f"
done
manifest() {  # source_hash torch_version -> manifest.json of $carried
  python3 - "$carried" "$1" "$2" >"$carried/manifest.json" <<'PY'
import hashlib, json, os, sys
carried, source_hash, version = sys.argv[1:]
files = ["bin/tessel", "tests/test_gpu", "tests/device_fault_peer", "bin/bench_attention_kernels"]
print(json.dumps({"source_hash": source_hash, "torch_version": version, "torch_git_version": "abc123",
                  "cuda_architectures": ["90"], "built": "2026-12-07T00:00:00+00:00", "built_on": "here",
                  "files": {f: hashlib.sha256(open(os.path.join(carried, f), "rb").read()).hexdigest() for f in files}}))
PY
}
refused=$work/build_refused
use() {  # -> "rc message", the build folder $refused
  local out rc=0
  rm -rf "$refused"
  out=$(bash "$tools/prebuilt.sh" use "$carried" "$refused" "$torch" 2>&1) || rc=$?
  echo "$rc $out"
}
expect_nothing_left() {
  [[ ! -e $refused/bin/tessel && ! -e $refused/tests/test_gpu && ! -e $refused/tests/device_fault_peer &&
     ! -e $refused/bin/bench_attention_kernels ]] ||
    fail "$1: the refused carried build left binaries in $refused"
}
here_hash=$(python3 "$tools/source_hash.py" "$root")
got=$(use)
expect_contains "$got" "no carried build" "without a manifest"
expect_eq "${got%% *}" 3 "exit code without a manifest"
expect_nothing_left "without a manifest"
manifest "0000$here_hash" "2.11.0+cu130"
got=$(use)
expect_contains "$got" "of other sources" "a build of other sources"
expect_eq "${got%% *}" 4 "exit code for other sources"
expect_nothing_left "for other sources"
manifest "$here_hash" "2.10.0+cu128"
got=$(use)
expect_contains "$got" "linked against torch 2.10.0+cu128" "a build of another torch"
expect_eq "${got%% *}" 5 "exit code for another torch"
expect_nothing_left "for another torch"
manifest "$here_hash" "2.11.0+cu130"
echo '# changed' >>"$carried/bin/tessel"
got=$(use)
expect_contains "$got" "differs from the one the manifest lists" "a file changed after staging"
expect_eq "${got%% *}" 7 "exit code for a changed file"
expect_nothing_left "for a changed file"
printf '#!/bin/sh\necho "libtorch_cuda.so: cannot open shared object file" >&2\nexit 127\n' >"$carried/tests/test_gpu"
manifest "$here_hash" "2.11.0+cu130"
got=$(use)
expect_contains "$got" "does not load here" "a build that does not load"
expect_contains "$got" "libtorch_cuda.so" "the loader's message"
expect_eq "${got%% *}" 8 "exit code for a build that does not load"
expect_nothing_left "for a build that does not load"
printf '#!/bin/sh\nexit 0\n' >"$carried/tests/test_gpu"
manifest "$here_hash" "2.11.0+cu130"
build=$work/build_fits
out=$(bash "$tools/prebuilt.sh" use "$carried" "$build" "$torch" 2>&1) || fail "a fitting carried build was refused: $out"
expect_contains "$out" "using the carried build" "a fitting carried build"
[[ -x $build/bin/tessel && -x $build/tests/test_gpu && -x $build/tests/device_fault_peer &&
   -x $build/bin/bench_attention_kernels ]] ||
  fail "the fitting carried build's binaries are not in $build"

# prebuilt.sh status: current for this tree's hash, stale for another.
got=$(bash "$tools/prebuilt.sh" status "$carried") || fail "status of a current carried build: $got"
expect_contains "$got" "is current" "status of a current carried build"
manifest "0000$here_hash" "2.11.0+cu130"
if got=$(bash "$tools/prebuilt.sh" status "$carried"); then fail "a stale carried build's status passed"; fi
expect_contains "$got" "is stale" "status of a stale carried build"

# --- summary_ok.py -------------------------------------------------------------
summary() {  # ok phases_json carried? -> a summary file
  printf '{"ok": %s, "binaries": "x", "phases": %s}\n' "$1" "$2" >"$work/summary.json"
  echo "$work/summary.json"
}
python3 "$tools/summary_ok.py" "$(summary true '[{"name": "test_gpu_np1", "rc": 0, "seconds": 1}]')" >/dev/null ||
  fail "summary_ok refused a passed summary"
if python3 "$tools/summary_ok.py" "$(summary false '[{"name": "test_gpu_np1", "rc": 1, "seconds": 1}]')" >/dev/null; then
  fail "summary_ok passed a failed summary"
fi
if python3 "$tools/summary_ok.py" "$(summary true '[{"name": "build", "rc": 0, "seconds": 1}]')" --carried >/dev/null; then
  fail "summary_ok --carried passed a check that built"
fi
python3 "$tools/summary_ok.py" "$(summary true '[{"name": "prebuilt", "rc": 0, "seconds": 1}]')" --carried >/dev/null ||
  fail "summary_ok --carried refused a check from the carried build"

# --- summarize.py ----------------------------------------------------------------
# What a check leaves when the one-process tests were ended at their limit
# (no gtest report, the log cut in a test), a benchmark line cut short, and a
# carried build that did not fit but a build that passed.
check=$work/check_out
mkdir -p "$check" "$work/check_build"
echo '{"gpu": "NVIDIA H200"}' >"$check/machine.json"
printf 'prebuilt\t8\t1.0\tprebuilt.log\nbuild\t0\t200.0\tbuild.log\ntest_gpu_np1\t124\t200.0\ttest_gpu_np1.log\n' \
  >"$check/phases.tsv"
printf '%s\n' '[ RUN      ] Suite.Passes' '[       OK ] Suite.Passes (10 ms)' \
  $'\e[0;32m[ RUN      ] \e[mSuite.Skips' $'\e[0;32m[  SKIPPED ] \e[mSuite.Skips (0 ms)' \
  '[ RUN      ] Suite.Fails' '[  FAILED  ] Suite.Fails (5 ms)' '[ RUN      ] Suite.Hangs' >"$check/test_gpu_np1.log"
printf '%s\n' '{"side": "tessel", "tokens_per_s": 1.0}' '{"side": "pytorch_fsdp2_eag' >"$check/bench.log"
python3 "$tools/summarize.py" "$check" "$(date +%s)" "$work/check_build" 0 >"$work/summary_a.json"
python3 - "$work/summary_a.json" <<'PY' || fail "summarize.py without tests"
import json, sys
s = json.load(open(sys.argv[1]))
assert "test_gpu_np1" not in s, "tests reported though they did not run"
assert s["bench"] == [{"side": "tessel", "tokens_per_s": 1.0}], s["bench"]
assert s["ok"] is False, "a phase ended at its limit (124) yet ok"
assert s["binaries"] == "built on this machine", s["binaries"]
PY
python3 "$tools/summarize.py" "$check" "$(date +%s)" "$work/check_build" 1 >"$work/summary_b.json"
python3 - "$work/summary_b.json" <<'PY' || fail "summarize.py from a cut log"
import json, sys
s = json.load(open(sys.argv[1]))
np1 = s["test_gpu_np1"]
status = {t["name"]: t["status"] for t in np1["tests"]}
assert status == {"Suite.Passes": "passed", "Suite.Skips": "skipped", "Suite.Fails": "failed",
                  "Suite.Hangs": "unfinished"}, status
assert (np1["passed"], np1["failed"], np1["skipped"]) == (1, 1, 1), np1
assert np1["unfinished"] == ["Suite.Hangs"], np1["unfinished"]
assert "error" in s["test_gpu_np4"]["ranks, from the log"], s["test_gpu_np4"]
PY
# Every phase passed but the carried build's: ok (it built its own), once
# the expected phases are there.
printf 'prebuilt\t8\t1.0\tprebuilt.log\nbuild\t0\t200.0\tbuild.log\n' >"$check/phases.tsv"
python3 "$tools/summarize.py" "$check" "$(date +%s)" "$work/check_build" 0 >"$work/summary_c.json"
python3 -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["ok"] else 1)' "$work/summary_c.json" ||
  fail "a carried build that did not fit failed a check that built its own"
python3 "$tools/summarize.py" "$check" "$(date +%s)" "$work/check_build" 1 >"$work/summary_d.json"
python3 -c 'import json, sys; sys.exit(1 if json.load(open(sys.argv[1]))["ok"] else 0)' "$work/summary_d.json" ||
  fail "a check whose test phases are missing passed"

# --- record.py -------------------------------------------------------------------
# Hand-written figures: 1.1x eager (not met), MFU 0.55 (met), the memory
# and the largest batch at their bounds (met); compiled not measured.
cat >"$work/bench_summary.json" <<'JSON'
{"date": "2026-12-07", "machine": {"gpu": "NVIDIA H200", "torch": "2.11.0+cu130", "torch_nccl": "2.27.5"},
 "binaries": "carried", "wall_s": 300.0, "ok": true,
 "phases": [{"name": "bench", "rc": 0, "seconds": 200.0}],
 "test_gpu_np1": {"tests": [{"name": "A.B", "status": "passed", "device_path": "nccl 2.27.5"}],
                  "passed": 1, "failed": 0, "skipped": 0},
 "bench": [{"side": "tessel", "seq": 2048, "micro_batch": 4, "step_time_s": 0.5, "tokens_per_s": 16384.0,
            "mfu": 0.55, "peak_device_bytes": 10737418240, "predicted_tensor_bytes": 10200547328, "last_loss": 11.5},
           {"summary": {"tokens_per_s_vs_eager": 1.1, "tessel_mfu": 0.55, "peak_memory_vs_eager": 0.8,
                        "largest_batch_vs_eager": 1.5}}]}
JSON
text=$(python3 "$tools/record.py" "$work/bench_summary.json")
expect_contains "$text" "## 2026-12-07: NVIDIA H200" "the section's heading"
expect_contains "$text" "1 passed, 0 failed, 0 skipped; device path: nccl 2.27.5" "the tests' line and their path"
expect_contains "$text" "| tessel | 0.500 | 16384 | 0.550 | 10.00 | 9.50 | - | 11.5000 |" "the benchmark row"
expect_contains "$text" "tokens/s against PyTorch eager FSDP2: 1.100 (goal >= 1.15): not met" "the eager goal"
expect_contains "$text" "tokens/s against PyTorch compiled: not measured" "an unmeasured goal"
expect_contains "$text" "MFU at this sequence length: 0.550 (goal >= 0.5): met" "the MFU goal"
expect_contains "$text" "peak device memory against PyTorch eager: 0.800 (goal <= 0.8): met" "the memory goal"
expect_contains "$text" "largest micro batch against PyTorch eager: 1.500 (goal >= 1.5): met" "the batch goal"

if ((failures)); then
  echo "$failures failure(s)" >&2
  exit 1
fi
echo "device check tools: all checks passed"
