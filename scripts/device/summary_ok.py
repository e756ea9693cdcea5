#!/usr/bin/env python3
"""Exits 0 when a device check's summary (gpu_check.json) says every phase
passed, else 1, printing one line either way.

Usage: summary_ok.py SUMMARY [--carried]
  --carried: also require that the check ran from the carried build
  (prebuilt.sh), that is with a passed "prebuilt" phase and no build.
"""
import json
import sys

summary_path, *flags = sys.argv[1:]
summary = json.load(open(summary_path))
phases = {p["name"]: p["rc"] for p in summary["phases"]}
ok = summary["ok"]
if "--carried" in flags:
    ok = ok and phases.get("prebuilt") == 0 and "build" not in phases
verdict = "ok" if ok else "FAILED"
print(f"{summary_path}: {verdict} ({summary.get('binaries', '?')}; phases {phases})")
sys.exit(0 if ok else 1)
