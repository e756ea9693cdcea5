#!/usr/bin/env python3
"""The device check's summary (gpu_check.sh's last step): one JSON object on
stdout from what the phases left in OUT: the machine, each phase's exit code
and seconds (phases.tsv), the GPU tests' reports (gtest's JSON, or what a
test program's log shows when it was ended before writing one), the
benchmark, attention and profile lines, the trains' closing lines, which
build ran, and whether every phase passed.

Usage: summarize.py OUT START_EPOCH_S BUILD_DIR TESTS_RAN(0|1)
"""
import datetime
import glob
import json
import os
import re
import sys
import time


def counted(tests):
    return {k: sum(1 for t in tests if t["status"] == k) for k in ("passed", "failed", "skipped")}


def from_log(log):
    """What a test program's log shows when it left no report (killed at its
    phase's limit): the tests that ended, and those that began and did not."""
    marks = re.compile(r"\[\s*(RUN|OK|FAILED|SKIPPED)\s*\] ([A-Za-z0-9_]+\.[A-Za-z0-9_/]+)")
    status, order = {}, []
    for line in open(log, errors="replace"):
        m = marks.search(re.sub(r"\x1b\[[0-9;]*m", "", line))
        if not m:
            continue
        kind, name = m.groups()
        if name not in status:
            order.append(name)
        if kind == "RUN":
            status.setdefault(name, "unfinished")
        else:
            status[name] = {"OK": "passed", "FAILED": "failed", "SKIPPED": "skipped"}[kind]
    tests = [{"name": n, "status": status[n]} for n in order]
    return {"error": f"no report; from {os.path.basename(log)}", "tests": tests, **counted(tests),
            "unfinished": [t["name"] for t in tests if t["status"] == "unfinished"]}


def gtest(path, log=None):
    try:
        with open(path) as f:
            report = json.load(f)
    except (OSError, ValueError) as e:
        if log and os.path.exists(log):
            return from_log(log)
        return {"error": f"no report ({os.path.basename(path)}: {e.__class__.__name__}) and no log"}
    tests = []
    for suite in report.get("testsuites", []):
        for t in suite.get("testsuite", []):
            failures = [f.get("failure", "")[:600] for f in t.get("failures", [])]
            status = "failed" if failures else ("skipped" if t.get("result") == "SKIPPED" else "passed")
            entry = {"name": f"{suite['name']}.{t['name']}", "status": status}
            if failures:
                entry["failures"] = failures[:3]
            if "device_path" in t:
                entry["device_path"] = t["device_path"]
            tests.append(entry)
    return {"tests": tests, **counted(tests)}


def json_lines(log):
    """The JSON objects a phase printed one per line; a line cut short (the
    phase ended mid-write) is left out."""
    objects = []
    for line in open(log, errors="replace"):
        if line.startswith("{"):
            try:
                objects.append(json.loads(line))
            except ValueError:
                pass
    return objects


def main(out, start, build, tests_ran):
    try:
        machine = json.load(open(os.path.join(out, "machine.json")))
    except (OSError, ValueError) as e:
        machine = {"error": f"machine.json: {e}"}
    summary = {"date": datetime.date.today().isoformat(), "check": "scripts/device/gpu_check.sh",
               "machine": machine}
    summary["phases"] = []
    with open(os.path.join(out, "phases.tsv")) as f:
        for line in f:
            name, rc, seconds, log = line.rstrip("\n").split("\t")
            summary["phases"].append({"name": name, "rc": int(rc), "seconds": float(seconds)})
    if tests_ran:
        summary["test_gpu_np1"] = gtest(os.path.join(out, "test_gpu_np1.json"),
                                        os.path.join(out, "test_gpu_np1.log"))
        ranks = sorted(glob.glob(os.path.join(out, "test_gpu_np4_rank*.json")))
        summary["test_gpu_np4"] = (
            {os.path.basename(p)[len("test_gpu_np4_"):-5]: gtest(p) for p in ranks}
            or {"ranks, from the log": gtest(os.path.join(out, "no_report.json"),
                                             os.path.join(out, "test_gpu_np4.log"))})
        for rank, report in summary["test_gpu_np4"].items():  # rank 0 in full; the others' failures only
            if rank.startswith("rank") and rank != "rank0" and isinstance(report, dict) and "tests" in report:
                report["tests"] = [t for t in report["tests"] if t["status"] == "failed"]
    for part in ("bench", "attention_packed", "profile"):
        log = os.path.join(out, part + ".log")
        if os.path.exists(log):
            summary[part] = json_lines(log)
    for run in ("train_np1", "train_np4"):
        log = os.path.join(out, run + ".log")
        if os.path.exists(log):
            lines = [l.strip() for l in open(log, errors="replace") if "done:" in l or "device" in l]
            summary[run] = lines[-4:]
    summary["wall_s"] = round(time.time() - start, 1)
    carried = os.path.join(build, "carried_build.json")
    summary["binaries"] = (f"carried, built {json.load(open(carried)).get('built')}" if os.path.exists(carried)
                           else "built on this machine")
    expected = {"test_gpu_np1", "test_gpu_np4", "train_np1", "train_np4"} if tests_ran else set()
    # The carried build not fitting is no failure: the check then built its own.
    judged = [p for p in summary["phases"] if p["name"] != "prebuilt"]
    summary["ok"] = all(p["rc"] == 0 for p in judged) and expected <= {p["name"] for p in summary["phases"]}
    print(json.dumps(summary))


if __name__ == "__main__":
    main(sys.argv[1], float(sys.argv[2]), sys.argv[3], sys.argv[4] == "1")
