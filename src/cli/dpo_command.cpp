// `tessel dpo [CONFIG] [OVERRIDES...] [--nproc N]`: Direct Preference
// Optimization as NeMo RL's DPO recipe lays it out (dpo.*, policy.*, data.*;
// policy/dpo_recipe.h), on any layout. Without CONFIG it runs
// examples/configs/dpo_default.yaml: a tiny Llama on the demo preference set,
// where the preference accuracy rises and the reward margin widens within a
// few minutes on 2 cores. Launching and checking: cli/recipe_command.h.
#include "cli/commands.h"
#include "cli/recipe_command.h"
#include "policy/dpo_recipe.h"
#include "policy/loss_options.h"

namespace tessel::cli {

void add_dpo_command(CLI::App& app) {
  add_recipe_command(
      app,
      {"dpo", "dpo_default.yaml", "examples/configs/dpo.yaml",
       [](const config::Config& c) {
         (void)train::train_options_from(c, policy::dpo_section());
         (void)policy::dpo_options_from(c);
       },
       [](const config::Config& c, const dist::DeviceMesh& mesh, const train::RunOptions& run) {
         policy::train_dpo(c, mesh, run);
       }},
      "Train a policy with DPO on preference pairs: tessel dpo [CONFIG] [overrides...] [--nproc N]. CONFIG follows "
      "NeMo RL's DPO recipe (dpo.*, policy.*, data.*; examples/configs/dpo.yaml); the data are .jsonl lines "
      "{\"prompt\", \"chosen\", \"rejected\"}. Without CONFIG, runs examples/configs/dpo_default.yaml (a tiny "
      "Llama on the demo preference set, 2 processes). Logs the preference accuracy and reward margin per step; "
      "writes metrics.jsonl, config.yaml and loss_curve.svg under logger.log_dir.");
}

}  // namespace tessel::cli
