// The optimized tensor-parallel plan of Qwen3ForCausalLM (decoder_plan.h).
// Qwen3: per-head q_norm/k_norm see only the local heads, so their gradients
// are summed over tp.
#include "parallel/optimized_plans/decoder_plan.h"

namespace tessel::parallel {

Plan qwen3_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options) {
  return optimized::decoder_plan(config, options, optimized::DecoderPlanShape{.qk_norm = true});
}

}  // namespace tessel::parallel
