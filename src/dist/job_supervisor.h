// Runs a launcher (mpirun) as a child and watches the job it runs, instead of
// becoming it. mpirun ends a job when a rank aborts, but it first tells every
// node's daemon to stop its ranks, and a node it can no longer reach never
// answers: mpirun then waits forever with every rank already gone, and a
// scheduler holds the nodes until its time limit (issue 43, measured on the
// pretend cluster). So this process passes the job's error output through,
// reads it (dist/job_output_watch.h), and once a rank has reported a
// collective timeout, called MPI_Abort or died, gives mpirun `abort_grace` to
// end the job itself; after that it ends mpirun and every process under it on
// this machine. Either way, when ranks reported timeouts it asks the job's
// nodes which still answer (dist/host_reachability.h): those of the host
// file, or without one those of the SLURM allocation it runs in
// (dist/slurm_allocation.h), and prints one line naming the lost node(s), the
// group whose collective timed out, and the command that resumes the run.
//
// Signals: SIGTERM and SIGHUP (a scheduler ending the job) are passed on to
// mpirun; SIGINT from the terminal reaches mpirun directly (same process
// group) and is passed on only when it was sent to this process alone.
// Processes left behind by mpirun are ended too: this process is their
// subreaper.
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "dist/host_reachability.h"
#include "dist/timeout.h"

namespace tessel::dist {

struct SupervisedLaunch {
  std::vector<std::string> argv;          // the launcher's command, argv[0] a path
  std::string hostfile;                   // nodes to ask after a timeout; "" = this machine only
  std::string rerun_command;              // the command that resumes the run
  std::chrono::milliseconds abort_grace;  // time mpirun gets to end a failing job itself
};

// TESSEL_RUN_ABORT_GRACE_S (seconds) or 15 s: Open MPI ends a job whose nodes
// all answer within a second or two of an abort. tessel::UsageError for a
// value that is not a positive number.
std::chrono::milliseconds default_abort_grace();

// The exit status of a job that lost a node (a node of its host file or
// SLURM allocation did not answer after ranks' collectives timed out):
// EX_TEMPFAIL, "try again later", so that a job script can tell it from a
// failure of the run itself and have the job requeued
// (examples/slurm/tessel.sbatch).
inline constexpr int kLostNodeExitStatus = 75;

// Runs the launch to its end. Returns the command's exit status: mpirun's own
// (128 + signal when it was killed by one), 1 when this process had to end
// the job, or kLostNodeExitStatus when a node did not answer. tessel::Error
// when the launcher cannot be started.
int supervise_launch(const SupervisedLaunch& launch);

// What the job's nodes answered after a timeout, and where their list came from.
struct NodeAnswers {
  std::string source;               // "host file", "SLURM allocation"; "" when there was none
  std::vector<HostAnswer> answers;  // one per node, its host as the line names it
  std::string unavailable;          // why the nodes could not be listed (SLURM did not answer), or ""
  bool lost_any() const;
};

// The closing line after ranks reported collective timeouts: which nodes did
// not answer (all answered: a rank died or hangs instead), the group and
// collective and the ranks that reported it, whether tessel ended the job, and
// the command that resumes it.
std::string job_failure_summary(const std::vector<TimedOutCollective>& timeouts, const NodeAnswers& nodes,
                                bool ended_by_tessel, std::chrono::milliseconds abort_grace,
                                const std::string& rerun_command);

}  // namespace tessel::dist
