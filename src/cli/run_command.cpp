// `tessel run -n N [--hostfile F] [--mpirun PATH] -- ARGS...`: starts N ranks
// of this same tessel binary through mpirun, for people who do not know
// mpirun's flags (dist/launcher.h lists them and says why each is there).
// mpirun runs under dist/job_supervisor.h, which ends a job mpirun cannot end
// (a node lost) and names the lost node; the command's exit code is mpirun's
// (the first failing rank's), or 1 when tessel run had to end the job.
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/environment_check.h"
#include "cli/self_launch.h"
#include "core/error.h"
#include "dist/core_sharing.h"
#include "dist/job_supervisor.h"
#include "dist/launcher.h"
#include "train/progress.h"

namespace tessel::cli {

namespace {

struct RunArgs {
  int num_ranks = 0;
  std::string hostfile;
  std::string mpirun = "mpirun";
  std::vector<std::string> program_args;
};


void run_launch(const RunArgs& args) {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') {
      throw UsageError(fmt::format("tessel run is already inside an MPI launch ({}={}); run "
                                   "`tessel {}` directly under your launcher instead",
                                   var, v, fmt::join(args.program_args, " ")));
    }
  }
  check_tessel_environment();
  if (args.program_args.empty()) {
    throw UsageError("tessel run needs the tessel command to start after `--`, e.g. "
                     "`tessel run -n 2 -- train examples/configs/sft.yaml`");
  }
  if (!args.hostfile.empty() && !std::filesystem::is_regular_file(args.hostfile)) {
    throw UsageError(fmt::format("--hostfile {}: no such file (one line per node: `hostname "
                                 "slots=N`)",
                                 args.hostfile));
  }
  const std::string mpirun = dist::find_executable(args.mpirun);
  if (mpirun.empty()) {
    throw Error(fmt::format("{} not found{}: tessel run starts ranks through Open MPI's "
                            "launcher. Install it (Debian: apt-get install openmpi-bin), pass "
                            "--mpirun /path/to/mpirun, or start the ranks with your own "
                            "launcher: mpirun -np {} tessel {}",
                            args.mpirun,
                            args.mpirun.find('/') == std::string::npos ? " on PATH" : "",
                            args.num_ranks, fmt::join(args.program_args, " ")));
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(fmt::format("cannot find the tessel binary (/proc/self/exe): {}", ec.message()));

  dist::LaunchOptions options;
  options.num_ranks = args.num_ranks;
  options.hostfile = args.hostfile;
  options.mpirun = mpirun;
  options.program = self.string();
  options.program_args = args.program_args;
  options.as_root = ::geteuid() == 0;
  options.local_cores = dist::usable_cores();
  // As relaunch_self does: mpirun gives rank 0 a pty, so tell it what the
  // person's stdout really is (a terminal gets the redrawn bar, a log lines).
  ::setenv(kProgressTtyEnv, train::Progress::is_terminal(stdout) ? "1" : "0", 1);
  options.forward_env = dist::tessel_env_names();
  const std::vector<std::string> argv = dist::mpirun_command(options);
  std::fprintf(stderr, "tessel run: %s\n", fmt::format("{}", fmt::join(argv, " ")).c_str());
  dist::SupervisedLaunch launch{argv, args.hostfile, this_command_line(), dist::default_abort_grace()};
  std::exit(dist::supervise_launch(launch));
}

}  // namespace

void add_run_command(CLI::App& app) {
  auto args = std::make_shared<RunArgs>();
  CLI::App* cmd = app.add_subcommand(
      "run",
      "Start N ranks of tessel through mpirun: tessel run -n 4 -- train CONFIG [overrides]. "
      "Adds the flags a CPU run needs (--bind-to none, one BLAS/OpenMP thread per rank, "
      "--oversubscribe beyond the local cores, --allow-run-as-root as root). For several "
      "machines pass --hostfile (see docs/launch.md).");
  cmd->add_option("-n,--np", args->num_ranks, "number of ranks")->required()->check(
      CLI::PositiveNumber);
  cmd->add_option("--hostfile", args->hostfile, "mpirun host file (one line per node)");
  cmd->add_option("--mpirun", args->mpirun, "the mpirun to use (default: mpirun on PATH)");
  cmd->add_option("args", args->program_args, "the tessel command line, after --");
  cmd->callback([args] { run_launch(*args); });
}

}  // namespace tessel::cli
