// The Hugging Face fallback plan (SPEC 3, priority 3): config.json's
// base_model_tp_plan when present, else the architecture's known default
// (transformers' newest plans, shared/reference/hf_tp_plans.json); keys are
// prefixed with the inner model name (`model.`), merged with the head plan
// (`lm_head: colwise_rep`), and `model.embed_tokens: rowwise_rep` is added
// when missing, so the embedding is vocab-parallel.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "models/model_config.h"
#include "parallel/plan.h"

namespace tessel::parallel {

struct HfPlan {
  Plan plan;
  std::string origin;  // "config.json base_model_tp_plan" or "known default for X"
};

// The architecture's default base_model_tp_plan (unprefixed), if known.
std::optional<std::map<std::string, std::string>> known_hf_base_plan(const std::string& architecture);

// Throws tessel::UsageError when config.json has no base_model_tp_plan and
// the architecture has no known default, or the plan is malformed.
HfPlan hf_plan(const models::ModelConfig& config);

}  // namespace tessel::parallel
