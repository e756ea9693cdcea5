// The training loop every algorithm shares (SPEC 6), as a library call so
// tests drive exactly what the CLI runs: from a resolved config and a device
// mesh it builds and shards the model (model_setup.h), lets the algorithm's
// recipe (recipe.h: SFT, DPO) load its data, runs max_num_steps optimizer
// steps of the recipe's objective (train_step.h) with the LR schedule,
// validates every <algorithm>.val_period steps, checkpoints and resumes, and
// reports: progress on stdout, metrics.jsonl, config.yaml, loss_curve.svg and
// (logger.tensorboard_enabled) TensorBoard event files under logger.log_dir
// (rank 0 only). train() is `tessel train`: the SFT recipe.
//
// Collective over the mesh: every rank calls it with the same config.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <vector>

#include "config/config.h"
#include "dist/device_mesh.h"
#include "train/metrics.h"
#include "train/model_setup.h"
#include "train/recipe.h"
#include "train/train_options.h"

namespace tessel::train {

struct RunOptions {
  std::FILE* progress_out = stdout;   // rank 0's progress and summary lines
  std::optional<bool> interactive;    // redraw one line; default: progress_out is a terminal
  bool quiet = false;                 // no progress output at all (tests)
  bool write_logs = true;             // metrics.jsonl, config.yaml, loss_curve.svg, tensorboard/
};

struct TrainResult {
  std::vector<StepMetrics> steps;      // every rank gets the same values
  std::vector<ValMetrics> validations;
  int64_t total_steps = 0;
  ShardedModel model;                  // the trained (sharded) model
};

// `options` is what train_options_from made of `config` for the recipe's
// algorithm section.
TrainResult run_training(const config::Config& config, const TrainOptions& options, const dist::DeviceMesh& mesh,
                         Recipe& recipe, const RunOptions& run = {});

// SFT (train/sft_recipe.h) on the config's sft.*, policy.* and data.*.
TrainResult train(const config::Config& config, const dist::DeviceMesh& mesh,
                  const RunOptions& run = {});

}  // namespace tessel::train
