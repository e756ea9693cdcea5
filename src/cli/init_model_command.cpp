// `tessel init-model PRESET OUT_DIR [--seed N]`: writes a built-in preset
// (models/presets.h) as a Hugging Face model directory (config.json +
// model.safetensors), deterministically initialised from the seed, so
// examples and tests start from a real checkpoint that transformers and
// `policy.model_name` both load. An unknown preset is a usage error (exit 2)
// that lists the known presets.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "models/presets.h"
#include "models/pretrained.h"

namespace tessel::cli {

namespace {

struct InitModelArgs {
  std::string preset;
  std::string out_dir;
  uint64_t seed = 0;
};

void run_init_model(const InitModelArgs& args) {
  // Validates the name first (UsageError listing the presets) before anything
  // is built or written.
  models::make_preset_config(args.preset);
  const std::filesystem::path out(args.out_dir);
  if (std::filesystem::exists(out) && !std::filesystem::is_directory(out)) {
    throw UsageError("init-model: output path '" + args.out_dir +
                     "' exists and is not a directory; choose a new directory");
  }
  const auto model = models::create_preset_model(args.preset, args.seed);
  models::save_pretrained(*model, out);
  int64_t params = 0;
  for (const auto& item : model->named_parameters()) params += item.value().numel();
  std::printf("wrote %s: preset %s, seed %llu, %lld parameters\n", args.out_dir.c_str(),
              args.preset.c_str(), static_cast<unsigned long long>(args.seed),
              static_cast<long long>(params));
  std::fflush(stdout);
}

}  // namespace

void add_init_model_command(CLI::App& app) {
  auto args = std::make_shared<InitModelArgs>();
  CLI::App* cmd =
      app.add_subcommand("init-model",
                         "Write a built-in model preset as a Hugging Face directory (config.json + "
                         "model.safetensors): tessel init-model tiny-llama my_model --seed 1.");
  std::string names;
  for (const auto& n : models::preset_names()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("preset", args->preset, "preset name: " + names)->required();
  cmd->add_option("out_dir", args->out_dir, "output directory (created)")->required();
  cmd->add_option("--seed", args->seed, "initialisation seed (default 0)");
  cmd->callback([args] { run_init_model(*args); });
}

}  // namespace tessel::cli
