// The gated feed-forward block of every supported family, with HF names:
//   down_proj( act(gate_proj(x)) * up_proj(x) )
// act is SiLU (Llama, Mistral, Qwen) or tanh-approximated GELU (Gemma3's
// "gelu_pytorch_tanh"). The intermediate width comes from the current weights,
// so column/row tensor-parallel shards work unchanged. Mixtral's experts are
// the same block under other names (w1 = gate, w3 = up, w2 = down).
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/core/TensorOptions.h>

#include <cstdint>
#include <memory>
#include <string>

#include "nn/linear.h"
#include "nn/module.h"

namespace tessel::nn {

enum class Activation { SiLU, GeluTanh };

// HF activation names: "silu"/"swish" and "gelu_pytorch_tanh"/"gelu_new".
// Anything else throws listing the supported names.
Activation parse_activation(const std::string& name);
at::Tensor activate(const at::Tensor& x, Activation act);

// The checkpoint names of the three projections.
struct GatedMLPNames {
  std::string gate = "gate_proj", up = "up_proj", down = "down_proj";
};

class GatedMLP : public Module {
 public:
  GatedMLP(int64_t hidden_size, int64_t intermediate_size, Activation act, bool bias,
           const at::TensorOptions& options, const GatedMLPNames& names = {});
  Activation activation() const { return act_; }

 protected:
  Tensors forward(const Tensors& inputs) override;  // {x [..., hidden]} -> {[..., hidden]}

 private:
  Activation act_;
  std::shared_ptr<Linear> gate_proj_, up_proj_, down_proj_;
};

}  // namespace tessel::nn
