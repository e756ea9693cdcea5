// GRPO runs for the tests on random tiny models (tests/policy/grpo_test.cpp,
// mpi/grpo_layouts_test.cpp): the whole recipe over the shared loop, quiet,
// rewarded by a rule that differs between the rollouts of one prompt, as a
// task's verifier does between right and wrong answers (the demo tasks'
// exact answers never appear in a random model's output, so exact_match
// would give every advantage 0 and train nothing).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "config/config.h"
#include "config/parallelism_config.h"
#include "dist/device_mesh.h"
#include "policy/grpo_options.h"
#include "policy/grpo_recipe.h"
#include "policy/loss_options.h"
#include "policy/verifier.h"
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

// The GRPO recipe of `c` on `mesh` with ByteSumVerifier's rewards; the last
// step's rollouts in `last` when given.
inline train::TrainResult run_grpo_with_byte_sums(const config::Config& c, const dist::DeviceMesh& mesh,
                                                  Rollouts* last = nullptr) {
  const train::TrainOptions options = train::train_options_from(c, grpo_section());
  GrpoRecipe recipe(options, grpo_options_from(c, options), clipped_pg_options_from(c), config::parallelism_from(c),
                    std::make_unique<ByteSumVerifier>());
  train::RunOptions quiet;
  quiet.quiet = true;
  quiet.write_logs = false;
  train::TrainResult r = train::run_training(c, options, mesh, recipe, quiet);
  if (last != nullptr) *last = recipe.last_rollouts();
  return r;
}

}  // namespace tessel::policy::testing
