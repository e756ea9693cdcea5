#include "parallel/head_split.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tessel::parallel {

void check_whole_heads(const models::ModelConfig& config, const ParamRegistry& params, int tp_size) {
  if (tp_size <= 1) return;
  const int64_t heads = config.num_attention_heads;
  const int64_t kv_heads = config.num_key_value_heads;
  if (heads % tp_size == 0 && kv_heads % tp_size == 0) return;
  for (const auto& [name, param] : params.all()) {
    const bool projection = name.ends_with("q_proj.weight") || name.ends_with("k_proj.weight") ||
                            name.ends_with("v_proj.weight");
    if (projection && is_tp_sharded(param)) {
      throw UsageError(fmt::format(
          "the plan splits '{}' over tensor_parallel_size {}, but num_attention_heads {} and "
          "num_key_value_heads {} are not both divisible by {}: each rank must hold whole heads. "
          "Choose a tensor_parallel_size dividing both, or a plan that keeps attention whole",
          name, tp_size, heads, kv_heads, tp_size));
    }
  }
}

}  // namespace tessel::parallel
