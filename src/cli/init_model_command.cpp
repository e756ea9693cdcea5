// `tessel init-model PRESET OUT_DIR [--seed N] [--dtype D]` and
// `tessel init-model --config path/to/config.json OUT_DIR`: writes a model
// with seeded random weights as a Hugging Face directory (config.json +
// model.safetensors, or shards for large models) that transformers and
// `policy.model_name` both load. PRESET is a built-in preset
// (models/presets.h); --config takes any supported config.json, e.g. the real
// ones in shared/reference/hf_configs, so real-size models can be made. The
// weights are drawn and written one parameter at a time (the model is never
// built), so the memory needed is one parameter, whatever the model's size.
// An unknown preset, a missing config or an unsupported dtype is a usage
// error (exit 2).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "io/safetensors_dtype.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "models/pretrained.h"

namespace tessel::cli {

namespace {

struct InitModelArgs {
  std::string preset;
  std::string config;
  std::string out_dir;
  uint64_t seed = 0;
  std::string dtype = "float32";
};

at::ScalarType parse_dtype(const std::string& name) {
  const auto type = io::floating_type_from_torch_name(name);
  if (!type || *type == at::kDouble) {
    throw UsageError("init-model: --dtype must be float32, bfloat16 or float16, got '" + name + "'");
  }
  return *type;
}

void run_init_model(InitModelArgs args) {
  // init-model OUT --config C: CLI11 puts OUT in the first positional.
  if (!args.config.empty() && args.out_dir.empty()) std::swap(args.preset, args.out_dir);
  if (args.config.empty() == args.preset.empty()) {
    throw UsageError("init-model: give either a preset name or --config path/to/config.json (not both), and OUT_DIR");
  }
  if (args.out_dir.empty()) throw UsageError("init-model: OUT_DIR is required");
  const at::ScalarType dtype = parse_dtype(args.dtype);
  // Validated before anything is written: an unknown preset lists the known ones.
  const models::ModelConfig config =
      args.config.empty() ? models::parse_model_config(models::make_preset_config(args.preset), "preset " + args.preset)
                          : models::load_model_config(args.config);
  const std::filesystem::path out(args.out_dir);
  if (std::filesystem::exists(out) && !std::filesystem::is_directory(out)) {
    throw UsageError("init-model: output path '" + args.out_dir +
                     "' exists and is not a directory; choose a new directory");
  }
  const int64_t params = models::save_initialized(config, args.seed, dtype, out);
  std::printf("wrote %s: %s %s, seed %llu, %lld parameters, %s\n", args.out_dir.c_str(),
              args.config.empty() ? "preset" : "config", args.config.empty() ? args.preset.c_str() : args.config.c_str(),
              static_cast<unsigned long long>(args.seed), static_cast<long long>(params), args.dtype.c_str());
  std::fflush(stdout);
}

}  // namespace

void add_init_model_command(CLI::App& app) {
  auto args = std::make_shared<InitModelArgs>();
  CLI::App* cmd = app.add_subcommand(
      "init-model",
      "Write a model with seeded random weights as a Hugging Face directory (config.json + "
      "safetensors): tessel init-model tiny-llama my_model --seed 1, or tessel init-model --config "
      "path/to/config.json my_model.");
  std::string names;
  for (const auto& n : models::preset_names()) names += (names.empty() ? "" : ", ") + n;
  cmd->add_option("preset", args->preset, "preset name: " + names + " (or use --config)");
  cmd->add_option("out_dir", args->out_dir, "output directory (created)");
  cmd->add_option("--config", args->config, "a Hugging Face config.json (or its directory) instead of a preset");
  cmd->add_option("--seed", args->seed, "initialisation seed (default 0)");
  cmd->add_option("--dtype", args->dtype, "float32 (default), bfloat16 or float16");
  cmd->callback([args] { run_init_model(*args); });
}

}  // namespace tessel::cli
