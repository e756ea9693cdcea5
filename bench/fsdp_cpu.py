#!/usr/bin/env python3
"""Where the FSDP-2 step's time goes beyond the one-process step, by the OS's
per-thread accounting (/proc/PID/task/TID/schedstat), not tessel's own.

Runs `tessel train` on bench-medium (bench/configs/llama-31m: the model,
batch and settings of bench/vs_pytorch/run.sh: seq 256, micro batch 2 per
rank, fp32, one compute thread per rank) as one process and as FSDP over 2
processes, interleaved over `--rounds`. In each run's steady state (from its
third logged step) it reads every rank thread's CPU time and run-queue wait
twice, `--window` seconds apart, and prints ONE JSON object: per run the
median step time and, per rank, milliseconds per step that

  compute_run    the compute thread (the main thread: forward, backward,
                 optimizer) ran on a CPU
  compute_queue  it was runnable but waited for a CPU (another thread had it)
  comm_run       the communication thread ("tessel-comm") ran
  other_run      every other thread of the rank ran
  compute_blocked  the rest of the step: the compute thread neither ran
                 nor waited for a CPU (it slept: blocked on a collective)

and, per run, rank 0's median comm_wait_s as tessel reports it
(metrics.jsonl), to check against rank 0's compute_blocked

(per-step figures: the thread's share of the window times the run's median
step time). On a machine whose cores all run compute threads, the FSDP step
exceeds the one-process step by what its compute thread does more plus what
it waits for a core; the comm thread's CPU is what it mostly waits for.

With --node-shared the FSDP runs use node-shared parameters
(policy.dtensor_cfg.node_shared_params: no all-gathers, the parameters read
from memory both ranks map).

Usage: python3 bench/fsdp_cpu.py [--build build/ci] [--steps 16] [--window 5] [--rounds 2] [--node-shared]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def train_command(binary, model, nproc, steps, log_dir, extra):
    return [
        binary, "train", os.path.join(ROOT, "examples/configs/sft.yaml"),
        f"policy.model_name={model}", f"policy.tokenizer.name={model}",
        "policy.max_total_sequence_length=256",
        f"policy.train_global_batch_size={2 * nproc}", "policy.train_micro_batch_size=2",
        "policy.precision=float32", "policy.dtensor_cfg.dp_replicate_size=1",
        "data.train.dataset_name=synthetic", "~data.validation", "sft.max_num_epochs=1",
        f"sft.max_num_steps={steps}", "sft.val_period=0", "sft.val_at_start=false",
        "sft.val_at_end=false", "checkpointing.enabled=false", f"logger.log_dir={log_dir}",
        f"cluster.gpus_per_node={nproc}", *extra, "--nproc", str(nproc), "--no-print-config",
    ]


def train_rows(log_dir):
    rows = []
    for folder, _, files in os.walk(log_dir):
        for name in files:
            if name.endswith(".jsonl"):
                with open(os.path.join(folder, name)) as f:
                    rows += [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r.get("split") == "train"]


def children(pid):
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def rank_pids(launched, nproc):
    """The ranks' processes in rank order: the program itself for one
    process; else the children of mpirun, which the program became (tessel
    train execs it)."""
    if nproc == 1:
        return [launched]
    ranks = [p for p in children(launched) if read(f"/proc/{p}/comm").strip() == "tessel"]
    return sorted(ranks, key=world_rank)


def world_rank(pid):
    """The rank mpirun gave the process (its environment), so ranks are listed in rank order."""
    for entry in read(f"/proc/{pid}/environ").split("\0"):
        if entry.startswith("OMPI_COMM_WORLD_RANK="):
            return int(entry.split("=", 1)[1])
    return pid


def read(path):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return ""


def snapshot(pids):
    """{pid: {tid: (name, run_ns, wait_ns)}} for every thread of each rank."""
    shot = {}
    for pid in pids:
        threads = {}
        for tid in os.listdir(f"/proc/{pid}/task"):
            stat = read(f"/proc/{pid}/task/{tid}/schedstat").split()
            if len(stat) >= 2:
                threads[int(tid)] = (read(f"/proc/{pid}/task/{tid}/comm").strip(), int(stat[0]), int(stat[1]))
        shot[pid] = threads
    return shot


def measure(binary, model, nproc, steps, window, log_dir, extra):
    env = dict(os.environ, TESSEL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
    with open(log_dir + ".log", "w") as log:
        proc = subprocess.Popen(train_command(binary, model, nproc, steps, log_dir, extra), stdout=log,
                                stderr=subprocess.STDOUT, env=env)
    deadline = time.time() + 600
    while len(train_rows(log_dir)) < 3:  # steady state: past the first steps' allocations
        if proc.poll() is not None or time.time() > deadline:
            sys.exit(f"tessel train ({nproc} processes) ended or stalled before its third step: {log_dir}.log")
        time.sleep(0.2)
    pids = rank_pids(proc.pid, nproc)
    if len(pids) != nproc:
        sys.exit(f"found {len(pids)} rank processes, expected {nproc}")
    first, start = snapshot(pids), time.monotonic()
    time.sleep(window)
    second, elapsed = snapshot(pids), time.monotonic() - start
    steps_in_window = len(train_rows(log_dir))
    if proc.wait() != 0:
        sys.exit(f"tessel train ({nproc} processes) failed: {log_dir}.log")
    rows = train_rows(log_dir)
    if steps_in_window >= len(rows):
        sys.exit(f"the run ended inside the window: raise --steps above {steps} (log {log_dir}.log)")
    step_s = statistics.median(r["step_time_s"] for r in rows[1:])
    if nproc > 1 and not any(name == "tessel-comm" for pid in pids for name, _, _ in second[pid].values()):
        sys.exit("no thread named tessel-comm in the ranks (src/dist/progress_engine.cpp names it)")
    ranks = []
    for pid in pids:
        per_step = {"compute_run": 0.0, "compute_queue": 0.0, "comm_run": 0.0, "other_run": 0.0}
        for tid, (name, run1, wait1) in second[pid].items():
            _, run0, wait0 = first[pid].get(tid, (name, 0, 0))
            share = lambda ns: (ns / 1e9) / elapsed * step_s * 1000.0  # ms per step
            if tid == pid:
                per_step["compute_run"] += share(run1 - run0)
                per_step["compute_queue"] += share(wait1 - wait0)
            elif name == "tessel-comm":
                per_step["comm_run"] += share(run1 - run0)
            else:
                per_step["other_run"] += share(run1 - run0)
        # Neither running nor runnable: asleep, i.e. blocked (on collectives, in FSDP).
        per_step["compute_blocked"] = step_s * 1000.0 - per_step["compute_run"] - per_step["compute_queue"]
        ranks.append({k: round(v, 1) for k, v in per_step.items()})
    # What tessel itself reports for rank 0 (comm_wait_s, dist/caller_wait_time.h):
    # a figure to check against rank 0's compute_blocked from the OS.
    waits = [r["comm_wait_s"] for r in rows[1:] if "comm_wait_s" in r]
    reported = round(1000.0 * statistics.median(waits), 1) if waits else None
    return {"nproc": nproc, "step_s": round(step_s, 4), "window_s": round(elapsed, 2), "ranks": ranks,
            "rank0_comm_wait_reported_ms": reported}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default="build/ci")
    parser.add_argument("--steps", type=int, default=16)
    parser.add_argument("--window", type=float, default=5.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--node-shared", action="store_true",
                        help="FSDP runs with policy.dtensor_cfg.node_shared_params=true")
    args = parser.parse_args()
    binary = os.path.join(ROOT, args.build, "bin", "tessel")
    if not os.access(binary, os.X_OK):
        sys.exit(f"no {binary}: build the tessel_bin target")
    out = tempfile.mkdtemp(prefix="fsdp_cpu.")
    model = os.path.join(out, "model")
    subprocess.run([binary, "init-model", "--config", os.path.join(ROOT, "bench/configs/llama-31m/config.json"),
                    model, "--seed", "7"], check=True, stdout=subprocess.DEVNULL)
    runs = []
    for r in range(args.rounds):
        for nproc in (1, 2):
            extra = ["policy.dtensor_cfg.node_shared_params=true"] if args.node_shared and nproc > 1 else []
            runs.append(dict(round=r, **measure(binary, model, nproc, args.steps, args.window,
                                                os.path.join(out, f"n{nproc}.{r}"), extra)))
    def mean_over(nproc, key):
        values = [rank[key] for run in runs if run["nproc"] == nproc for rank in run["ranks"]]
        return round(statistics.mean(values), 1)
    summary = {
        "step_ms": {n: round(1000 * statistics.median(run["step_s"] for run in runs if run["nproc"] == n), 1)
                    for n in (1, 2)},
        **{f"{key}_ms": {n: mean_over(n, key) for n in (1, 2)}
           for key in ("compute_run", "compute_queue", "compute_blocked", "comm_run", "other_run")},
    }
    print(json.dumps({"bench": "fsdp_cpu", "model": "bench/configs/llama-31m", "seq": 256,
                      "micro_batch_per_rank": 2, "cores": os.cpu_count(), "node_shared_params": args.node_shared,
                      "load_before": os.getloadavg()[0], "runs": runs, "summary": summary}))


if __name__ == "__main__":
    main()
