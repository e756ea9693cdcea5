#!/usr/bin/env bash
# The carried build: tessel's CUDA binaries made here, so that the GPU
# machine does not spend minutes of its session compiling them.
#
#   prebuilt.sh stage BUILD TORCH_DIR [DEST]   (dry_run.sh, after its check)
#     brings BUILD's tessel, test_gpu and bench_attention_kernels up to date
#     and copies them to DEST (default .device/prebuilt), with manifest.json:
#     the hash of the sources they are built from (source_hash.py), the torch
#     they are linked against (version and git commit), their CUDA
#     architectures.
#   prebuilt.sh status [PREBUILT]   whether it is of this tree's sources (here,
#     before a GPU call; exit 0 when it is)
#   prebuilt.sh use PREBUILT BUILD TORCH_DIR   (gpu_check.sh, on the GPU machine)
#     puts them in BUILD when this tree's sources, this machine's torch and
#     its GPU's architecture are the ones they were built for, and they load
#     (every symbol bound at start); otherwise says why and exits non-zero,
#     and gpu_check.sh builds on the machine as before. The caller puts
#     `prebuilt.sh libraries TORCH_DIR` on LD_LIBRARY_PATH: where the GPU
#     machine keeps the libraries they need (its torch, CUDA runtime, NCCL).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
binaries=(bin/tessel tests/test_gpu tests/device_fault_peer bin/bench_attention_kernels)
# What each is run with to see that it loads: it prints and exits at once.
declare -A load_check=([bin/tessel]=--help [tests/test_gpu]=--gtest_list_tests
                       [tests/device_fault_peer]=--help [bin/bench_attention_kernels]=--help)

# torch_build TORCH_DIR: "version git_commit" of the torch package in TORCH_DIR,
# read from its version.py (no import: the dry run's torch is not python's).
torch_build() {
  [[ -f $1/version.py ]] || { echo "no torch package at $1 (no version.py)" >&2; return 1; }
  python3 - "$1/version.py" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
field = lambda name: re.search(rf"^{name}\s*(?::[^=]*)?=\s*'([^']*)'", text, re.M).group(1)
print(field("__version__"), field("git_version"))
PY
}

# read_manifest FILE: its fields into m_hash, m_version, m_commit, m_arches
# (space-separated), m_built and m_built_on, read once.
read_manifest() {
  IFS=$'\t' read -r m_hash m_version m_commit m_arches m_built m_built_on < <(python3 - "$1" <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
print("\t".join([m["source_hash"], m["torch_version"], m["torch_git_version"], " ".join(m["cuda_architectures"]),
                 m["built"], m["built_on"]]))
PY
  )
}

case ${1:-} in
stage)
  build=${2:?usage: prebuilt.sh stage BUILD TORCH_DIR [DEST]} torch=${3:?torch folder}
  dest=${4:-$root/.device/prebuilt}
  [[ -f $build/CMakeCache.txt ]] || { echo "no configured build at $build" >&2; exit 2; }
  hash=$(python3 "$here/source_hash.py" "$root")
  cmake -DTESSEL_BUILD_BENCH=ON "$build" >/dev/null
  cmake --build "$build" --target tessel_bin test_gpu device_fault_peer bench_attention_kernels \
    -- -j"${TESSEL_CHECK_JOBS:-$(nproc)}" >/dev/null
  [[ $(python3 "$here/source_hash.py" "$root") == "$hash" ]] || { echo "the sources changed during the build" >&2; exit 3; }
  read -r version commit < <(torch_build "$torch")
  arches=$(sed -n 's/^TESSEL_CUDA_ARCHITECTURES:STRING=//p' "$build/CMakeCache.txt")
  rm -rf "$dest"
  for f in "${binaries[@]}"; do install -D -m 755 "$build/$f" "$dest/$f"; done
  python3 - "$dest" "$hash" "$version" "$commit" "$arches" "${binaries[@]}" >"$dest/manifest.json" <<'PY'
import datetime, hashlib, json, os, socket, sys
dest, source_hash, version, commit, arches, *files = sys.argv[1:]
print(json.dumps({
    "source_hash": source_hash, "torch_version": version, "torch_git_version": commit,
    "cuda_architectures": arches.replace(";", " ").split(),
    "built": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    "built_on": socket.gethostname(),
    "files": {f: hashlib.sha256(open(os.path.join(dest, f), "rb").read()).hexdigest() for f in files}}, indent=1))
