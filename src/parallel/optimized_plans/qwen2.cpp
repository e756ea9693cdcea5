// The optimized tensor-parallel plan of Qwen2ForCausalLM (decoder_plan.h).
// Qwen2: the Llama plan as is.
#include "parallel/optimized_plans/decoder_plan.h"

namespace tessel::parallel {

Plan qwen2_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options) {
  return optimized::decoder_plan(config, options, optimized::DecoderPlanShape{});
}

}  // namespace tessel::parallel
