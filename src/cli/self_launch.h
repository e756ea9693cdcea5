// How a command that wants several processes starts them when the user ran
// it directly (SPEC 7: people need not know mpirun): it re-executes this same
// binary through mpirun with the flags a CPU run needs (dist/launcher.h),
// passing its own arguments on. Shared by `tessel train`, `tessel dpo` and
// `tessel logprobs`; under a launcher already (mpirun, srun) nothing is
// relaunched and the launched world is used.
#pragma once

#include <string>
#include <vector>

namespace tessel::cli {

// The environment variable through which a relaunching command tells rank 0
// whether the person's stdout is a terminal (mpirun's pty or pipe hides it).
inline constexpr const char* kProgressTtyEnv = "TESSEL_PROGRESS_TTY";

// True inside a process an MPI launcher started (Open MPI, PMI, PMIx).
bool under_mpi_launcher();

// Runs `mpirun -np num_ranks <this binary> program_args` (`mpirun` a name on
// PATH or a path) under dist/job_supervisor.h and exits with its status.
// tessel::Error, with the command to run by hand, when mpirun cannot be found.
[[noreturn]] void relaunch_self(const std::string& command, const std::vector<std::string>& program_args,
                                int num_ranks, const std::string& mpirun);

// This process's command line as a shell would take it back (arguments
// quoted where needed), e.g. for "resume with: ..." messages.
std::string this_command_line();

// Whether rank 0's progress output goes to a terminal: what the relaunching
// process recorded, else stdout itself.
bool progress_is_terminal();

}  // namespace tessel::cli
