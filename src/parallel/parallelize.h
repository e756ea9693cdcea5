// parallelize(): applies a plan to a model on the tp group. Each module whose
// path matches a pattern gets that entry's style (the FIRST matching entry
// wins; modules are visited in registration order, so a tied lm_head comes
// after the embedding it reads). Every parameter no style placed is recorded
// as replicated, so the returned registry covers the whole model.
//
// Every rank must start from the same full weights (styles slice them). A
// strict plan (custom plans) must match a module with every pattern; a pattern
// matching nothing is a tessel::UsageError listing the nearest module paths.
#pragma once

#include <string>
#include <vector>

#include <torch/nn/module.h>

#include "dist/communicator.h"
#include "parallel/param_registry.h"
#include "parallel/plan.h"

namespace tessel::parallel {

struct ParallelizeOptions {
  bool strict = false;  // every pattern must match a module
  // colwise_rep / colwise_gather_output on lm_head keep vocab-sharded logits
  // (the loss is vocab-parallel cross-entropy).
  bool vocab_parallel_head = false;
  std::string plan_name = "plan";  // for messages ("custom plan from x.yaml")
};

struct AppliedStyle {
  std::string module_path;
  std::string pattern;
  std::string style;  // describe() of the style object
};

struct ParallelizeResult {
  ParamRegistry params;
  std::vector<AppliedStyle> applied;
};

// The module paths a plan would touch, with the pattern and style that wins,
// without applying anything (for `tessel plan` and tests). Throws like
// parallelize() for unmatched patterns of a strict plan and unknown styles.
std::vector<AppliedStyle> match_plan(torch::nn::Module& root, const Plan& plan, const ParallelizeOptions& options = {});

ParallelizeResult parallelize(torch::nn::Module& root, const dist::CommunicatorPtr& tp_group, const Plan& plan,
                              const ParallelizeOptions& options = {});

}  // namespace tessel::parallel
