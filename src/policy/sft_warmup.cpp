#include "policy/sft_warmup.h"

#include <fmt/format.h>

#include "config/loader.h"
#include "core/error.h"
#include "core/log.h"
#include "train/hf_export.h"
#include "train/resume_point.h"
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
  // Each saved step then holds its model as an HF directory, written by the
  // ranks from their shards: GRPO starts from the last one.
  sft.set("checkpointing.save_consolidated", config::Config(true));
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
  const std::optional<fs::path> step = train::agreed_latest_checkpoint(options.checkpoint.dir, *mesh.world());
  TESSEL_CHECK(step.has_value(), "sft_warmup: the warm-up left no checkpoint in {}", options.checkpoint.dir);
  const fs::path model_dir = *step / train::kConsolidatedDirName;
  // A step saved before save_consolidated was set (a warm-up run by an older
  // tessel) has no HF directory yet: rank 0 exports it from the checkpoint.
  if (rank0 && !fs::is_directory(model_dir)) (void)train::export_checkpoint(*step, model_dir, train::HfExportOptions{});
  mesh.world()->barrier();
  if (rank0) log::info("sft_warmup: GRPO starts from {}", model_dir.string());
  config::Config out = grpo_config;
  out.set("policy.model_name", config::Config(model_dir.string()));
  return out;
}

}  // namespace tessel::policy
