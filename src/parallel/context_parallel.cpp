#include "parallel/context_parallel.h"

#include <torch/nn/module.h>

#include "core/error.h"
#include "nn/attention.h"
#include "nn/module.h"

namespace tessel::parallel {

int apply_context_parallel(torch::nn::Module& root, const dist::CommunicatorPtr& cp,
                           std::shared_ptr<RingAttentionStats> stats) {
  TESSEL_CHECK(cp != nullptr, "apply_context_parallel: the cp communicator is null");
  int installed = 0;
  for (const auto& [path, module] : nn::named_tessel_modules(root)) {
    auto* attention = dynamic_cast<nn::Attention*>(module);
    if (attention == nullptr) continue;
    attention->set_kernel([cp, stats](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                                      std::optional<int64_t> window, std::optional<double> softcap,
                                      const at::Tensor& document_ids) {
      return ring_attention(q, k, v, document_ids, cp, RingAttentionOptions{scale, window, softcap, stats});
    });
    ++installed;
  }
  TESSEL_CHECK(installed > 0,
               "context parallelism found no self-attention module in the model to run as a ring over {}",
               cp->name());
  return installed;
}

}  // namespace tessel::parallel
