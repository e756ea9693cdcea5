#!/usr/bin/env bash
# A node lost, and a link that only flaps, on two pretend nodes x 2 ranks
# (HSDP 2x2, checkpoints every 10 steps), each run started by `tessel run
# --hostfile` on node 0 as a user would (issue 43):
#   - undisturbed: the reference losses;
#   - node 1's link down for 10 s of a 60 s collective timeout, then up: the
#     job finishes with exactly the reference losses;
#   - node 1's link down for good (timeout 10 s): `tessel run` returns
#     75 (a lost node) within timeout + 30 s, its last line names node 1's address,
#     the group whose collective timed out and the resume command; no process
#     is left on node 0, and once the link is back none on node 1; the
#     printed resume command, run as printed, continues from the last
#     checkpoint with the reference losses.
# Needs root and network namespaces; exits 77 (skipped) with the reason where
# they are not available.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/cluster_test_setup.sh" tln
bash "$root/scripts/cluster/up.sh" 2
node1=$TESSEL_CLUSTER_NAME-node1
# Addresses, not names, in the host file: `tessel run` asks these nodes
# whether they answer, from node 0's namespace, where no name resolves.
printf '10.213.0.1 slots=2\n10.213.0.2 slots=2\n' >"$work/hostfile"
steps=400

source "$root/scripts/cluster/training_job.sh"
fail=0

# The undisturbed run.
TESSEL_COLLECTIVE_TIMEOUT_S=60 job_start reference
wait $! || { echo "FAIL: the undisturbed run failed"; tail -20 "$work/reference.log"; exit 1; }

# A 10 s outage against a 60 s collective timeout.
TESSEL_COLLECTIVE_TIMEOUT_S=60 job_start outage
pid=$!
job_wait_for_step outage 20 "$pid"
ip -n "$node1" link set eth0 down
sleep 10
ip -n "$node1" link set eth0 up
still_running=0
kill -0 "$pid" 2>/dev/null && still_running=1
if wait "$pid"; then echo "ok   outage: the job finished (exit 0)"; else echo "FAIL outage: exit non-zero"; tail -20 "$work/outage.log"; fail=1; fi
if ((still_running)); then echo "ok   outage: the job was still running when the link came back"
else echo "FAIL outage: the job ended before the link came back (too short to test the outage)"; fail=1; fi
job_same_losses "$work/outage/logs/metrics.jsonl" "$work/reference/logs/metrics.jsonl" outage || fail=1

# Node 1 lost for good.
timeout_s=10
TESSEL_COLLECTIVE_TIMEOUT_S=$timeout_s job_start lost
pid=$!
job_wait_for_step lost 25 "$pid"
ip -n "$node1" link set eth0 down
down_at=$(date +%s.%N)
# A hang is a failure, not a stuck test: give up on the launcher at 5 minutes.
for _ in $(seq 1500); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
returned_at=$(date +%s.%N)
if kill -0 "$pid" 2>/dev/null; then echo "FAIL lost: tessel run still running 5 min after the link went down"; kill -9 "$pid"; fail=1; fi
rc=0; wait "$pid" || rc=$?
took=$(python3 -c "print(round($returned_at - $down_at, 1))")
if ((rc == 75)); then echo "ok   lost: tessel run exited $rc (a lost node)"; else echo "FAIL lost: tessel run exited $rc, not 75 (a lost node)"; fail=1; fi
if python3 -c "import sys; sys.exit(0 if $took <= $timeout_s + 30 else 1)"; then
  echo "ok   lost: tessel run returned ${took} s after the link went down (bound: timeout ${timeout_s} s + 30 s)"
else echo "FAIL lost: tessel run returned ${took} s after the link went down (bound: $((timeout_s + 30)) s)"; fail=1; fi
summary=$(grep '^tessel run: the job failed' "$work/lost.log" || true)
echo "     $summary"
for want in "lost node 10.213.0.2 " " on group '" "resume from the last checkpoint with: "; do
  if [[ $summary == *"$want"* ]]; then echo "ok   lost: the closing line says '$want'"
  else echo "FAIL lost: the closing line lacks '$want'"; fail=1; fi
done
if grep -q "lost node 10.213.0.1 " <<<"$summary"; then echo "FAIL lost: node 0 named as lost"; fail=1; fi
left=$(ip netns pids "$TESSEL_CLUSTER_NAME-node0")
if [[ -z $left ]]; then echo "ok   lost: no process left on node 0"
else echo "FAIL lost: processes left on node 0:"; ps -o pid,cmd -p $left; fail=1; fi
ip -n "$node1" link set eth0 up
for _ in $(seq 150); do [[ -z $(ip netns pids "$node1") ]] && break; sleep 0.2; done
left=$(ip netns pids "$node1")
if [[ -z $left ]]; then echo "ok   lost: no process left on node 1 once its link is back"
else echo "FAIL lost: processes left on node 1 30 s after its link came back:"; ps -o pid,cmd -p $left; fail=1; fi
# The resume command as printed, on node 0 again.
resume=${summary##*resume from the last checkpoint with: }
if [[ -n $summary ]]; then
  TESSEL_COLLECTIVE_TIMEOUT_S=60 bash "$root/scripts/cluster/exec.sh" 0 sh -c "$resume" >"$work/resumed.log" 2>&1 ||
    { echo "FAIL resumed: exit non-zero"; tail -20 "$work/resumed.log"; fail=1; }
  grep -o 'resum[a-z]* from [^,;]*' "$work/resumed.log" | head -1 | sed 's/^/     /' || true
  job_same_losses "$work/lost/logs/metrics.jsonl" "$work/reference/logs/metrics.jsonl" "lost and resumed" || fail=1
fi
exit $fail
