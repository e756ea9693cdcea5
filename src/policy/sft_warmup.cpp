#include "policy/sft_warmup.h"

#include <fmt/format.h>

#include "config/loader.h"
#include "core/error.h"
#include "core/log.h"
#include "train/checkpoint.h"
#include "train/train_options.h"

namespace tessel::policy {

namespace fs = std::filesystem;

config::Config sft_warmup_config(const config::Config& grpo_config, const std::string& path) {
  fs::path file = path;
  if (file.is_relative() && !grpo_config.source_path().empty()) {
    file = fs::path(grpo_config.source_path()).parent_path() / file;
  }
  if (!fs::is_regular_file(file)) {
    throw UsageError(fmt::format("sft_warmup: {} is not a file (an SFT recipe, relative to the GRPO config's "
                                 "directory), or set sft_warmup to null for none",
                                 file.string()));
  }
  config::Config sft = config::load_config(file, {});
  // The GRPO run's model and layout: the warm-up trains what GRPO continues.
  sft.set("policy.model_name", grpo_config.at("policy.model_name"));
  for (const char* section : {"policy.dtensor_cfg", "cluster"}) {
    if (const config::Config* node = grpo_config.find(section)) sft.set(section, *node);
  }
  sft.set("checkpointing.enabled", config::Config(true));
  (void)train::train_options_from(sft);  // every key checked before anything runs
  return sft;
}

config::Config run_sft_warmup(const config::Config& grpo_config, const std::string& path,
                              const dist::DeviceMesh& mesh, const train::RunOptions& run) {
  const config::Config sft = sft_warmup_config(grpo_config, path);
  const train::TrainOptions options = train::train_options_from(sft);
  const bool rank0 = mesh.world()->rank() == 0;
  if (rank0) log::info("sft_warmup: {} steps of SFT on '{}' first", options.max_num_steps, options.train_data.name);
  train::train(sft, mesh, run);
  const fs::path model_dir = fs::path(options.checkpoint.dir) / "hf";
  if (rank0) {
    const fs::path step = train::convert_checkpoint_to_hf(options.checkpoint.dir, model_dir);
    log::info("sft_warmup: exported {} as {}; GRPO starts from it", step.string(), model_dir.string());
  }
  mesh.world()->barrier();
  config::Config out = grpo_config;
  out.set("policy.model_name", config::Config(model_dir.string()));
  return out;
}

}  // namespace tessel::policy