PY
  echo "carried build: $(du -sh "$dest" | cut -f1) in $dest (sources ${hash:0:12}, torch $version, sm ${arches})"
  ;;
use)
  prebuilt=${2:?usage: prebuilt.sh use PREBUILT BUILD TORCH_DIR} build=${3:?build folder} torch=${4:?torch folder}
  manifest=$prebuilt/manifest.json
  [[ -f $manifest ]] || { echo "no carried build ($manifest): building here"; exit 3; }
  read_manifest "$manifest"
  hash=$(python3 "$here/source_hash.py" "$root")
  if [[ $hash != "$m_hash" ]]; then
    echo "the carried build is of other sources (${hash:0:12} here, ${m_hash:0:12} built): building here"
    exit 4
  fi
  read -r version commit < <(torch_build "$torch")
  if [[ "$version $commit" != "$m_version $m_commit" ]]; then
    echo "the carried build is linked against torch $m_version ($m_commit); this machine has $version ($commit):" \
      "building here"
    exit 5
  fi
  capability=$(python3 -c 'import torch; m, n = torch.cuda.get_device_capability(0); print(f"{m}{n}")' 2>/dev/null || true)
  if [[ -n $capability && " $m_arches " != *" $capability "* ]]; then
    echo "the carried build's kernels are for sm $m_arches; this GPU is sm $capability: building here"
    exit 6
  fi
  python3 - "$prebuilt" "$manifest" <<'PY' || exit 7
import hashlib, json, os, sys
prebuilt, manifest = sys.argv[1:]
for f, digest in json.load(open(manifest))["files"].items():
    if hashlib.sha256(open(os.path.join(prebuilt, f), "rb").read()).hexdigest() != digest:
        sys.exit(f"{f} differs from the one the manifest lists: building here")
PY
  for f in "${binaries[@]}"; do install -D -m 755 "$prebuilt/$f" "$build/$f"; done
  # Every symbol bound at start: a library missing or of another version
  # shows here, not in the middle of a test.
  loads=1
  : >"$build/prebuilt_load.err"
  for f in "${binaries[@]}"; do
    LD_BIND_NOW=1 "$build/$f" "${load_check[$f]}" >/dev/null 2>>"$build/prebuilt_load.err" || { loads=0; break; }
  done
  if ((!loads)); then
    echo "the carried build does not load here: building here"
    tail -n 20 "$build/prebuilt_load.err"
    for f in "${binaries[@]}"; do ldd "$build/$f" | grep "not found" || true; rm -f "$build/$f"; done
    exit 8
  fi
  echo "using the carried build (sources ${hash:0:12}, torch $version, built $m_built on $m_built_on)"
  ;;
status)
  # Whether the carried build is of this tree's sources (before a GPU call:
  # a stale one makes the GPU machine build for minutes).
  prebuilt=${2:-$root/.device/prebuilt}
  [[ -f $prebuilt/manifest.json ]] || { echo "no carried build at $prebuilt: run scripts/device/dry_run.sh"; exit 3; }
  read_manifest "$prebuilt/manifest.json"
  hash=$(python3 "$here/source_hash.py" "$root")
  if [[ $m_hash != "$hash" ]]; then
    echo "the carried build is stale (built from sources ${m_hash:0:12}, the tree is ${hash:0:12}): run scripts/device/dry_run.sh"
    exit 4
  fi
  echo "the carried build is current (sources ${hash:0:12})"
  ;;
libraries)
  # The folders of the libraries a carried build needs that the GPU machine
  # keeps in its Python packages: torch's own, and the CUDA runtime and NCCL
  # of the nvidia-* wheels torch loads (a build made there finds them by its
  # run path; the carried one's run path names this machine's folders).
  torch=${2:?usage: prebuilt.sh libraries TORCH_DIR}
  python3 - "$torch" <<'PY'
import glob, os, sys
folders = [os.path.join(sys.argv[1], "lib")]
try:
    import nvidia
    for base in nvidia.__path__:
        for lib in ("libcudart.so.*", "libnccl.so.*"):
            folders += sorted({os.path.dirname(p) for p in glob.glob(os.path.join(base, "*", "lib", lib))})
except ImportError:
    pass
print(":".join(dict.fromkeys(f for f in folders if os.path.isdir(f))))
PY
  ;;
*)
  echo "usage: prebuilt.sh stage BUILD TORCH_DIR [DEST] | use PREBUILT BUILD TORCH_DIR | libraries TORCH_DIR" >&2
  exit 2
  ;;
esac
