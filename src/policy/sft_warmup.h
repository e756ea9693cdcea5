// A GRPO run's SFT warm-up (`sft_warmup: PATH`, tessel's key): RL from a
// random model finds no reward to learn from, so a run may first teach the
// task's format with SFT. PATH names an SFT recipe (relative paths from the
// GRPO config's directory); it trains the GRPO config's policy.model_name on
// the GRPO run's layout (its policy.dtensor_cfg and cluster) with
// checkpointing.save_consolidated on, and GRPO starts from the Hugging Face
// directory of its last saved step (<checkpoint_dir>/step_<N>/consolidated).
// A second run of the same config resumes the finished warm-up (no steps)
// and starts GRPO from the same directory.
#pragma once

#include <filesystem>
#include <string>

#include "config/config.h"
#include "dist/device_mesh.h"
#include "train/trainer.h"

namespace tessel::policy {

// The warm-up's SFT config as it will run, every key checked (UsageError
// naming the file when it is missing).
config::Config sft_warmup_config(const config::Config& grpo_config, const std::string& path);

// Runs the warm-up and returns the GRPO config starting from its model.
// Collective over the mesh.
config::Config run_sft_warmup(const config::Config& grpo_config, const std::string& path,
                              const dist::DeviceMesh& mesh, const train::RunOptions& run);

}  // namespace tessel::policy
