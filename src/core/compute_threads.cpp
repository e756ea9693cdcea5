#include "core/compute_threads.h"

#include <ATen/Parallel.h>
#include <dlfcn.h>

namespace tessel::core {

namespace {

void set_blas_threads(int threads) {
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) set(threads);
}

int blas_threads() {
  using GetThreads = int (*)();
  auto get = reinterpret_cast<GetThreads>(dlsym(RTLD_DEFAULT, "openblas_get_num_threads"));
  return get != nullptr ? get() : 0;
}

}  // namespace

void set_compute_threads(int threads) {
  at::set_num_threads(threads);
  set_blas_threads(threads);
}

ComputeThreadsScope::ComputeThreadsScope(int threads)
    : torch_threads_(at::get_num_threads()), blas_threads_(blas_threads()) {
  set_compute_threads(threads);
}

ComputeThreadsScope::~ComputeThreadsScope() {
  at::set_num_threads(torch_threads_);
  if (blas_threads_ > 0) set_blas_threads(blas_threads_);
}

}  // namespace tessel::core
