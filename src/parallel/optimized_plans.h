// Optimized tensor-parallel plans, one per architecture family, keyed by the
// HF architecture string (config.json architectures[0]). The builders live in
// optimized_plans/<family>.cpp; each builds the Llama-style plan of SPEC 3
// (vocab-parallel embedding, q/k/v and gate/up colwise, o/down rowwise,
// lm_head colwise with vocab-sharded logits) with or without sequence
// parallelism. A builder throws (e.g. heads not divisible by tp) when the plan
// cannot apply; plan resolution then falls back to the HF plan and logs why.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "models/model_config.h"
#include "parallel/plan.h"

namespace tessel::parallel {

struct OptimizedPlanOptions {
  int64_t tp_size = 1;
  bool sequence_parallel = false;
};

using OptimizedPlanBuilder = std::function<Plan(const models::ModelConfig&, const OptimizedPlanOptions&)>;

// Adds (or replaces) the builder of an architecture.
void register_optimized_plan(const std::string& architecture, OptimizedPlanBuilder builder);
// Removes a registered builder (tests); returns whether one existed.
bool unregister_optimized_plan(const std::string& architecture);
std::optional<OptimizedPlanBuilder> find_optimized_plan(const std::string& architecture);
std::vector<std::string> optimized_plan_architectures();

// The built-in builders (optimized_plans/*.cpp).
Plan llama_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options);
Plan mistral_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options);
Plan qwen2_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options);
Plan qwen3_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options);
Plan gemma3_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options);
Plan qwen3_moe_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options);
Plan mixtral_optimized_plan(const models::ModelConfig& config, const OptimizedPlanOptions& options);

}  // namespace tessel::parallel
