#include "dist/job_supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/env_duration.h"
#include "core/error.h"
#include "dist/job_output_watch.h"
#include "dist/process_tree.h"
#include "dist/slurm_allocation.h"

namespace tessel::dist {

std::chrono::milliseconds default_abort_grace() {
  return seconds_from_env("TESSEL_RUN_ABORT_GRACE_S", std::chrono::seconds(15));
}

namespace {

std::string seconds_text(std::chrono::milliseconds t) {
  return fmt::format("{:g} s", static_cast<double>(t.count()) / 1000.0);
}

// Why the job ended by tessel run's hand, for either closing line.
std::string ended_by_tessel_text(std::chrono::milliseconds abort_grace) {
  return fmt::format("mpirun had not ended the job {} after the ranks' abort (it waits for the daemons of "
                     "nodes it cannot reach, or hangs), so tessel run ended it and every process under it "
                     "on this node.",
                     seconds_text(abort_grace));
}

// How long the nodes get to answer after a timeout; a node on a working link
// answers in a round trip.
constexpr auto kProbeTimeout = std::chrono::seconds(3);
// The port asked: ssh's, open on most cluster nodes; a closed port answers too.
constexpr int kProbePort = 22;
// How long SLURM's controller gets to list the allocation's nodes.
constexpr auto kScontrolTimeout = std::chrono::seconds(10);

volatile sig_atomic_t pending_signal = 0;
volatile sig_atomic_t pending_from_user = 0;

void note_signal(int signal, siginfo_t* info, void*) {
  pending_signal = signal;
  // A terminal's ^C comes from the kernel to the whole foreground group,
  // mpirun included; kill(2) comes to this process alone.
  pending_from_user = info != nullptr && info->si_code == SI_USER;
}

void install_signal_handlers() {
  struct sigaction action {};
  action.sa_sigaction = note_signal;
  action.sa_flags = SA_SIGINFO;  // no SA_RESTART: poll() returns to look at the signal
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGHUP}) ::sigaction(signal, &action, nullptr);
  std::signal(SIGPIPE, SIG_IGN);
}

void write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // our stderr is gone: keep supervising regardless
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

// Reads what is there (waiting at most `wait_ms`); false at end of file.
bool pass_through(int fd, int wait_ms, JobOutputWatch& watch) {
  pollfd readable{fd, POLLIN, 0};
  const int ready = ::poll(&readable, 1, wait_ms);
  if (ready <= 0) return true;
  char buffer[65536];
  const ssize_t n = ::read(fd, buffer, sizeof(buffer));
  if (n == 0) return false;
  if (n < 0) return errno == EINTR || errno == EAGAIN;
  write_all(STDERR_FILENO, buffer, static_cast<size_t>(n));
  watch.feed(std::string_view(buffer, static_cast<size_t>(n)));
  return true;
}

void kill_all(const std::vector<pid_t>& pids) {
  for (pid_t pid : pids) ::kill(pid, SIGKILL);
}

// Ends and reaps whatever was left under this process (orphans of mpirun,
// reparented here because this process is their subreaper).
void end_leftovers() {
  const std::vector<pid_t> left = descendants_of(::getpid());
  kill_all(left);
  for (size_t i = 0; i < left.size(); ++i) {
    if (::waitpid(-1, nullptr, 0) < 0) break;
  }
}

pid_t start_child(const std::vector<std::string>& argv, int stderr_write, int stderr_read) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  const pid_t child = ::fork();
  if (child < 0) throw Error(fmt::format("could not start {}: fork: {}", argv[0], std::strerror(errno)));
  if (child == 0) {
    ::dup2(stderr_write, STDERR_FILENO);
    ::close(stderr_write);
    ::close(stderr_read);
    ::execv(args[0], args.data());
    const std::string message = fmt::format("tessel: could not start {}: {}\n", argv[0], std::strerror(errno));
    write_all(STDERR_FILENO, message.data(), message.size());
    ::_exit(127);
  }
  return child;
}

// The job's nodes and which of them answer: the host file's, else (mpirun
// took its nodes from SLURM) the allocation's, each named "node1
// at 10.213.0.2" where SLURM addresses it otherwise; none outside both.
NodeAnswers ask_the_nodes(const std::vector<std::string>& hosts_in_file) {
  NodeAnswers nodes;
  if (!hosts_in_file.empty()) {
    nodes.source = "host file";
    nodes.answers = probe_hosts(hosts_in_file, kProbePort, kProbeTimeout);
    return nodes;
  }
  const std::vector<AllocationNode> allocation = slurm_allocation_nodes(kScontrolTimeout, nodes.unavailable);
  if (allocation.empty()) return nodes;
  nodes.source = "SLURM allocation";
  std::vector<std::string> addresses;
  for (const auto& node : allocation) addresses.push_back(node.address);
  nodes.answers = probe_hosts(addresses, kProbePort, kProbeTimeout);
  for (size_t i = 0; i < nodes.answers.size(); ++i) {
    const AllocationNode& node = allocation[i];
    nodes.answers[i].host = node.name == node.address ? node.name : fmt::format("{} at {}", node.name, node.address);
  }
  return nodes;
}

int exit_status_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

bool NodeAnswers::lost_any() const {
  return std::any_of(answers.begin(), answers.end(), [](const HostAnswer& a) { return !a.answered; });
}

