#include "parallel/expert_parallel_check.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <vector>

#include "core/error.h"

namespace tessel::parallel {

void check_expert_parallel(int ep, const models::ModelConfig& config) {
  if (ep <= 1) return;
  if (!models::is_moe(config)) {
    throw UsageError(fmt::format("policy.dtensor_cfg.expert_parallel_size={} needs a mixture-of-experts model "
                                 "(Qwen3MoeForCausalLM, MixtralForCausalLM), but {} is dense; set "
                                 "policy.dtensor_cfg.expert_parallel_size=1",
                                 ep, config.architecture));
  }
  if (config.num_experts % ep != 0) {
    std::vector<int64_t> divisors;
    for (int64_t d = 1; d <= config.num_experts; ++d) {
      if (config.num_experts % d == 0) divisors.push_back(d);
    }
    throw UsageError(fmt::format("policy.dtensor_cfg.expert_parallel_size={}: the {} experts of {} do not split "
                                 "evenly over {} ranks; choose expert_parallel_size in {{{}}}",
                                 ep, config.num_experts, config.architecture, ep, fmt::join(divisors, ", ")));
  }
}

}  // namespace tessel::parallel
