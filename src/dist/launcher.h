// Launcher: the mpirun command line that `tessel run -n N -- ARGS` executes,
// built by a pure function so the flags are unit-tested without starting MPI.
// The flags encode what a CPU run of tessel needs from OpenMPI:
//   --allow-run-as-root      containers often run as root; mpirun refuses otherwise
//   --oversubscribe          more ranks than local cores (tests, laptops)
//   --bind-to none           ranks bound to one core each would share it with
//                            libtorch's intra-op threads of other ranks
//   -x OPENBLAS_NUM_THREADS=1 -x OMP_NUM_THREADS=1
//                            BLAS/OpenMP pools per rank would oversubscribe the
//                            cores N-fold; tessel sizes libtorch's pool itself
//                            (dist/world.cpp)
//   -x NAME                  forwards the caller's TESSEL_* settings to every
//                            rank, remote nodes included
#pragma once

#include <string>
#include <vector>

namespace tessel::dist {

struct LaunchOptions {
  int num_ranks = 1;
  std::string hostfile;                    // "" = all ranks on this machine
  std::string mpirun = "mpirun";           // path or name of the launcher
  std::string program;                     // the binary every rank runs
  std::vector<std::string> program_args;   // its arguments
  bool as_root = false;                    // the caller's effective uid is 0
  int local_cores = 1;                     // cores of this machine
  std::vector<std::string> forward_env;    // names of variables to pass on (-x NAME)
};

// argv of the mpirun invocation (argv[0] = options.mpirun). Throws
// tessel::UsageError for num_ranks < 1 or an empty program.
std::vector<std::string> mpirun_command(const LaunchOptions& options);

// Names of the TESSEL_* variables set in this process's environment, sorted.
std::vector<std::string> tessel_env_names();

// The full path of `name` searched on PATH (a name holding '/' is checked as
// is); "" when not found or not executable.
std::string find_executable(const std::string& name);

}  // namespace tessel::dist
