#include "nn/device_kernels.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/device_kernel_choice.h"
#include "core/error.h"
#include "nn/device_kernel_launch.h"
#include "nn/format.h"

namespace tessel::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

bool kernel_dtype(const at::Tensor& t) {
  const auto s = t.scalar_type();
  return s == at::kFloat || s == at::kBFloat16 || s == at::kHalf;
}

// One CUDA device and one kernel dtype for all of them, none empty.
bool same_cuda_storage(std::initializer_list<const at::Tensor*> ts) {
  const at::Tensor& first = **ts.begin();
  if (!first.defined() || !first.is_cuda() || !kernel_dtype(first)) return false;
  for (const at::Tensor* t : ts) {
    if (!t->defined() || t->device() != first.device() || t->scalar_type() != first.scalar_type() ||
        t->numel() == 0)
      return false;
  }
  return true;
}

struct RmsNormDeviceFunction : torch::autograd::Function<RmsNormDeviceFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps,
                            bool offset) {
    at::Tensor y = at::empty_like(x);
    at::Tensor rstd = at::empty({x.numel() / x.size(-1)}, x.options().dtype(at::kFloat));
    launch_rms_norm_forward(x, weight, y, rstd, eps, offset);
    ctx->save_for_backward({x, weight, rstd});
    ctx->saved_data["offset"] = offset;
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1], &rstd = saved[2];
    const at::Tensor dy = grads[0].to(x.scalar_type()).contiguous();
    at::Tensor dx = at::empty_like(x);
    at::Tensor partial = at::empty({rms_norm_backward_partials(x), x.size(-1)}, x.options().dtype(at::kFloat));
    launch_rms_norm_backward(x, weight, rstd, dy, dx, partial, ctx->saved_data["offset"].toBool());
    return {dx, partial.sum(0).to(weight.scalar_type()), at::Tensor(), at::Tensor()};
  }
};

struct RotaryDeviceFunction : torch::autograd::Function<RotaryDeviceFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos,
                            const at::Tensor& sin) {
    at::Tensor y = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
    launch_rotary(x, cos, sin, y, /*inverse=*/false);
    ctx->save_for_backward({cos, sin});
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &cos = saved[0], &sin = saved[1];
    const at::Tensor dy = grads[0].to(cos.scalar_type()).contiguous();
    at::Tensor dx = at::empty_like(dy);
    launch_rotary(dy, cos, sin, dx, /*inverse=*/true);
    return {dx, at::Tensor(), at::Tensor()};
  }
};

struct SwiGluDeviceFunction : torch::autograd::Function<SwiGluDeviceFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& g, const at::Tensor& u) {
    at::Tensor h = at::empty_like(g);
    launch_swiglu_forward(g, u, h);
    ctx->save_for_backward({g, u});
    return h;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &g = saved[0], &u = saved[1];
    const at::Tensor dh = grads[0].to(g.scalar_type()).contiguous();
    at::Tensor dg = at::empty_like(g), du = at::empty_like(u);
    launch_swiglu_backward(g, u, dh, dg, du);
    return {dg, du};
  }
};

}  // namespace

bool device_kernels_enabled() { return device_kernels_chosen(device_kernels_built()); }

bool rms_norm_device_applies(const at::Tensor& x, const at::Tensor& weight) {
  return same_cuda_storage({&x, &weight}) && x.is_contiguous() && weight.is_contiguous() && weight.dim() == 1 &&
         x.dim() >= 1 && weight.size(0) == x.size(-1) && x.size(-1) <= device_rms_norm_max_dim();
}

bool rotary_device_applies(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  if (!same_cuda_storage({&x, &cos, &sin}) || x.dim() != 4 || x.stride(3) != 1 || x.size(3) % 2 != 0) return false;
  if (!cos.is_contiguous() || !sin.is_contiguous() || cos.sizes() != sin.sizes()) return false;
  const int64_t B = x.size(0), T = x.size(2), D = x.size(3);
  if (cos.dim() == 2) return cos.size(0) == T && cos.size(1) == D;
  return cos.dim() == 3 && cos.size(0) == B && cos.size(1) == T && cos.size(2) == D;
}

bool swiglu_device_applies(const at::Tensor& g, const at::Tensor& u) {
  return same_cuda_storage({&g, &u}) && g.is_contiguous() && u.is_contiguous() && g.sizes() == u.sizes();
}

at::Tensor rms_norm_device(const at::Tensor& x, const at::Tensor& weight, double eps, bool weight_is_offset) {
  TESSEL_CHECK(rms_norm_device_applies(x, weight),
               "rms_norm_device: needs contiguous CUDA x [..., d] (d <= {}) and weight [d] of one dtype "
               "(float32, bfloat16 or float16), got {} and {}",
               device_rms_norm_max_dim(), shape_string(x.sizes()), shape_string(weight.sizes()));
  return RmsNormDeviceFunction::apply(x, weight, eps, weight_is_offset);
}

at::Tensor rotary_device(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  TESSEL_CHECK(rotary_device_applies(x, cos, sin),
               "rotary_device: needs CUDA x [B, heads, T, D] (unit stride in D, D even) and contiguous cos/sin "
               "[B, T, D] or [T, D] of x's dtype, got {} and {}",
               shape_string(x.sizes()), shape_string(cos.sizes()));
  return RotaryDeviceFunction::apply(x, cos, sin);
}

at::Tensor swiglu_device(const at::Tensor& g, const at::Tensor& u) {
  TESSEL_CHECK(swiglu_device_applies(g, u),
               "swiglu_device: needs contiguous CUDA tensors of one shape and dtype, got {} and {}",
               shape_string(g.sizes()), shape_string(u.sizes()));
  return SwiGluDeviceFunction::apply(g, u);
}

}  // namespace tessel::nn
