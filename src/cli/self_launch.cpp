#include "cli/self_launch.h"

#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "dist/core_sharing.h"
#include "dist/job_supervisor.h"
#include "dist/launcher.h"
#include "train/progress.h"

namespace tessel::cli {

bool under_mpi_launcher() {
  for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return true;
  }
  return false;
}

void relaunch_self(const std::string& command, const std::vector<std::string>& program_args, int num_ranks,
                   const std::string& mpirun_name) {
  const std::string mpirun = dist::find_executable(mpirun_name);
  if (mpirun.empty()) {
    throw Error(fmt::format("this run needs {} processes, but {} was not found: install Open "
                            "MPI (apt-get install openmpi-bin), pass --mpirun PATH, run with "
                            "--nproc 1, or start it yourself: mpirun -np {} tessel {}",
                            num_ranks, mpirun_name, num_ranks, fmt::join(program_args, " ")));
  }
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) throw Error(fmt::format("cannot find the tessel binary (/proc/self/exe): {}", ec.message()));
  dist::LaunchOptions options;
  options.num_ranks = num_ranks;
  options.mpirun = mpirun;
  options.program = self.string();
  options.program_args = program_args;
  options.as_root = ::geteuid() == 0;
  options.local_cores = dist::usable_cores();
  // Under mpirun the ranks' stdout is mpirun's pty or pipe, whatever the
  // person who started the run sees; tell rank 0 which it is, so a terminal
  // gets the redrawn bar and a log file plain lines.
  ::setenv(kProgressTtyEnv, train::Progress::is_terminal(stdout) ? "1" : "0", 1);
  options.forward_env = dist::tessel_env_names();
  const auto argv = dist::mpirun_command(options);
  std::fprintf(stderr, "tessel %s: starting %d processes: %s\n", command.c_str(), num_ranks,
               fmt::format("{}", fmt::join(argv, " ")).c_str());
  std::fflush(stderr);
  dist::SupervisedLaunch launch{argv, "", this_command_line(), dist::default_abort_grace()};
  std::exit(dist::supervise_launch(launch));
}

std::string this_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  const std::string all = bytes.str();
  std::string line;
  size_t begin = 0;
  while (begin < all.size()) {
    size_t end = all.find('\0', begin);
    if (end == std::string::npos) end = all.size();
    const std::string word = all.substr(begin, end - begin);
    const bool plain = !word.empty() && word.find_first_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-+=./:,@%") == std::string::npos;
    if (!line.empty()) line += ' ';
    if (plain) {
      line += word;
    } else {
      line += '\'';
      for (char c : word) line += c == '\'' ? std::string("'\\''") : std::string(1, c);
      line += '\'';
    }
    begin = end + 1;
  }
  return line;
}

bool progress_is_terminal() {
  const char* tty = std::getenv(kProgressTtyEnv);
  return (tty != nullptr && *tty != '\0') ? std::string(tty) == "1" : train::Progress::is_terminal(stdout);
}

}  // namespace tessel::cli
