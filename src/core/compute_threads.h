// How many threads one process computes on: libtorch's intra-op pool and the
// BLAS's own. libtorch's setting does not reach the BLAS: OpenBLAS (the
// pthreads build) runs its own pool, sized by OPENBLAS_NUM_THREADS or else
// every core. Measured: a "1-thread" process still ran its GEMMs on both
// cores of a 2-core machine, and a micro batch timed that way took 0.17 s
// against 0.27 s on one core (bench-medium, seq 128).
#pragma once

namespace tessel::core {

// Sets both pools (the BLAS's only where OpenBLAS is loaded; looked up at
// run time: tessel does not link OpenBLAS itself, libtorch reaches it
// through libblas).
void set_compute_threads(int threads);

// For the span of a measurement: both pools at `threads`, restored after.
class ComputeThreadsScope {
 public:
  explicit ComputeThreadsScope(int threads);
  ~ComputeThreadsScope();
  ComputeThreadsScope(const ComputeThreadsScope&) = delete;
  ComputeThreadsScope& operator=(const ComputeThreadsScope&) = delete;

 private:
  int torch_threads_;
  int blas_threads_;  // 0: no OpenBLAS here
};

}  // namespace tessel::core
