#!/usr/bin/env python3
"""Prints one SHA-256 over the files a build of tessel is made from.

The device check carries a build made here (.device/prebuilt/, staged by
dry_run.sh) and uses it on the GPU machine only when this hash of that
machine's copy of the tree equals the one recorded beside the build: the
GPU machine's copy has no .git, so the hash is over the files themselves
(their paths relative to the root and their bytes), not a commit.

Usage: source_hash.py [ROOT]   (default: the repository this script is in)
"""
import hashlib
import os
import sys

# What the compiler and CMake read; data, docs and scripts do not change a binary.
SUFFIXES = (".cpp", ".h", ".hpp", ".cc", ".cu", ".cuh", ".inc", ".cmake", ".in")
NAMES = ("CMakeLists.txt", "CMakePresets.json")
# Build outputs, what the device check carries and writes, and other repositories.
SKIPPED_TOP = {"build", "shared", "out", "logs", "results"}


def source_files(root):
    for folder, dirs, files in os.walk(root):
        relative = os.path.relpath(folder, root)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d != "__pycache__"
                         and not (relative == "." and d in SKIPPED_TOP))
        for name in sorted(files):
            if name in NAMES or name.endswith(SUFFIXES):
                yield os.path.normpath(os.path.join(relative, name))


def source_hash(root):
    digest = hashlib.sha256()
    for path in source_files(root):
        with open(os.path.join(root, path), "rb") as f:
            content = f.read()
        digest.update(f"{path}\0{len(content)}\0".encode())
        digest.update(content)
    return digest.hexdigest()


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    print(source_hash(sys.argv[1] if len(sys.argv) > 1 else os.path.join(here, "..", "..")))
