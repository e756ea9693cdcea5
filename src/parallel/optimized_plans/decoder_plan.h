// The plan every supported family shares (SPEC 3, "the Llama optimized plan"),
// parameterised by what differs: per-head q/k norms (Qwen3, Gemma3) and the
// names of the per-layer norms (Gemma3's sandwich norms).
#pragma once

#include <string>
#include <vector>

#include "models/model_config.h"
#include "parallel/optimized_plans.h"
#include "parallel/plan.h"

namespace tessel::parallel::optimized {

struct DecoderPlanShape {
  bool qk_norm = false;
  // Mixture of experts: the sparse layers' MoE blocks (router and experts)
  // stay whole on every tp rank, so only the dense layers' MLPs are split.
  bool moe = false;
  std::vector<std::string> layer_norms = {"input_layernorm", "post_attention_layernorm"};
};

// Throws tessel::Error when heads or kv heads are not divisible by tp (each
// rank must hold whole heads).
Plan decoder_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options,
                  const DecoderPlanShape& shape);

}  // namespace tessel::parallel::optimized
