// `tessel train [CONFIG] [OVERRIDES...] [--nproc N]`: supervised fine-tuning
// as the config says (train/trainer.h, the SFT recipe). Without CONFIG it
// runs the built-in default recipe, examples/configs/default.yaml: a tiny
// Llama on the demo SFT set on 4 local processes (HSDP 2x2), about a minute
// on a laptop. Launching and checking: cli/recipe_command.h.
#include "cli/commands.h"
#include "cli/recipe_command.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace tessel::cli {

void add_train_command(CLI::App& app) {
  add_recipe_command(
      app,
      {"train", "default.yaml", "examples/configs/sft.yaml",
       [](const config::Config& c) { (void)train::train_options_from(c); },
       [](const config::Config& c, const dist::DeviceMesh& mesh, const train::RunOptions& run) {
         train::train(c, mesh, run);
       }},
      "Train a model: tessel train [CONFIG] [overrides...] [--nproc N]. Without CONFIG, runs "
      "the built-in default (examples/configs/default.yaml: a tiny Llama on the demo SFT set, "
      "4 processes as HSDP 2x2). More processes than one are started through mpirun "
      "automatically (--nproc N, else cluster.num_nodes * cluster.gpus_per_node); under your "
      "own mpirun the launched world is used. Writes metrics.jsonl, config.yaml, "
      "loss_curve.svg and (logger.tensorboard_enabled) tensorboard/ under logger.log_dir.");
}

}  // namespace tessel::cli
