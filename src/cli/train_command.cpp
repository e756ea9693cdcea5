// `tessel train [CONFIG] [OVERRIDES...] [--nproc N]`: trains a model as the
// config says (train/trainer.h). Without CONFIG it runs the built-in default
// recipe, examples/configs/default.yaml: a tiny Llama on the demo SFT set on
// 4 local processes (HSDP 2x2), about a minute on a laptop.
//
// Launch: under mpirun (or any MPI launcher) the world is what was launched.
// Started directly, a run that wants more than one process (--nproc N, or
// cluster.num_nodes * cluster.gpus_per_node) re-executes itself through
// mpirun with the flags a CPU run needs (dist/launcher.h), so users never
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

#include "cli/commands.h"
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
#include "train/progress.h"
#include "train/train_options.h"
#include "train/trainer.h"

namespace tessel::cli {

namespace {

namespace fs = std::filesystem;

struct TrainArgs {
  std::vector<std::string> positional;  // [CONFIG] OVERRIDES...
  int nproc = 0;                        // 0: from cluster.*
  std::string mpirun = "mpirun";
  bool print_config = true;
};

fs::path default_train_config() {
  const fs::path path = default_config_path().parent_path() / "default.yaml";
  if (!fs::is_regular_file(path)) {
    throw UsageError(fmt::format("no config given and the default recipe {} is missing; pass a "
                                 "config path, e.g. tessel train examples/configs/sft.yaml",
                                 path.string()));
  }
  return path;
}

void run_train(const TrainArgs& args) {
  const ConfigArgs given = split_config_args(args.positional);
  const std::vector<std::string>& overrides = given.overrides;
  fs::path config_path = given.path;
  if (config_path.empty()) {
    config_path = default_train_config();
  } else if (!fs::is_regular_file(config_path)) {
    throw UsageError(fmt::format("config file {} not found", config_path.string()));
  }
  const config::Config cfg = config::load_config(config_path, overrides);
  const config::ParallelismConfig parallel = config::parallelism_from(cfg);
  (void)train::train_options_from(cfg);  // every key checked before any process starts
  check_tessel_environment();  // and the TESSEL_* settings

  if (!under_mpi_launcher()) {
    const int64_t wanted = args.nproc > 0 ? args.nproc : parallel.world_size();
    // Check the layout for the world about to be launched, before launching it.
    const dist::MeshLayout layout(mesh_sizes_from(parallel, wanted));
    if (wanted > 1) {
      // The children must load exactly this config: pass its absolute path
      // (the default is found relative to the source tree, which they may not
      // see the same way).
      std::vector<std::string> program_args = {"train", fs::absolute(config_path).string()};
      program_args.insert(program_args.end(), overrides.begin(), overrides.end());
      if (!args.print_config) program_args.push_back("--no-print-config");
      relaunch_self("train", program_args, static_cast<int>(wanted), args.mpirun);
    }
  }

  // Each rank's device (cuda:<local rank> where CUDA is present) and the
  // world that moves its tensors (dist/device_world.h).
  const dist::DeviceWorld placed = dist::setup_device_world(dist::world());
  const dist::CommunicatorPtr& world = placed.world;
  const bool rank0 = world->rank() == 0;
  if (rank0 && args.print_config) {
    std::printf("# tessel train: resolved config (%s%s%s)\n%s# end of config\n",
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
  train::train(cfg, mesh, run);
}

}  // namespace

void add_train_command(CLI::App& app) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model: tessel train [CONFIG] [overrides...] [--nproc N]. Without CONFIG, runs "
      "the built-in default (examples/configs/default.yaml: a tiny Llama on the demo SFT set, "
      "4 processes as HSDP 2x2). More processes than one are started through mpirun "
      "automatically (--nproc N, else cluster.num_nodes * cluster.gpus_per_node); under your "
      "own mpirun the launched world is used. Writes metrics.jsonl, config.yaml, "
      "loss_curve.svg and (logger.tensorboard_enabled) tensorboard/ under logger.log_dir.");
  cmd->add_option("config_and_overrides", args->positional,
                  "[CONFIG] then overrides: a.b=v (change), +a.b=v (add), ~a.b (delete)");
  cmd->add_option("--nproc", args->nproc,
                  "number of local processes (default: cluster.num_nodes * cluster.gpus_per_node)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--mpirun", args->mpirun, "the mpirun to launch with (default: mpirun on PATH)");
  cmd->add_flag("!--no-print-config", args->print_config, "do not print the resolved config");
  cmd->callback([args] { run_train(*args); });
}

}  // namespace tessel::cli
