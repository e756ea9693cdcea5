# Shared names of the pretend cluster (sourced by the scripts beside it).
# TESSEL_CLUSTER_NAME (default "tessel") prefixes every namespace, so several
# clusters (tests of two checkouts at once) live side by side: each has its
# own switch, so the same subnet inside each does not collide.
CLUSTER_NAME=${TESSEL_CLUSTER_NAME:-tessel}
[[ $CLUSTER_NAME =~ ^[a-z][a-z0-9-]{0,20}$ ]] || {
  echo "cluster: TESSEL_CLUSTER_NAME='$CLUSTER_NAME' must be 1-21 of a-z, 0-9, - (starting with a letter)" >&2
  exit 2
}
CLUSTER_PREFIX=$CLUSTER_NAME-node
CLUSTER_SWITCH=$CLUSTER_NAME-switch
CLUSTER_SUBNET=10.213.0
CLUSTER_MTU=9000
CLUSTER_STATE=${TESSEL_CLUSTER_STATE:-/run/$CLUSTER_NAME-cluster}
mkdir -p "$CLUSTER_STATE" 2>/dev/null || true
# SLURM on this cluster (slurm_up.sh): its config, munge key, spool and logs.
SLURM_STATE=$CLUSTER_STATE/slurm

cluster_die() { echo "cluster: $*" >&2; exit 2; }
cluster_ns() { echo "$CLUSTER_PREFIX$1"; }
cluster_ip() { echo "$CLUSTER_SUBNET.$(($1 + 1))"; }
cluster_require_root() {
  [[ $(id -u) -eq 0 ]] || cluster_die "needs root (network namespaces); run as root or with sudo"
}
# Node index of an address or node name; dies on anything else.
cluster_node_of() {
  case $1 in
    "$CLUSTER_SUBNET".*) echo $((${1##*.} - 1)) ;;
    node[0-9]*) echo "${1#node}" ;;
    *) cluster_die "unknown node '$1' (expected $CLUSTER_SUBNET.N or nodeN)" ;;
  esac
}
