#include "models/init.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include "core/error.h"
#include "nn/linear.h"
#include "nn/rms_norm.h"

namespace tessel::models {

void init_weights(CausalLM& model, uint64_t seed, double std) {
  TESSEL_CHECK(std > 0, "init std must be positive, got {}", std);
  at::NoGradGuard no_grad;
  at::Generator gen = at::detail::createCPUGenerator(seed);
  auto cpu32 = at::TensorOptions().dtype(at::kFloat);
  auto fill = [&](const at::Tensor& p, const at::Tensor& value) {
    TESSEL_CHECK(!p.is_meta(), "cannot initialise a model built on the meta device");
    p.copy_(value);
  };
  for (const auto& item : nn::named_tessel_modules(model)) {
    nn::Module* module = item.second;
    if (auto* lin = dynamic_cast<nn::Linear*>(module)) {
      if (lin->is_tied()) continue;  // the embedding owns the tensor
      at::Tensor w = lin->weight();
      fill(w, at::normal(0.0, std, w.sizes(), gen, cpu32));
      if (lin->bias().defined()) lin->bias().zero_();
    } else if (auto* emb = dynamic_cast<nn::Embedding*>(module)) {
      at::Tensor w = emb->weight();
      fill(w, at::normal(0.0, std, w.sizes(), gen, cpu32));
    } else if (auto* norm = dynamic_cast<nn::RMSNorm*>(module)) {
      norm->weight().fill_(norm->identity_weight());
    }
  }
}

}  // namespace tessel::models
