// The optimized tensor-parallel plan of Gemma3ForCausalLM (decoder_plan.h).
// Gemma3: per-head q_norm/k_norm (gradients summed over tp) and four sandwich
// norms per layer, all sequence-parallel under SP. The embedding scale and the
// final logit softcapping are elementwise, so they run on shards unchanged.
#include "parallel/optimized_plans/decoder_plan.h"

namespace tessel::parallel {

Plan gemma3_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options) {
  return optimized::decoder_plan(config, options, optimized::DecoderPlanShape{
                                      .qk_norm = true,
                                      .layer_norms = {"input_layernorm", "post_attention_layernorm",
                                                      "pre_feedforward_layernorm", "post_feedforward_layernorm"}});
}

}  // namespace tessel::parallel
