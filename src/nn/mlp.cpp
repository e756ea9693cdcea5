#include "nn/mlp.h"

#include <ATen/ATen.h>

#include "core/error.h"
#include "nn/device_kernels.h"
#include "nn/swiglu.h"

namespace tessel::nn {

Activation parse_activation(const std::string& name) {
  if (name == "silu" || name == "swish") return Activation::SiLU;
  if (name == "gelu_pytorch_tanh" || name == "gelu_new") return Activation::GeluTanh;
  throw UsageError(fmt::format(
      "unsupported activation '{}' (supported: silu, swish, gelu_pytorch_tanh, gelu_new)", name));
}

at::Tensor activate(const at::Tensor& x, Activation act) {
  return act == Activation::SiLU ? at::silu(x) : at::gelu(x, "tanh");
}

GatedMLP::GatedMLP(int64_t hidden, int64_t intermediate, Activation act, bool bias,
                   const at::TensorOptions& options, const GatedMLPNames& names)
    : Module("GatedMLP"), act_(act) {
  gate_proj_ = register_module(names.gate, std::make_shared<Linear>(hidden, intermediate, bias, options));
  up_proj_ = register_module(names.up, std::make_shared<Linear>(hidden, intermediate, bias, options));
  down_proj_ = register_module(names.down, std::make_shared<Linear>(intermediate, hidden, bias, options));
}

Tensors GatedMLP::forward(const Tensors& inputs) {
  TESSEL_CHECK(inputs.size() == 1, "GatedMLP {} takes one input, got {}", path(), inputs.size());
  at::Tensor x = inputs[0];
  const at::Tensor gate = gate_proj_->call(x), up = up_proj_->call(x);
  // SiLU: one fused node in float32 on the CPU (the training case here) and,
  // when switched on, on a CUDA device (nn/device_kernels.h); otherwise the
  // ATen composition, HF's formula verbatim.
  if (act_ == Activation::SiLU && swiglu_fp32_applies(gate, up)) return {down_proj_->call(swiglu_fp32(gate, up))};
  if (act_ == Activation::SiLU && swiglu_device_applies(gate, up) && device_kernels_enabled())
    return {down_proj_->call(swiglu_device(gate, up))};
  return {down_proj_->call(activate(gate, act_) * up)};
}

}  // namespace tessel::nn
