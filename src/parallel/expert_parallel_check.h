// Whether a model can train with expert_parallel_size = ep (SPEC 2): only a
// mixture-of-experts model has experts to split, and each MoE layer's experts
// must split evenly over the ep group (rank j holds experts
// [j*E/ep, (j+1)*E/ep)). Throws tessel::UsageError naming the key and the fix.
#pragma once

#include "models/model_config.h"

namespace tessel::parallel {

void check_expert_parallel(int ep, const models::ModelConfig& config);

}  // namespace tessel::parallel
