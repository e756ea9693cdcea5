// The optimized tensor-parallel plan of LlamaForCausalLM (decoder_plan.h).
// Llama: the Llama plan as is.
#include "parallel/optimized_plans/decoder_plan.h"

namespace tessel::parallel {

Plan llama_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options) {
  return optimized::decoder_plan(config, options, optimized::DecoderPlanShape{});
}

}  // namespace tessel::parallel
