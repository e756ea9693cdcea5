// `tessel plan [CONFIG] [OVERRIDES...] [--world N] [--json] [--verbose]`: a
// dry run of the layout a training run would use. It validates the device
// mesh for N processes, resolves the tensor-parallel plan (custom > optimized
// > HF, SPEC 3), prints the modules the plan touches with their styles (the
// same module of every layer on one line, layer_groups.h; --verbose: one line
// per module), and the parameter bytes every rank would hold once tensor
// parallelism and FSDP have split the model. The model is built on the meta
// device and the plan is applied once per tp rank over a shape-only group, so
// this costs no memory and launches no processes, for models of any size.
// Every problem (mesh, plan, pattern matching nothing, unknown style, heads
// not divisible by tp) exits with 2.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/default_config.h"
#include "cli/layer_groups.h"
#include "cli/mesh_sizes_from_config.h"
#include "config/loader.h"
#include "config/parallelism_config.h"
#include "core/error.h"
#include "dist/mesh_layout.h"
#include "dist/shape_only_communicator.h"
#include "models/model_config.h"
#include "models/presets.h"
#include "models/registry.h"
#include "parallel/head_split.h"
#include "parallel/parallelize.h"
#include "parallel/resolve.h"
#include "tensor/chunking.h"

namespace tessel::cli {

namespace {

struct PlanArgs {
  std::vector<std::string> positional;
  int64_t world = 0;  // 0: cluster.num_nodes * cluster.gpus_per_node
  bool json = false;
  bool verbose = false;  // one line per module instead of one per group of layers
};

models::ModelConfig model_config_of(const std::string& name) {
  if (std::filesystem::is_directory(name)) return models::load_model_config(name);
  return models::parse_model_config(models::make_preset_config(name), "preset " + name);
}

// The shapes of one tp rank's parameters after the plan (each tied tensor once).
using Shapes = std::vector<std::vector<int64_t>>;

struct TpRankView {
  Shapes shapes;
  std::vector<parallel::AppliedStyle> applied;
  int64_t model_elements = 0;  // of the whole model, before the plan
};

// The shapes of `model`'s parameters, each tied tensor once.
Shapes parameter_shapes(const torch::nn::Module& model) {
  Shapes out;
  std::set<const void*> seen;
  for (const auto& p : model.parameters()) {
    if (seen.insert(p.unsafeGetTensorImpl()).second) out.emplace_back(p.sizes().begin(), p.sizes().end());
  }
  return out;
}

TpRankView apply_as_tp_rank(const models::ModelConfig& config, const parallel::ResolvedPlan& resolved, int tp, int r) {
  models::BuildOptions meta;
  meta.device = c10::Device(c10::kMeta);
  auto model = models::build_model(config, meta);
  TpRankView view;
  for (const auto& shape : parameter_shapes(*model)) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    view.model_elements += n;
  }
  if (!resolved.plan.empty()) {
    auto group = std::make_shared<dist::ShapeOnlyCommunicator>(tp, r, "tp");
    auto result = parallel::parallelize(*model, group, resolved.plan, resolved.parallelize_options);
    parallel::check_whole_heads(config, result.params, tp);
    view.applied = std::move(result.applied);
  }
  view.shapes = parameter_shapes(*model);
  return view;
}

struct RankBytes {
  int64_t elements = 0;       // this rank's share of the parameters
  int64_t padded_bytes = 0;   // fp32 bytes FSDP allocates for them (dim 0 padded to equal shards)
};

// FSDP chunks dim 0 of each tp-local tensor over the shard group like
// torch.chunk and pads every rank's chunk to ceil(dim0 / shard_size) rows.
RankBytes fsdp_share(const Shapes& shapes, int shard_size, int shard_rank) {
  RankBytes b;
  for (const auto& shape : shapes) {
    const int64_t dim0 = shape.empty() ? 1 : shape[0];
    int64_t row = 1;
    for (size_t i = 1; i < shape.size(); ++i) row *= shape[i];
    b.elements += tensor::chunk_size(dim0, shard_size, shard_rank) * row;
    b.padded_bytes += (dim0 + shard_size - 1) / shard_size * row * 4;
  }
  return b;
}

void run_plan(const PlanArgs& args) {
  const ConfigArgs given = split_config_args(args.positional);
  const std::string path = (given.path.empty() ? default_config_path() : given.path).string();
  const config::Config cfg = config::load_config(path, given.overrides);
  const config::ParallelismConfig par = config::parallelism_from(cfg);
  const int64_t world = args.world > 0 ? args.world : par.world_size();
  const dist::MeshLayout layout(mesh_sizes_from(par, world));
  const std::string model_name = cfg.get<std::string>("policy.model_name");
  const models::ModelConfig model_config = model_config_of(model_name);

  parallel::ResolveOptions ro;
  ro.vocab_parallel_loss = true;  // the trainer's loss consumes vocab-sharded logits
  ro.log = false;                 // printed below with the rest of the report
  const auto dims = layout.dims();
  const int tp = dims[3];
  const int shard_size = dims[1] * dims[2];
  parallel::ResolvedPlan resolved;
  std::vector<TpRankView> views;
  try {
    resolved = parallel::resolve_parallel_plan(layout, par, model_config, ro);
    for (int r = 0; r < tp; ++r) views.push_back(apply_as_tp_rank(model_config, resolved, tp, r));
  } catch (const UsageError&) {
    throw;
  } catch (const Error& e) {
    throw UsageError(e.what());  // a bad plan is the user's input, like a bad config
  }

  const int64_t model_elements = views.front().model_elements;

  nlohmann::json ranks = nlohmann::json::array();
  for (int rank = 0; rank < layout.world_size(); ++rank) {
    const auto c = layout.coordinate(rank);
    const int shard_rank = c[1] * dims[2] + c[2];
    const RankBytes b = fsdp_share(views.at(static_cast<size_t>(c[3])).shapes, shard_size, shard_rank);
    ranks.push_back({{"rank", rank},
                     {"dp_replicate", c[0]},
                     {"dp_shard", c[1]},
                     {"cp", c[2]},
                     {"tp", c[3]},
                     {"param_elements", b.elements},
                     {"param_bytes", b.elements * 4},
                     {"padded_param_bytes", b.padded_bytes}});
  }
  const auto& applied = views.front().applied;

  if (args.json) {
    nlohmann::json out;
    out["config"] = path;
    out["model"] = model_name;
    out["architecture"] = model_config.architecture;
    out["world_size"] = layout.world_size();
    out["mesh"] = {{"dp_replicate", dims[0]}, {"dp_shard", dims[1]}, {"cp", dims[2]}, {"tp", dims[3]},
                   {"describe", layout.describe()}};
    out["plan"] = {{"source", parallel::to_string(resolved.source)}, {"reason", resolved.log_line}};
    nlohmann::json modules = nlohmann::json::array();
    for (const auto& a : applied) modules.push_back({{"module", a.module_path}, {"style", a.style}, {"pattern", a.pattern}});
    out["modules"] = modules;
    out["model_param_elements"] = model_elements;
    out["model_param_bytes"] = model_elements * 4;
    out["ranks"] = ranks;
    std::printf("%s\n", out.dump(2).c_str());
    return;
  }

  std::printf("config: %s\nmodel:  %s (%s), %lld parameters\nmesh:   %s\nplan:   %s\n", path.c_str(),
              model_name.c_str(), model_config.architecture.c_str(), static_cast<long long>(model_elements),
              layout.describe().c_str(), parallel::to_string(resolved.source));
  std::printf("%s\n", resolved.log_line.c_str());
  if (!applied.empty()) {
    std::vector<ModuleLine> lines;
    for (const auto& a : applied) lines.push_back({a.module_path, a.style, a.pattern});
    if (!args.verbose) lines = group_layers(lines);
    std::size_t width = 6;
    for (const auto& l : lines) width = std::max(width, l.modules.size());
    std::printf("\n%-*s  %s\n", static_cast<int>(width), "module", "style  [pattern]");
    for (const auto& l : lines) {
      std::printf("%-*s  %s  [%s]\n", static_cast<int>(width), l.modules.c_str(), l.style.c_str(),
                  l.pattern.c_str());
    }
    std::printf("\nmodules not listed keep whole (replicated) parameters on every tp rank\n");
  }
  // Ranks with the same tp and shard coordinates hold the same bytes: one
  // line per distinct pair, listing its ranks.
  std::map<std::pair<int, int>, std::vector<int>> same;
  for (const auto& r : ranks) same[{r["tp"].get<int>(), r["dp_shard"].get<int>() * dims[2] + r["cp"].get<int>()}].push_back(r["rank"].get<int>());
  std::printf("\nparameters per rank (fp32; FSDP pads each rank's shard to equal size):\n");
  for (const auto& [coord, members] : same) {
    const auto& r = ranks[static_cast<size_t>(members.front())];
    std::printf("  tp %d, shard %d (ranks %s): %lld parameters, %lld bytes (%lld padded)\n", coord.first,
                coord.second, fmt::format("{}", fmt::join(members, ",")).c_str(),
                static_cast<long long>(r["param_elements"].get<int64_t>()),
                static_cast<long long>(r["param_bytes"].get<int64_t>()),
                static_cast<long long>(r["padded_param_bytes"].get<int64_t>()));
  }
}

}  // namespace

void add_plan_command(CLI::App& app) {
  auto args = std::make_shared<PlanArgs>();
  CLI::App* cmd = app.add_subcommand(
      "plan",
      "Dry run of a run's layout: tessel plan [CONFIG] [overrides...] [--world N] [--json] "
      "[--verbose]. "
      "Validates the mesh, resolves the tensor-parallel plan (custom_parallel_plan, then the "
      "architecture's optimized plan, then the HF plan), and prints each module's style and "
      "every rank's parameter bytes. Problems exit with code 2.");
  cmd->add_option("config_and_overrides", args->positional,
                  "[CONFIG] then overrides: a.b=v (change), +a.b=v (add), ~a.b (delete)");
  cmd->add_option("--world", args->world,
                  "number of processes (default: cluster.num_nodes * cluster.gpus_per_node)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", args->json, "print one JSON object instead of text");
  cmd->add_flag("--verbose", args->verbose,
                "list every module on its own line (default: the same module of consecutive "
                "layers with the same style on one line, e.g. model.layers.{0..15}.mlp.up_proj)");
  cmd->callback([args] { run_plan(*args); });
}

}  // namespace tessel::cli