std::string job_failure_summary(const std::vector<TimedOutCollective>& timeouts, const NodeAnswers& nodes,
                                bool ended_by_tessel, std::chrono::milliseconds abort_grace,
                                const std::string& rerun_command) {
  std::vector<std::string> lost;
  for (const auto& answer : nodes.answers) {
    if (!answer.answered) lost.push_back(fmt::format("{} ({})", answer.host, answer.detail));
  }
  std::string what;
  if (nodes.answers.empty()) {
    what = nodes.unavailable.empty()
               ? std::string("a peer process died, hangs, or lost its network (no host file to ask the nodes)")
               : fmt::format("a peer process died, hangs, or lost its network (could not list the nodes to ask "
                             "them: {})",
                             nodes.unavailable);
  } else if (lost.empty()) {
    what = fmt::format("every node of the {} answered ({}): a rank died or hangs rather than a node being lost",
                       nodes.source, nodes.answers.size());
  } else {
    what = fmt::format("lost node{} {}", lost.size() == 1 ? "" : "s", fmt::join(lost, ", "));
  }
  // The timeouts of one collective on one group, with the ranks that saw it.
  std::map<std::pair<std::string, std::string>, std::set<int>> by_group;
  std::string limit;
  for (const auto& t : timeouts) {
    by_group[{t.group, t.collective}].insert(t.world_rank);
    limit = t.limit;
  }
  std::vector<std::string> groups;
  for (const auto& [key, ranks] : by_group) {
    groups.push_back(fmt::format("{} on group '{}' (rank{} {})", key.second, key.first,
                                 ranks.size() == 1 ? "" : "s", fmt::join(ranks, ",")));
  }
  std::string line = fmt::format("tessel run: the job failed: {}. Collectives that did not finish within {}: {}.",
                                 what, limit, fmt::join(groups, "; "));
  if (ended_by_tessel) line += " " + ended_by_tessel_text(abort_grace);
  std::string resume = "Resume";
  if (!lost.empty() && nodes.source == "host file") {
    resume = "Once the node answers again (or with it out of the host file), resume";
  } else if (!lost.empty()) {
    resume = fmt::format("Exit status {}: a job script run with --requeue is requeued once SLURM marks the node "
                         "down (examples/slurm/tessel.sbatch waits for that); else resume",
                         kLostNodeExitStatus);
  }
  line += fmt::format(" {} from the last checkpoint with: {}", resume, rerun_command);
  return line;
}

int supervise_launch(const SupervisedLaunch& launch) {
  TESSEL_CHECK(!launch.argv.empty(), "supervise_launch needs a command");
  // Validate the host file before starting anything: a bad one is a usage error.
  std::vector<std::string> hosts;
  if (!launch.hostfile.empty()) {
    std::ifstream in(launch.hostfile);
    std::stringstream text;
    text << in.rdbuf();
    hosts = hostfile_hosts(text.str());
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
    throw Error(fmt::format("could not start {}: pipe: {}", launch.argv[0], std::strerror(errno)));
  }
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  install_signal_handlers();
  const pid_t child = start_child(launch.argv, pipe_fds[1], pipe_fds[0]);
  ::close(pipe_fds[1]);
  const int output = pipe_fds[0];

  using clock = std::chrono::steady_clock;
  JobOutputWatch watch;
  bool open = true;
  bool ended_by_tessel = false;
  int status = 0;
  std::optional<clock::time_point> failing_since;
  for (;;) {
    if (open) open = pass_through(output, 200, watch);
    else ::poll(nullptr, 0, 200);
    if (pending_signal != 0) {
      const int signal = pending_signal;
      pending_signal = 0;
      if (signal != SIGINT || pending_from_user) ::kill(child, signal);
    }
    const pid_t done = ::waitpid(child, &status, WNOHANG);
    if (done == child) break;
    if (watch.job_failing() && !failing_since) failing_since = clock::now();
    if (failing_since && clock::now() - *failing_since >= launch.abort_grace) {
      std::vector<pid_t> tree = descendants_of(child);
      tree.push_back(child);
      kill_all(tree);
      ::waitpid(child, &status, 0);
      ended_by_tessel = true;
      break;
    }
  }
  // What mpirun wrote last; a process it left behind may hold the pipe open,
  // so no waiting for the end of the file.
  const auto drain_until = clock::now() + std::chrono::milliseconds(500);
  while (open && clock::now() < drain_until) open = pass_through(output, 50, watch);
  ::close(output);
  end_leftovers();

  bool lost_node = false;
  if (!watch.timeouts().empty()) {
    const NodeAnswers nodes = ask_the_nodes(hosts);
    lost_node = nodes.lost_any();
    const std::string summary =
        job_failure_summary(watch.timeouts(), nodes, ended_by_tessel, launch.abort_grace, launch.rerun_command);
    std::fprintf(stderr, "%s\n", summary.c_str());
    std::fflush(stderr);
  } else if (ended_by_tessel) {
    std::fprintf(stderr, "tessel run: a rank failed. %s Rerun with: %s\n",
                 ended_by_tessel_text(launch.abort_grace).c_str(), launch.rerun_command.c_str());
    std::fflush(stderr);
  }
  if (lost_node) return kLostNodeExitStatus;
  if (ended_by_tessel) return 1;
  return exit_status_of(status);
}

}  // namespace tessel::dist
