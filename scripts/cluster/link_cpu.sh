#!/usr/bin/env bash
# What one byte sent from node 0 to node 1 costs this machine's CPU, sender
# and receiver together, in nanoseconds: one TCP stream of 1 GiB between
# the nodes' namespaces, timed by the machine's own busy time (/proc/stat:
# every state but idle and iowait, softirq included, which the kernel does
# not charge to either process). Run it on an unthrottled cluster with
# nothing else running; `tessel plan --predict --inter-node-cpu-ns-per-byte`
# takes the figure. Prints one number.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
[[ -f $CLUSTER_STATE/nodes ]] || cluster_die "no cluster is up"
[[ $(cat "$CLUSTER_STATE/nodes") -ge 2 ]] || cluster_die "needs 2 nodes"
mib=${LINK_CPU_MIB:-1024}
stream='
import socket, sys
role, host, mib = sys.argv[1], sys.argv[2], int(sys.argv[3])
buf = bytearray(4 << 20)
if role == "server":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((host, 5990)); s.listen(1)
    print("ready", flush=True)
    c, _ = s.accept(); view = memoryview(buf)
    while c.recv_into(view): pass
else:
    import time
    for attempt in range(100):  # the server may still be starting: retry for 10 s
        try:
            c = socket.create_connection((host, 5990)); break
        except ConnectionRefusedError:
            if attempt == 99: raise
            time.sleep(0.1)
    for _ in range(mib // 4): c.sendall(buf)
    c.close()
'
busy() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
ip netns exec "$(cluster_ns 1)" python3 -c "$stream" server "$(cluster_ip 1)" 0 > "$CLUSTER_STATE/link_cpu.ready" 2> "$CLUSTER_STATE/link_cpu.server_err" &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT  # no server left listening if the probe fails
for _ in $(seq 300); do grep -q ready "$CLUSTER_STATE/link_cpu.ready" 2>/dev/null && break; sleep 0.1; done
grep -q ready "$CLUSTER_STATE/link_cpu.ready" 2>/dev/null ||
  cluster_die "the link probe's server did not start in 30 s: $(tail -n 3 "$CLUSTER_STATE/link_cpu.server_err" 2>/dev/null)"
before=$(busy)
ip netns exec "$(cluster_ns 0)" python3 -c "$stream" client "$(cluster_ip 1)" "$mib"
wait "$server"
after=$(busy)
python3 -c "print(round(($after - $before) / $(getconf CLK_TCK) / ($mib * 1048576) * 1e9, 3))"
