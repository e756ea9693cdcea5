// GRPO runs for the tests on random tiny models (tests/policy/grpo_test.cpp,
// mpi/grpo_layouts_test.cpp): the whole recipe over the shared loop, quiet,
// rewarded by a rule that differs between the rollouts of one prompt, as a
// task's verifier does between right and wrong answers (the demo tasks'
// exact answers never appear in a random model's output, so exact_match
// would give every advantage 0 and train nothing).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/loader.h"
#include "config/parallelism_config.h"
#include "dist/device_mesh.h"
#include "policy/grpo_options.h"
#include "policy/grpo_recipe.h"
#include "policy/loss_options.h"
#include "policy/verifier.h"
#include "support/source_tree.h"
#include "train/trainer.h"

namespace tessel::policy::testing {

// 0, 0.5 or 1 from the sum of the response's bytes.
class ByteSumVerifier : public Verifier {
 public:
  std::string name() const override { return "byte_sum"; }
  double reward(const std::string& response, const std::string&) const override {
    int64_t sum = 0;
    for (unsigned char c : response) sum += c;
    return static_cast<double>(sum % 3) / 2.0;
  }
};

// examples/configs/grpo.yaml for three short steps of tiny-llama (2 prompts x
// 4 sampled rollouts of 6 tokens, micro batches of 2), then `extra` (a
// layout's keys; later ones win).
inline config::Config three_step_grpo_config(const std::vector<std::string>& extra) {
  std::vector<std::string> o = {
      "policy.model_name=tiny-llama", "grpo.num_prompts_per_step=2",
      "grpo.num_generations_per_prompt=4", "grpo.max_num_steps=3", "grpo.val_period=0",
      "grpo.val_at_start=false", "grpo.val_at_end=false", "policy.train_micro_batch_size=2",
      "policy.logprob_batch_size=1", "policy.max_total_sequence_length=32",
      "policy.generation.max_new_tokens=6", "policy.generation.temperature=0.9",
      "policy.generation.top_p=0.95", "policy.optimizer.kwargs.lr=0.003",
      // AdamW's first steps move a weight by about lr x sign(gradient): with grpo.yaml's
      // eps of 1e-8 a gradient at rounding level (~1e-9, where layouts sum differently)
      // would decide a step of 0.003; the SFT recipe's 1e-5 keeps such weights still.
      "policy.optimizer.kwargs.eps=1e-5", "policy.scheduler=null",
      "loss_fn.reference_policy_kl_penalty=0.05", "loss_fn.ratio_clip_c=3.0",
      "checkpointing.enabled=false", "data.validation=null"};
  o.insert(o.end(), extra.begin(), extra.end());
  return config::load_config(test_support::source_tree() / "examples" / "configs" / "grpo.yaml", o);
}

// The step metrics that describe a run's speed or its layout's memory, not
// its computation: left out where runs are compared.
inline const std::set<std::string>& timing_or_layout_metrics() {
  static const std::set<std::string> names = {
      "generation_tokens_per_s", "refit_s",     "generation_s", "rollout_s", "logprobs_s",
      "decoding_weight_mib",     "kv_cache_mib"};
  return names;
}

// How close two runs' steps must be: loss and computed metrics within
// `relative` x max(`floor`, |reference|), gradient norms within
// `grad_norm` x reference + `grad_norm_abs`.
struct StepTolerance {
  double loss = 0;
  double grad_norm = 0;
  double metric = 0;
  double floor = 1.0;
  double grad_norm_abs = 0;
};

// Each step of `got` against `ref`: loss, gradient norm, valid tokens (equal)
// and every objective metric but the timing ones, named alike and in order.
inline void expect_steps_close(const std::vector<train::StepMetrics>& got,
                               const std::vector<train::StepMetrics>& ref, const std::string& what,
                               const StepTolerance& tol) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t s = 0; s < ref.size(); ++s) {
    const auto &g = got[s], &r = ref[s];
    EXPECT_NEAR(g.loss, r.loss, tol.loss * std::max(tol.floor, std::abs(r.loss)))
        << what << " step " << s + 1;
    EXPECT_NEAR(g.grad_norm, r.grad_norm, tol.grad_norm * r.grad_norm + tol.grad_norm_abs)
        << what << " step " << s + 1;
    EXPECT_EQ(g.valid_tokens, r.valid_tokens) << what << " step " << s + 1;
    ASSERT_EQ(g.objective_metrics.size(), r.objective_metrics.size()) << what;
    for (size_t i = 0; i < r.objective_metrics.size(); ++i) {
      const auto& [name, value] = r.objective_metrics[i];
      EXPECT_EQ(g.objective_metrics[i].first, name) << what;
      if (timing_or_layout_metrics().count(name) != 0) continue;
      EXPECT_NEAR(g.objective_metrics[i].second, value,
                  tol.metric * std::max(tol.floor, std::abs(value)))
          << what << " step " << s + 1 << " " << name;
    }
  }
}

// The GRPO recipe of `c` on `mesh` with ByteSumVerifier's rewards; the last
// step's rollouts in `last` when given.
inline train::TrainResult run_grpo_with_byte_sums(const config::Config& c,
                                                  const dist::DeviceMesh& mesh,
                                                  Rollouts* last = nullptr) {
  const train::TrainOptions options = train::train_options_from(c, grpo_section());
  GrpoRecipe recipe(options, grpo_options_from(c, options), clipped_pg_options_from(c),
                    config::parallelism_from(c), std::make_unique<ByteSumVerifier>());
  train::RunOptions quiet;
  quiet.quiet = true;
  quiet.write_logs = false;
  train::TrainResult r = train::run_training(c, options, mesh, recipe, quiet);
  if (last != nullptr) *last = recipe.last_rollouts();
  return r;
}

}  // namespace tessel::policy::testing
