# Sourced by the other scripts: environment for building and running tessel here.
# Values already set in the environment are respected.

# mpirun refuses to run as root unless told; CI and containers run as root.
if [[ $(id -u) -eq 0 ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1}
  export OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
fi
# OpenMPI's shared-memory transport: every tessel process picks its single
# copy mechanism itself before MPI starts (CMA where the kernel allows it,
# else copy-in/copy-out: src/dist/shared_memory_copy.h); setting
# OMPI_MCA_btl_vader_single_copy_mechanism overrides that.

# OpenBLAS 0.3.21 does not recognise some AVX-512 CPUs and falls back to SSE3
# kernels (~4x slower GEMM). Only on CPUs that really have AVX-512 do we name
# the SkylakeX kernels: on an AVX2-only CPU they die with an illegal instruction
# (measured: a 2048 fp32 GEMM on one AVX2 EPYC core ran 68-75 GFLOP/s with the
# default and with Haswell/Zen kernels, and SkylakeX crashed).
if [[ -z "${OPENBLAS_CORETYPE:-}" ]] && grep -qw avx512f /proc/cpuinfo 2>/dev/null; then
  export OPENBLAS_CORETYPE=SkylakeX
fi

export CCACHE_SLOPPINESS=${CCACHE_SLOPPINESS:-pch_defines,time_macros,include_file_mtime,include_file_ctime}
