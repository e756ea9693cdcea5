#include "nn/linear_product.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include "core/error.h"
#include "nn/format.h"
#include "nn/onednn_sgemm.h"

namespace tessel::nn {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

at::Tensor rows_of(const at::Tensor& t) { return t.reshape({-1, t.size(-1)}); }

// Inputs {x, weight} or {x, weight, bias}: a list, because an undefined
// tensor cannot be an autograd input.
struct LinearFunction : torch::autograd::Function<LinearFunction> {
  static at::Tensor forward(AutogradContext* ctx, at::TensorList inputs) {
    const at::Tensor &x = inputs[0], &weight = inputs[1];
    at::Tensor y = onednn_mm(rows_of(x), weight.t());
    if (inputs.size() > 2) y.add_(inputs[2]);
    ctx->save_for_backward({x, weight});
    ctx->saved_data["has_bias"] = inputs.size() > 2;
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = weight.size(0);
    return y.view(shape);
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &weight = saved[1];
    const at::Tensor dy = rows_of(grads[0]);
    const bool has_bias = ctx->saved_data["has_bias"].toBool();
    variable_list out(has_bias ? 3 : 2);
    if (ctx->needs_input_grad(0)) out[0] = onednn_mm(dy, weight).view(x.sizes());
    if (ctx->needs_input_grad(1)) out[1] = onednn_mm(dy.t(), rows_of(x));
    if (has_bias && ctx->needs_input_grad(2)) out[2] = dy.sum(0);
    return out;
  }
};

}  // namespace

bool onednn_linear_applies(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  const auto float_cpu = [](const at::Tensor& t) { return t.scalar_type() == at::kFloat && t.device().is_cpu(); };
  return onednn_sgemm_found() && float_cpu(x) && float_cpu(weight) && x.dim() >= 1 && weight.dim() == 2 &&
         x.size(-1) == weight.size(1) && x.numel() > 0 && weight.numel() > 0 &&
         (!bias.defined() || (float_cpu(bias) && bias.dim() == 1 && bias.size(0) == weight.size(0)));
}

at::Tensor onednn_linear(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  TESSEL_CHECK(onednn_linear_applies(x, weight, bias),
               "onednn_linear: needs oneDNN's sgemm and float32 CPU x [..., in], weight [out, in], bias [out]; "
               "got {}, {}, {}",
               shape_string(x.sizes()), shape_string(weight.sizes()),
               bias.defined() ? shape_string(bias.sizes()) : std::string("none"));
  if (bias.defined()) return LinearFunction::apply(at::TensorList{x, weight, bias});
  return LinearFunction::apply(at::TensorList{x, weight});
}

at::Tensor linear_product(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (onednn_sgemm_preferred() && onednn_linear_applies(x, weight, bias)) return onednn_linear(x, weight, bias);
  return at::linear(x, weight, bias);
}

}  // namespace tessel::nn
