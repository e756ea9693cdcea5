#include "nn/swiglu.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "nn/format.h"
#include "nn/swiglu_kernel.h"

namespace tessel::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// Elements per parallel chunk: enough work per task to amortise scheduling.
constexpr int64_t kGrain = 1 << 14;

struct SwiGluFunction : torch::autograd::Function<SwiGluFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& g, const at::Tensor& u) {
    at::Tensor h = at::empty_like(g);
    const float* gp = g.data_ptr<float>();
    const float* up = u.data_ptr<float>();
    float* hp = h.data_ptr<float>();
    at::parallel_for(0, g.numel(), kGrain, [&](int64_t begin, int64_t end) {
      swiglu_forward_fp32(gp + begin, up + begin, hp + begin, end - begin);
    });
    ctx->save_for_backward({g, u});
    return h;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &g = saved[0], &u = saved[1];
    const at::Tensor dh = grads[0].contiguous();
    at::Tensor dg = at::empty_like(g), du = at::empty_like(u);
    const float* gp = g.data_ptr<float>();
    const float* up = u.data_ptr<float>();
    const float* dhp = dh.data_ptr<float>();
    float* dgp = dg.data_ptr<float>();
    float* dup = du.data_ptr<float>();
    at::parallel_for(0, g.numel(), kGrain, [&](int64_t begin, int64_t end) {
      swiglu_backward_fp32(gp + begin, up + begin, dhp + begin, dgp + begin, dup + begin, end - begin);
    });
    return {dg, du};
  }
};

}  // namespace

bool swiglu_fp32_applies(const at::Tensor& g, const at::Tensor& u) {
  return g.scalar_type() == at::kFloat && u.scalar_type() == at::kFloat && g.is_contiguous() &&
         u.is_contiguous() && g.sizes() == u.sizes() && g.device().is_cpu() && u.device().is_cpu() &&
         g.numel() > 0;
}

at::Tensor swiglu_fp32(const at::Tensor& g, const at::Tensor& u) {
  TESSEL_CHECK(swiglu_fp32_applies(g, u), "swiglu_fp32: needs contiguous float32 tensors of one shape, got {} and {}",
               shape_string(g.sizes()), shape_string(u.sizes()));
  return SwiGluFunction::apply(g, u);
}

}  // namespace tessel::nn
