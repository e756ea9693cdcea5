// Which tensor-parallel plan a run uses (SPEC 3): custom > optimized > HF.
// Only with tp > 1; a custom plan given with tp == 1 is reported and ignored.
// Logs exactly one line (unless ResolveOptions::log is false) saying which
// plan was chosen, from where, and why the earlier ones were not. When none
// applies: tessel::UsageError suggesting tp 1 or a custom plan.
#pragma once

#include <string>

#include "config/parallelism_config.h"
#include "dist/mesh_layout.h"
#include "models/model_config.h"
#include "parallel/parallelize.h"
#include "parallel/plan.h"

namespace tessel::parallel {

enum class PlanSource { None, Custom, Optimized, HuggingFace };
const char* to_string(PlanSource source);

struct ResolveOptions {
  // The loss is vocab-parallel cross-entropy, so the HF head (`lm_head:
  // colwise_rep`) keeps its logits vocab-sharded instead of gathering them.
  bool vocab_parallel_loss = false;
  // false: the caller reports ResolvedPlan::log_line itself (`tessel plan`
  // prints it on stdout; logging it too would show it twice).
  bool log = true;
};

struct ResolvedPlan {
  PlanSource source = PlanSource::None;
  Plan plan;  // empty for None
  ParallelizeOptions parallelize_options;  // strict for custom plans
  std::string log_line;                    // what was logged
};

// The tp size comes from the mesh (the one validated authority on layout);
// `choices` gives only what the plan depends on besides it: the custom plan,
// sequence_parallel and the config file custom plan paths are relative to.
ResolvedPlan resolve_parallel_plan(const dist::MeshLayout& mesh, const config::ParallelismConfig& choices,
                                   const models::ModelConfig& model, const ResolveOptions& options = {});

}  // namespace tessel::parallel
