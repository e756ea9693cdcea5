// A CPU build's answer to nn/device_kernel_launch.h: no CUDA kernels.
#include "nn/device_kernel_launch.h"

#include "core/error.h"

namespace tessel::nn {

namespace {

[[noreturn]] void absent(const char* what) {
  throw Error(fmt::format("{}: tessel was built without CUDA (build the cuda preset: scripts/cuda.sh)", what));
}

}  // namespace

bool device_kernels_built() { return false; }

int64_t device_rms_norm_max_dim() { return 0; }

void launch_rms_norm_forward(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, double,
                             bool) {
  absent("the CUDA RMSNorm kernel");
}

int64_t rms_norm_backward_partials(const at::Tensor&) { absent("the CUDA RMSNorm kernel"); }

void launch_rms_norm_backward(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                              const at::Tensor&, const at::Tensor&, bool) {
  absent("the CUDA RMSNorm kernel");
}

void launch_rotary(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, bool) {
  absent("the CUDA rotary kernel");
}

void launch_swiglu_forward(const at::Tensor&, const at::Tensor&, const at::Tensor&) {
  absent("the CUDA SwiGLU kernel");
}

void launch_swiglu_backward(const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const at::Tensor&) {
  absent("the CUDA SwiGLU kernel");
}

}  // namespace tessel::nn
