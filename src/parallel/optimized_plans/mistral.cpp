// The optimized tensor-parallel plan of MistralForCausalLM (decoder_plan.h).
// Mistral: the Llama plan as is.
#include "parallel/optimized_plans/decoder_plan.h"

namespace tessel::parallel {

Plan mistral_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options) {
  return optimized::decoder_plan(config, options, optimized::DecoderPlanShape{});
}

}  // namespace tessel::parallel
