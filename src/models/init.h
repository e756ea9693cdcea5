// Deterministic random initialisation from a seed: Linear and Embedding
// weights ~ normal(0, std) (HF's initializer_range, 0.02), biases zero,
// RMSNorm weights at their identity value (ones, or zeros for Gemma's (1 + w)
// norms). Values are drawn in float32 on the CPU from one seeded generator,
// parameter after parameter in module order, so a seed gives the same model
// on every machine and rank.
//
// The recipe (init_recipe) is read off the model's structure alone, so it
// works on a model built on the meta device; InitialValues then produces each
// parameter's full value in turn. A sharded run draws every parameter in the
// same order as one process does and keeps only its own rows, so all layouts
// start from the same values while no rank holds more than one full
// parameter at a time (train/shard_loading.h).
#pragma once

#include <ATen/core/Generator.h>
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "models/causal_lm.h"

namespace tessel::models {

struct ParamInit {
  enum class Kind { Normal, Constant };
  std::string name;            // as in named_parameters()
  std::vector<int64_t> shape;  // the full (unsharded) shape
  Kind kind = Kind::Normal;
  double value = 0.0;  // Normal: the std; Constant: the value
};

// Every parameter of `model` in draw order. The model must be unsharded (its
// parameters have their full shapes); any device, meta included. Tied
// parameters appear once, under their canonical name.
std::vector<ParamInit> init_recipe(CausalLM& model, double std = 0.02);

// The values of a recipe, in order: next() must be called once per entry, in
// recipe order (normal draws advance the generator).
class InitialValues {
 public:
  explicit InitialValues(uint64_t seed);
  // The full fp32 CPU value of `entry`.
  at::Tensor next(const ParamInit& entry);

 private:
  at::Generator generator_;
};

// Fills an unsharded model built on a real device (init_recipe + InitialValues).
void init_weights(CausalLM& model, uint64_t seed, double std = 0.02);

}  // namespace tessel::models
