#!/usr/bin/env bash
# Runs a SLURM client (sbatch, squeue, sinfo, scontrol, scancel; no sacct:
# no accounting here) on node0 of the pretend cluster against its own SLURM
# (slurm_up.sh): `scripts/cluster/slurm.sh sbatch -N 2 job.sbatch`. The
# client, and a job it submits, get SLURM_CONF and exec.sh's OpenMPI
# settings (sbatch passes the environment on to the job).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/common.sh"
[[ -f $SLURM_STATE/slurm.conf ]] || cluster_die "SLURM is not up on cluster '$CLUSTER_NAME': run scripts/cluster/slurm_up.sh first"
export SLURM_CONF=$SLURM_STATE/slurm.conf
exec bash "$here/exec.sh" 0 "$@"
