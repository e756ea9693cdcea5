#!/usr/bin/env python3
"""Records device-check summaries (gpu_check.json, as the GPU machine's run
brought them back) where issues 39 and 40 ask for them: each summary as one
line of docs/bench/gpu_runs_<date>.jsonl, and a dated section of
docs/bench/gpu.md with the phases, the tests, the benchmark against PyTorch
FSDP2 and its goals, the attention rows and the profile. Prints the section;
writes only with --write. The figures are the summaries', unchanged.

Usage: record.py SUMMARY [SUMMARY ...] [--command "what ran"] [--write]
"""
import argparse
import json
import os

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
GIB = 1024 ** 3

# Issue 40's goals: (summary key, comparison, bound, what it says).
GOALS = [
    ("tokens_per_s_vs_eager", ">=", 1.15, "tokens/s against PyTorch eager FSDP2"),
    ("tokens_per_s_vs_compiled", ">=", 1.0, "tokens/s against PyTorch compiled"),
    ("tessel_mfu", ">=", 0.50, "MFU at this sequence length"),
    ("peak_memory_vs_eager", "<=", 0.8, "peak device memory against PyTorch eager"),
    ("largest_batch_vs_eager", ">=", 1.5, "largest micro batch against PyTorch eager"),
]


def number(x, digits=3):
    return "-" if x is None else (f"{x:.{digits}f}" if isinstance(x, float) else str(x))


def gib(x):
    return "-" if not x else f"{x / GIB:.2f}"


def tests_line(name, report):
    if "tests" not in report:
        return f"- {name}: {report.get('error')}"
    line = f"- {name}: {report['passed']} passed, {report['failed']} failed, {report['skipped']} skipped"
    paths = sorted({t["device_path"] for t in report["tests"] if t.get("device_path")})
    if paths:  # which backend the device tests ran on (issue 39: "write what ran on which backend")
        line += f"; device path: {', '.join(paths)}"
    if "error" in report:  # no report: what the log showed
        line += f" ({report['error']}; unfinished: {', '.join(report.get('unfinished', [])) or 'none'})"
    failed = [t for t in report.get("tests", []) if t["status"] == "failed"]
    for t in failed:
        first = " ".join(l.strip() for l in (t.get("failures") or [""])[0].strip().splitlines()[:3])
        line += f"\n  - failed: `{t['name']}`" + (f": {first[:240]}" if first else "")
    return line


