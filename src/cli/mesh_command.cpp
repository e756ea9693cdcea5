// `tessel mesh [CONFIG] [OVERRIDES...] [--world N] [--json]`: loads a config,
// builds and validates the device mesh for a world size, and prints every
// dim's size and every named group's rank lists — a dry run of the layout
// that needs no MPI and no model, so a bad layout is caught before a job is
// queued on many machines. With cluster.num_nodes > 1 the text also draws the
// nodes and which groups cross them (node_picture.h). Invalid layouts and
// configs exit with code 2.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/context_split.h"
#include "cli/default_config.h"
#include "cli/mesh_sizes_from_config.h"
#include "cli/node_picture.h"
#include "config/loader.h"
#include "config/parallelism_config.h"
#include "dist/mesh_layout.h"

namespace tessel::cli {

namespace {

struct MeshArgs {
  std::vector<std::string> positional;  // [CONFIG] OVERRIDES...
  std::optional<int64_t> world;         // unset: from cluster.*
  bool json = false;
};

std::string rank_list(const std::vector<int>& ranks) {
  return fmt::format("{{{}}}", fmt::join(ranks, ","));
}

// The dense dims along which the members of one group of `name` differ: how
// a MoE-mesh group sits in the dense mesh (every group of a name spans the same dims).
std::vector<std::string> dense_dims_spanned(const dist::MeshLayout& layout, const std::string& name) {
  const std::vector<int> members = layout.groups(name).front();
  std::vector<std::string> dims;
  for (int d = 0; d < dist::kNumMeshDims; ++d) {
    for (int m : members) {
      if (layout.coordinate(m)[d] != layout.coordinate(members.front())[d]) {
        dims.emplace_back(dist::to_string(static_cast<dist::MeshDim>(d)));
        break;
      }
    }
  }
  return dims;
}

std::string spanned_text(const std::vector<std::string>& dims) {
  return dims.empty() ? std::string("no dense dim (one rank)") : fmt::format("{}", fmt::join(dims, ", "));
}

void print_text(const dist::MeshLayout& layout, const std::string& config_path) {
  std::printf("config: %s\n", config_path.c_str());
  std::printf("mesh:   %s\n", layout.describe().c_str());
  std::printf("moe:    %s\n", layout.describe_moe().c_str());
  std::printf("dp_size %d  (world %d / (tp %d * cp %d): the batch split)\n", layout.dp_size(), layout.world_size(),
              layout.sizes().tp, layout.sizes().cp);
  std::printf("seed dp_size %d  (world %d / (tp %d * cp %d * ep %d): dp_replicate_size divides it)\n",
              layout.seed_dp_size(), layout.world_size(), layout.sizes().tp, layout.sizes().cp, layout.sizes().ep);
  std::printf("ep groups span %s; ep_shard groups span %s (experts split over ep, FSDP-sharded over "
              "ep_shard; dense parameters over dp_shard_cp)\n\n",
              spanned_text(dense_dims_spanned(layout, "ep")).c_str(),
              spanned_text(dense_dims_spanned(layout, "ep_shard")).c_str());
  std::printf("%-13s %5s\n", "dim", "size");
  for (int d = 0; d < dist::kNumMeshDims; ++d) {
    const auto dim = static_cast<dist::MeshDim>(d);
    std::printf("%-13s %5d\n", dist::to_string(dim), layout.dim_size(dim));
  }
  std::printf("\n%-13s %5s %7s  %s\n", "group", "size", "groups", "ranks");
  for (const auto& spec : dist::MeshLayout::group_specs()) {
    const auto groups = layout.groups(spec.name);
    std::vector<std::string> lists;
    for (const auto& g : groups) lists.push_back(rank_list(g));
    std::printf("%-13s %5d %7zu  %s\n", spec.name.c_str(), layout.size(spec.name), groups.size(),
                fmt::format("{}", fmt::join(lists, " ")).c_str());
  }
}

void print_json(const dist::MeshLayout& layout, const std::string& config_path,
                const std::optional<ContextSplit>& split) {
  nlohmann::ordered_json out;
  out["config"] = config_path;
  out["world_size"] = layout.world_size();
  out["dp_size"] = layout.dp_size();
  out["seed_dp_size"] = layout.seed_dp_size();
  nlohmann::ordered_json dims;
  for (int d = 0; d < dist::kNumMeshDims; ++d) {
    const auto dim = static_cast<dist::MeshDim>(d);
    dims[dist::to_string(dim)] = layout.dim_size(dim);
  }
  out["dims"] = dims;
  nlohmann::ordered_json groups;
  for (const auto& spec : dist::MeshLayout::group_specs()) {
    groups[spec.name] = layout.groups(spec.name);
  }
  out["groups"] = groups;
  out["moe"] = {{"ep", layout.ep()},
                {"ep_shard", layout.ep_shard()},
                {"ep_spans", dense_dims_spanned(layout, "ep")},
                {"ep_shard_spans", dense_dims_spanned(layout, "ep_shard")}};
  if (split) out["context_parallel"] = to_json(*split);
  std::printf("%s\n", out.dump().c_str());
}

void run_mesh(const MeshArgs& args) {
  const ConfigArgs given = split_config_args(args.positional);
  const std::string config_path = (given.path.empty() ? default_config_path() : given.path).string();
  const config::Config cfg = config::load_config(config_path, given.overrides);
  const config::ParallelismConfig parallel = config::parallelism_from(cfg);
  const dist::MeshLayout layout(mesh_sizes_from(parallel, args.world));
  // How rows are cut over cp, for the configured row length.
  std::optional<ContextSplit> split;
  if (const auto seq = cfg.get_or<std::optional<int64_t>>("policy.max_total_sequence_length", std::nullopt)) {
    split = context_split(layout.size("cp"), *seq);
  }
  if (args.json) {
    print_json(layout, config_path, split);
  } else {
    print_text(layout, config_path);
    if (split && split->cp > 1) std::printf("\n%s", describe(*split).c_str());
    if (parallel.num_nodes > 1) {
      std::printf("\n%s", node_picture(layout, parallel.num_nodes).c_str());
    }
  }
  std::fflush(stdout);
}

}  // namespace

void add_mesh_command(CLI::App& app) {
  auto args = std::make_shared<MeshArgs>();
  CLI::App* cmd = app.add_subcommand(
      "mesh",
      "Validate a parallel layout and print the device mesh: the size of every dim and the "
      "ranks of every group (tp, cp, dp_replicate, dp_shard, dp_shard_cp, dp, dp_cp, and the MoE mesh's ep_shard, ep). Needs no "
      "MPI. Without CONFIG, uses examples/configs/sft.yaml of the source tree (found via "
      "$TESSEL_SOURCE_DIR, the current directory or the binary's location, searching upward).");
  cmd->add_option("config_and_overrides", args->positional,
                   "[CONFIG] then overrides: a.b=v (change), +a.b=v (add), ~a.b (delete)");
  auto world = std::make_shared<int64_t>(0);
  CLI::Option* world_opt = cmd->add_option(
      "--world", *world, "world size (default: cluster.num_nodes * cluster.gpus_per_node)");
  cmd->add_flag("--json", args->json, "print one JSON object instead of a table");
  cmd->callback([args, world, world_opt] {
    if (world_opt->count() > 0) args->world = *world;
    run_mesh(*args);
  });
}

}  // namespace tessel::cli
