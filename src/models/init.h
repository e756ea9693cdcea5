// Deterministic random initialisation of a freshly built model from a seed:
// Linear and Embedding weights ~ normal(0, std) (HF's initializer_range,
// 0.02), biases zero, RMSNorm weights at their identity value (ones, or zeros
// for Gemma's (1 + w) norms). Values are drawn in float32 on the CPU from one
// seeded generator, in named_parameters order, then copied to the parameter's
// device and dtype, so a seed gives the same model on every machine and rank.
#pragma once

#include <cstdint>

#include "models/causal_lm.h"

namespace tessel::models {

void init_weights(CausalLM& model, uint64_t seed, double std = 0.02);

}  // namespace tessel::models