def section(summary, command):
    m = summary.get("machine", {})
    gpu = m.get("gpu") or m.get("nvidia_smi") or "no GPU"
    out = [f"## {summary.get('date')}: {gpu}", ""]
    facts = [f"torch {m.get('torch')}", f"its NCCL {m.get('torch_nccl')}", summary.get("binaries", "")]
    out.append("; ".join(f for f in facts if f and f != "None") +
               f"; wall {summary.get('wall_s')} s; every phase passed: {summary.get('ok')}.")
    if command:
        out += ["", f"Command: `{command}`"]
    out += ["", "| phase | rc | seconds |", "|---|---|---|"]
    out += [f"| {p['name']} | {p['rc']} | {p['seconds']} |" for p in summary.get("phases", [])]
    if any(k in summary for k in ("test_gpu_np1", "test_gpu_np4", "train_np1", "train_np4")):
        out += ["", "Tests:"]
    if "test_gpu_np1" in summary:
        out.append(tests_line("one process", summary["test_gpu_np1"]))
    quiet_ranks = []
    for rank, report in sorted(summary.get("test_gpu_np4", {}).items()):
        if not isinstance(report, dict):  # {"error": "no reports"}
            out.append(f"- four processes: {report}")
            continue
        if rank != "rank0" and report.get("failed") == 0:
            quiet_ranks.append(rank)
        else:
            out.append(tests_line(f"four processes, {rank}", report))
    if quiet_ranks:
        out.append(f"- four processes, {', '.join(quiet_ranks)}: no failures")
    for run in ("train_np1", "train_np4"):
        for line in summary.get(run, []):
            if line.startswith("done:"):
                out.append(f"- `tessel train` ({run[-3:]}): {line}")

    bench = summary.get("bench") or []
    sides = [b for b in bench if "side" in b]
    totals = next((b["summary"] for b in bench if "summary" in b), None)
    if sides:
        out += ["", f"### Against PyTorch FSDP2 (seq {sides[0].get('seq')}, micro batch {sides[0].get('micro_batch')})",
                "", "| side | step time (s) | tokens/s | MFU | peak device memory (GiB) | "
                "predicted tensors (GiB) | largest micro batch | last loss |",
                "|---|---|---|---|---|---|---|---|"]
        for b in sides:
            out.append(f"| {b['side']} | {number(b.get('step_time_s'))} | {number(b.get('tokens_per_s'), 0)} | "
                       f"{number(b.get('mfu'))} | {gib(b.get('peak_device_bytes'))} | "
                       f"{gib(b.get('predicted_tensor_bytes'))} | {b.get('largest_micro_batch', '-')} | "
                       f"{number(b.get('last_loss'), 4)} |")
    if totals:
        out += ["", "Issue 40's goals (tessel's plain row; the other rows' ratios are in the JSON line):", ""]
        for key, op, bound, what in GOALS:
            if key in totals:
                value = totals[key]
                met = value >= bound if op == ">=" else value <= bound
                out.append(f"- {what}: {value:.3f} (goal {op} {bound}): {'met' if met else 'not met'}")
            else:
                out.append(f"- {what}: not measured in this run")

    attention = summary.get("attention_packed") or []
    if attention:
        out += ["", "### Attention on packed rows and in a window (forward + backward)", "",
                "| seq | documents per row / window | kernel | dtype | ms (median) |", "|---|---|---|---|---|"]
        for a in attention:
            shape = a.get("documents_per_row", a.get("window"))
            kind = "documents" if "documents_per_row" in a else "window"
            out.append(f"| {a.get('seq')} | {kind} {shape} | {a.get('kernel')} | {a.get('dtype')} | "
                       f"{a.get('fwd_bwd_median_ms')} |")

    profiles = [p for p in summary.get("profile") or [] if "profile" in p]
    if profiles:
        kinds = sorted({k for p in profiles for k in p["profile"]["by_kind_ms"]})
        out += ["", "### Where one step's GPU time goes (Nsight Compute, kernel time in ms)", "",
                "| side | kernel time | launches | " + " | ".join(kinds) + " |",
                "|---|---|---|" + "---|" * len(kinds)]
        for p in profiles:
            prof = p["profile"]
            out.append(f"| {p['side']} | {prof['kernel_time_ms']} | {prof['launches']} | " +
                       " | ".join(number(prof["by_kind_ms"].get(k)) for k in kinds) + " |")
        for p in profiles:
            if not p["profile"]["top"]:
                continue
            out += ["", f"Longest kernels, {p['side']}:", ""]
            out += [f"- {t['ms']} ms, {t['launches']} launches ({100 * t['share']:.1f}%): `{t['kernel']}`"
                    for t in p["profile"]["top"][:8]]
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("summaries", nargs="+")
    p.add_argument("--command", default="", help="the run's command, quoted in the section")
    p.add_argument("--write", action="store_true", help="append to docs/bench (else print only)")
    a = p.parse_args()
    for path in a.summaries:
        with open(path) as f:
            summary = json.load(f)
        text = section(summary, a.command)
        print(text)
        if not a.write:
            continue
        bench = os.path.join(ROOT, "docs", "bench")
        with open(os.path.join(bench, f"gpu_runs_{summary.get('date')}.jsonl"), "a") as f:
            f.write(json.dumps(summary) + "\n")
        page = os.path.join(bench, "gpu.md")
        if not os.path.exists(page):
            with open(page, "w") as f:
                f.write("# tessel on a GPU: the device check and the benchmark against PyTorch FSDP2\n\n"
                        "Each section is one run of `scripts/device/gpu_check.sh` on a lent GPU machine\n"
                        "(issues 39 and 40; docs/gpu.md), written by `scripts/device/record.py` from its\n"
                        "summary, whose full line is in `gpu_runs_<date>.jsonl`.\n\n")
        with open(page, "a") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
