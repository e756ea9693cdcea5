// Attention under tensor parallelism runs on this rank's heads, so a plan
// that splits q/k/v projections over tp only works when every rank gets whole
// query heads and whole key/value heads. The optimized plans check this when
// they are built; HF and custom plans do not know about heads, so the check
// runs on the applied result (the trainer and `tessel plan` call it).
#pragma once

#include "models/model_config.h"
#include "parallel/param_registry.h"

namespace tessel::parallel {

// tessel::UsageError naming the head counts, tp and the first split
// projection when a q/k/v projection is split over tp and the heads are not
// divisible by tp_size.
void check_whole_heads(const models::ModelConfig& config, const ParamRegistry& params, int tp_size);

}  // namespace tessel::parallel
