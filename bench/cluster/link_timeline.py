#!/usr/bin/env python3
"""Where a node's link idles during a run (docs/bench/cluster.md, issue 43).

  ip netns exec <cluster>-node0 python3 link_timeline.py sample OUT &   # until SIGTERM
  python3 link_timeline.py idle OUT RATE_BIT_PER_S [FIRST_S]

`sample` reads eth0's tx byte counter every 5 ms (inside the node's
namespace, where /sys/class/net is the node's) and writes "seconds bytes"
lines. `idle` cuts the samples into 20 ms windows, calls a window busy when
it sent more than 20% of the line rate, and prints the idle stretches of at
least 0.1 s after FIRST_S (default: the first busy window, i.e. after
start-up) with the bytes sent and the busy time in all: each step's
stretch is the part of the step in which nothing crosses the link.
"""
import signal
import sys
import time

COUNTER = "/sys/class/net/eth0/statistics/tx_bytes"


def sample(path):
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    with open(path, "w") as out:
        while not stop:
            with open(COUNTER) as f:
                out.write(f"{time.monotonic():.4f} {int(f.read())}\n")
            time.sleep(0.005)


def idle(path, rate_bits, first=None):
    rows = [tuple(map(float, l.split())) for l in open(path) if l.strip()]
    bytes_per_s, window = rate_bits / 8, 0.02
    t0, j, windows = rows[0][0], 0, []
    while True:
        a = t0 + len(windows) * window
        while j < len(rows) and rows[j][0] < a:
            j += 1
        k = j
        while k < len(rows) and rows[k][0] < a + window:
            k += 1
        if k >= len(rows):
            break
        sent = rows[k][1] - rows[j][1]
        windows.append(sent / max(rows[k][0] - rows[j][0], 1e-6) > 0.2 * bytes_per_s)
    start = first / window if first is not None else next((i for i, b in enumerate(windows) if b), 0)
    stretches, run = [], 0
    for i, busy in enumerate(windows):
        if i < start:
            continue
        if busy:
            if run * window >= 0.1:
                stretches.append((round((i - run) * window, 2), round(run * window, 2)))
            run = 0
        else:
            run += 1
    busy_s = sum(windows[int(start):]) * window
    print(f"sent {rows[-1][1] - rows[0][1]:.0f} B; busy {busy_s:.2f} s; idle stretches (start s, length s):",
          stretches)


if __name__ == "__main__":
    if sys.argv[1] == "sample":
        sample(sys.argv[2])
    else:
        idle(sys.argv[2], float(sys.argv[3]), float(sys.argv[4]) if len(sys.argv) > 4 else None)
