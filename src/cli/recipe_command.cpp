// The commands that run a training recipe over the shared loop (`tessel
// train` for SFT, `tessel dpo`; cli/recipe_command.h), each from [CONFIG]
// [OVERRIDES...] [--nproc N].
//
// Launch: under mpirun (or any MPI launcher) the world is what was launched.
// Started directly, a run that wants more than one process (--nproc N, or
// cluster.num_nodes * cluster.gpus_per_node) re-executes itself through
// mpirun with the flags a CPU run needs (cli/self_launch.h), so users never
// need to know mpirun. The config is loaded and checked before launching, so
// a typo fails once, at once, with exit code 2.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/recipe_command.h"
#include "cli/default_config.h"
#include "cli/environment_check.h"
#include "cli/mesh_sizes_from_config.h"
#include "cli/self_launch.h"
#include "config/loader.h"
#include "config/parallelism_config.h"
#include "core/error.h"
#include "core/log.h"
#include "dist/communicator.h"
#include "dist/device_mesh.h"
#include "dist/device_world.h"
#include "dist/mesh_layout.h"

namespace tessel::cli {

namespace {

namespace fs = std::filesystem;

struct RecipeArgs {
  std::vector<std::string> positional;  // [CONFIG] OVERRIDES...
  int nproc = 0;                        // 0: from cluster.*
  std::string mpirun = "mpirun";
  bool print_config = true;
};

fs::path default_recipe_config(const RecipeCommand& command) {
  const fs::path path = default_config_path().parent_path() / command.default_config;
  if (!fs::is_regular_file(path)) {
    throw UsageError(fmt::format("no config given and the default recipe {} is missing; pass a "
                                 "config path, e.g. tessel {} {}",
                                 path.string(), command.name, command.example_config));
  }
  return path;
}

void run_recipe(const RecipeCommand& command, const RecipeArgs& args) {
  const ConfigArgs given = split_config_args(args.positional);
  const std::vector<std::string>& overrides = given.overrides;
  fs::path config_path = given.path;
  if (config_path.empty()) {
    config_path = default_recipe_config(command);
  } else if (!fs::is_regular_file(config_path)) {
    throw UsageError(fmt::format("config file {} not found", config_path.string()));
  }
  const config::Config cfg = config::load_config(config_path, overrides);
  const config::ParallelismConfig parallel = config::parallelism_from(cfg);
  command.check(cfg);           // every key checked before any process starts
  check_tessel_environment();  // and the TESSEL_* settings

  if (!under_mpi_launcher()) {
    const int64_t wanted = args.nproc > 0 ? args.nproc : parallel.world_size();
    // Check the layout for the world about to be launched, before launching it.
    const dist::MeshLayout layout(mesh_sizes_from(parallel, wanted));
    if (wanted > 1) {
      // The children must load exactly this config: pass its absolute path
      // (the default is found relative to the source tree, which they may not
      // see the same way).
      std::vector<std::string> program_args = {command.name, fs::absolute(config_path).string()};
      program_args.insert(program_args.end(), overrides.begin(), overrides.end());
      if (!args.print_config) program_args.push_back("--no-print-config");
      relaunch_self(command.name, program_args, static_cast<int>(wanted), args.mpirun);
    }
  }

  // Each rank's device (cuda:<local rank> where CUDA is present) and the
  // world that moves its tensors (dist/device_world.h).
  const dist::DeviceWorld placed = dist::setup_device_world(dist::world());
  const dist::CommunicatorPtr& world = placed.world;
  const bool rank0 = world->rank() == 0;
  if (rank0 && args.print_config) {
    std::printf("# tessel %s: resolved config (%s%s%s)\n%s# end of config\n", command.name.c_str(),
                config_path.string().c_str(), overrides.empty() ? "" : " ",
                fmt::format("{}", fmt::join(overrides, " ")).c_str(), cfg.to_yaml().c_str());
    std::fflush(stdout);
  }
  if (args.nproc > 0 && args.nproc != world->size() && rank0) {
    log::warn("--nproc {} ignored: already running under an MPI launcher with {} processes",
              args.nproc, world->size());
  } else if (world->size() != parallel.world_size() && rank0) {
    log::info("running on {} processes (cluster.num_nodes * cluster.gpus_per_node = {})",
              world->size(), parallel.world_size());
  }
  if (rank0) {
    for (const auto& line : placed.log_lines) log::info("{}", line);
  }
  const dist::DeviceMesh mesh(dist::MeshLayout(mesh_sizes_from(parallel, world->size())), world,
                              placed.device);
  train::RunOptions run;
  run.interactive = progress_is_terminal();
  command.run(cfg, mesh, run);
}

}  // namespace

void add_recipe_command(CLI::App& app, RecipeCommand command, const std::string& description) {
  auto args = std::make_shared<RecipeArgs>();
  auto shared = std::make_shared<RecipeCommand>(std::move(command));
  CLI::App* cmd = app.add_subcommand(shared->name, description);
  cmd->add_option("config_and_overrides", args->positional,
                  "[CONFIG] then overrides: a.b=v (change), +a.b=v (add), ~a.b (delete)");
  cmd->add_option("--nproc", args->nproc,
                  "number of local processes (default: cluster.num_nodes * cluster.gpus_per_node)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--mpirun", args->mpirun, "the mpirun to launch with (default: mpirun on PATH)");
  cmd->add_flag("!--no-print-config", args->print_config, "do not print the resolved config");
  cmd->callback([args, shared] { run_recipe(*shared, *args); });
}

}  // namespace tessel::cli
