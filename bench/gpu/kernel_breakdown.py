"""One step's kernels, as Nsight Compute's raw CSV page lists them
(`ncu --import R --csv --page raw`, one row per launch with
gpu__time_duration.sum), summed into one JSON line: kernel time, launches,
time by kind and the kernels that took longest (bench/gpu/profile.sh)."""
import argparse
import collections
import csv
import json
import re

UNITS = {"nsecond": 1e-6, "usecond": 1e-3, "msecond": 1.0, "second": 1e3}

# Kinds by a kernel's name, first match wins (lower case).
KINDS = [
    ("tessel_kernels", ("rms_norm_forward_kernel", "rms_norm_backward_kernel", "rotary_kernel", "swiglu_")),
    ("optimizer", ("adam",)),
    ("nccl", ("nccl",)),
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("matrix_products", ("gemm", "xmma", "cutlass", "nvjet", "cublas", "sm90_")),
]


def kind_of(name):
    low = name.lower()
    for kind, marks in KINDS:
        if any(m in low for m in marks):
            return kind
    return "other"


def short(name):
    """The kernel's name with its template arguments (an elementwise kernel's
    functor says what it computes) but not its parameter list."""
    text = name.replace("(anonymous namespace)", "{anon}")
    depth = 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth = max(0, depth - 1)
        elif ch == "(" and depth == 0:
            text = text[:i]
            break
    text = re.sub(r"^void ", "", re.sub(r"\s+", " ", text).strip())
    return text[:160]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--side", required=True)
    p.add_argument("csv")
    p.add_argument("--top", type=int, default=25)
    a = p.parse_args()
    rows = list(csv.reader(open(a.csv, errors="replace")))
    header = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
    names, units = rows[header], rows[header + 1]
    name_col, time_col = names.index("Kernel Name"), names.index("gpu__time_duration.sum")
    scale = UNITS.get(units[time_col].strip(), None)
    if scale is None:
        raise SystemExit(f"unknown unit {units[time_col]!r} of gpu__time_duration.sum in {a.csv}")
    per_name = collections.defaultdict(lambda: [0.0, 0])
    per_kind = collections.defaultdict(float)
    for r in rows[header + 2:]:
        if len(r) <= max(name_col, time_col) or not r[time_col].strip():
            continue
        ms = float(r[time_col].replace(",", "")) * scale
        entry = per_name[short(r[name_col])]
        entry[0] += ms
        entry[1] += 1
        per_kind[kind_of(r[name_col])] += ms
    total = sum(v[0] for v in per_name.values())
    top = sorted(per_name.items(), key=lambda kv: -kv[1][0])[: a.top]
    print(json.dumps({"side": a.side, "profile": {
        "kernel_time_ms": round(total, 3), "launches": sum(v[1] for v in per_name.values()),
        "by_kind_ms": {k: round(v, 3) for k, v in sorted(per_kind.items(), key=lambda kv: -kv[1])},
        "top": [{"kernel": n, "ms": round(v[0], 3), "launches": v[1], "share": round(v[0] / total, 4) if total else 0}
                for n, v in top]}}))


if __name__ == "__main__":
    main()
