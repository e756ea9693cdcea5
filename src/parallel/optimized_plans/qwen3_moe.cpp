// The optimized tensor-parallel plan of Qwen3MoeForCausalLM (decoder_plan.h):
// Qwen3's attention (per-head q/k norms), the MLPs of mlp_only / non-sparse
// layers split as in Qwen3; the sparse blocks (router and experts) whole on
// every tp rank, as the reference keeps them out of tensor parallelism.
#include "parallel/optimized_plans/decoder_plan.h"

namespace tessel::parallel {

Plan qwen3_moe_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options) {
  return optimized::decoder_plan(config, options, optimized::DecoderPlanShape{.qk_norm = true, .moe = true});
}

}  // namespace tessel::parallel
