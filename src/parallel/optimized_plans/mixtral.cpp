// The optimized tensor-parallel plan of MixtralForCausalLM (decoder_plan.h):
// Mistral's attention split over tp; every layer's block_sparse_moe (router
// and experts) whole on every tp rank.
#include "parallel/optimized_plans/decoder_plan.h"

namespace tessel::parallel {

Plan mixtral_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options) {
  return optimized::decoder_plan(config, options, optimized::DecoderPlanShape{.moe = true});
}

}  // namespace tessel::parallel
