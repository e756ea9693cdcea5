#!/usr/bin/env bash
# Prepares what the device check (gpu_check.sh) carries to a GPU machine:
# the Debian packages of debs.txt as .deb files in .device/debs/ (ignored by
# git; the run carries the folder: `carry: [".device"]`). Run here once, then
# dry-run the check here (dry_run.sh) before spending GPU time.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$root/.device/debs
mkdir -p "$out"
mapfile -t packages < <(grep -v -E '^\s*(#|$)' "$root/scripts/device/debs.txt")
(cd "$out" && apt-get download -q "${packages[@]}" >/dev/null)
echo "device check: ${#packages[@]} packages in $out ($(du -sh "$out" | cut -f1))"
