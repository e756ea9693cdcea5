// `tessel plan [CONFIG] [OVERRIDES...]`: resolves the tensor-parallel plan a
// run would use (custom > optimized > HF, SPEC 3) and prints, module by
// module, the pattern that matched and the style it gets. The model is built
// on the meta device (structure only, no memory, no weights read), so this is
// a dry run for models of any size. Bad plans and configs exit with code 2.
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/default_config.h"
#include "config/loader.h"
#include "config/parallelism_config.h"
#include "core/error.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "models/registry.h"
#include "parallel/parallelize.h"
#include "parallel/resolve.h"

namespace tessel::cli {

namespace {

bool looks_like_override(const std::string& arg) {
  return arg.find('=') != std::string::npos || arg.rfind('+', 0) == 0 || arg.rfind('~', 0) == 0;
}

models::ModelConfig model_config_of(const std::string& name) {
  if (std::filesystem::is_directory(name)) return models::load_model_config(name);
  return models::parse_model_config(models::make_preset_config(name), "preset " + name);
}

void run_plan(const std::vector<std::string>& positional) {
  std::vector<std::string> overrides = positional;
  std::string path;
  if (!overrides.empty() && !looks_like_override(overrides.front())) {
    path = overrides.front();
    overrides.erase(overrides.begin());
  } else {
    path = default_config_path().string();
  }
  const config::Config cfg = config::load_config(path, overrides);
  const config::ParallelismConfig par = config::parallelism_from(cfg);
  const std::string model_name = cfg.get<std::string>("policy.model_name");
  const models::ModelConfig model_config = model_config_of(model_name);

  parallel::ResolveOptions ro;
  ro.vocab_parallel_loss = true;  // the trainer's loss consumes vocab-sharded logits
  const parallel::ResolvedPlan resolved = parallel::resolve_parallel_plan(par, model_config, ro);
  std::printf("config: %s\nmodel:  %s (%s)\nplan:   %s\n", path.c_str(), model_name.c_str(),
              model_config.architecture.c_str(), parallel::to_string(resolved.source));
  if (resolved.plan.empty()) {
    std::printf("%s\n", resolved.log_line.c_str());
    return;
  }
  models::BuildOptions meta;
  meta.device = c10::Device(c10::kMeta);
  auto model = models::build_model(model_config, meta);
  const auto applied = parallel::match_plan(*model, resolved.plan, resolved.parallelize_options);
  std::size_t width = 6;
  for (const auto& a : applied) width = std::max(width, a.module_path.size());
  std::printf("\n%-*s  %s\n", static_cast<int>(width), "module", "style  [pattern]");
  for (const auto& a : applied) {
    std::printf("%-*s  %s  [%s]\n", static_cast<int>(width), a.module_path.c_str(), a.style.c_str(),
                a.pattern.c_str());
  }
  std::printf("\nmodules not listed keep whole (replicated) parameters on every tp rank\n");
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto positional = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Print the tensor-parallel plan a run would use, module by module: tessel plan [CONFIG] "
      "[overrides...] (e.g. policy.dtensor_cfg.tensor_parallel_size=2). Resolution order: "
      "custom_parallel_plan, the optimized plan of the architecture, the HF plan.");
  cmd->add_option("config_and_overrides", *positional,
                  "[CONFIG] then overrides: a.b=v (change), +a.b=v (add), ~a.b (delete)");
  cmd->callback([positional] { run_plan(*positional); });
}

}  // namespace tessel::cli
