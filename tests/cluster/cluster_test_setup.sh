# Sourced by the pretend-cluster tests: `source cluster_test_setup.sh SHORT`.
# Exits 77 (skipped) with the reason where root or network namespaces are
# missing; otherwise sets root, bin and work (this test's state directory),
# gives the test a cluster of its own (TESSEL_CLUSTER_NAME SHORT<pid>: another
# checkout's test may run beside it) and tears it down on exit.
root=${TESSEL_SOURCE_DIR:?}
bin=${TESSEL_BINARY_DIR:?}/bin/tessel
if [[ $(id -u) -ne 0 ]]; then echo "SKIP: needs root for network namespaces"; exit 77; fi
if ! ip netns add tessel-probe-$$ 2>/dev/null; then echo "SKIP: cannot create network namespaces here"; exit 77; fi
ip netns del tessel-probe-$$
export TESSEL_CLUSTER_NAME=${1:?usage: source cluster_test_setup.sh SHORT_NAME}$$
export TESSEL_CLUSTER_STATE=$(mktemp -d "/tmp/tessel_${1}_test.XXXXXX")
work=$TESSEL_CLUSTER_STATE
# SLURM first (a test may have started it; a no-op otherwise), then the nodes.
trap 'bash "$root/scripts/cluster/slurm_down.sh" >/dev/null 2>&1; bash "$root/scripts/cluster/down.sh" >/dev/null 2>&1
  rm -rf "$work"' EXIT
