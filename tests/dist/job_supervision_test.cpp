// The pieces `tessel run` uses to end a job mpirun cannot end: reading ranks'
// timeout lines back, host files, asking nodes whether they answer, the
// process tree, the closing line, and the supervisor itself on real child
// processes (a job that ends, and one that hangs after a rank's abort
// notice). The pretend-cluster test (tests/cluster/lost_node_test.sh) runs it
// with a node's link really taken down.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include "core/error.h"
#include "dist/host_reachability.h"
#include "dist/job_output_watch.h"
#include "dist/job_supervisor.h"
#include "dist/process_tree.h"
#include "dist/timeout.h"

namespace tessel::dist {
namespace {

using namespace std::chrono_literals;

TEST(TimeoutMessage, ReadsBackWhatARankPrinted) {
  const std::string printed = timeout_message("all_reduce", "dp (ranks 0,1,2,3)", 30s, 2);
  const auto found = parse_timeout_message(printed);
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->collective, "all_reduce");
  EXPECT_EQ(found->group, "dp (ranks 0,1,2,3)");
  EXPECT_EQ(found->limit, "30 s");
  EXPECT_EQ(found->world_rank, 2);
  // A line as a real job printed it (pretend cluster, 2026-12-06), with a
  // fractional limit and a launcher's tag in front.
  const auto tagged = parse_timeout_message(
      "[1,1]<stderr>:tessel: collective all_gather on group 'dp_shard_cp (ranks 0,1)' did not "
      "finish within 2.5 s on rank 1: a peer process likely died or hangs. Set "
      "TESSEL_COLLECTIVE_TIMEOUT_S to change the limit.");
  ASSERT_TRUE(tagged.has_value());
  EXPECT_EQ(tagged->collective, "all_gather");
  EXPECT_EQ(tagged->group, "dp_shard_cp (ranks 0,1)");
  EXPECT_EQ(tagged->limit, "2.5 s");
  EXPECT_EQ(tagged->world_rank, 1);
  EXPECT_FALSE(parse_timeout_message("step 3/40 loss 2.1 within 30 s on rank 0").has_value());
}

TEST(JobOutputWatch, FindsTimeoutsAndAbortNoticesAcrossSplitReads) {
  JobOutputWatch watch;
  watch.feed("[....] step 5/40 loss 3.1\rtessel: collective all_reduce on gro");
  EXPECT_FALSE(watch.job_failing());
  watch.feed("up 'dp (ranks 0,1,2,3)' did not finish within 15 s on rank 0: a peer process likely "
             "died or hangs.\nnext line\n");
  ASSERT_EQ(watch.timeouts().size(), 1u);
  EXPECT_EQ(watch.timeouts()[0].world_rank, 0);
  EXPECT_TRUE(watch.job_failing());

  JobOutputWatch abort_only;
  abort_only.feed("MPI_ABORT was invoked on rank 3 in communicator MPI_COMM_WORLD\n");
  EXPECT_TRUE(abort_only.job_failing());
  EXPECT_TRUE(abort_only.timeouts().empty());

  JobOutputWatch healthy;
  healthy.feed("tessel: trained 40 steps in 12.0 s\nloss 1.5\n");
  EXPECT_FALSE(healthy.job_failing());
}

TEST(Hostfile, FirstWordOfEveryLineOnce) {
  EXPECT_EQ(hostfile_hosts("# cluster\nnode0 slots=2\n\n  user@node1 slots=2 max_slots=2\n"
                           "10.0.0.3:4   # a comment\nnode0 slots=2\n"),
            (std::vector<std::string>{"node0", "node1", "10.0.0.3:4"}));
  EXPECT_THROW(hostfile_hosts("node0 slots=2\nslots=2 node1\n"), UsageError);
}

TEST(ProbeHosts, ARefusedConnectionAnswersAndAnUnknownNameDoesNot) {
  // A port nothing listens on: bind one, then close it, so the kernel refuses.
  const int s = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(s, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  socklen_t len = sizeof(address);
  ::getsockname(s, reinterpret_cast<sockaddr*>(&address), &len);
  ::close(s);
  const auto answers =
      probe_hosts({"127.0.0.1", "no-such-host.invalid"}, ntohs(address.sin_port), 2000ms);
  ASSERT_EQ(answers.size(), 2u);
  EXPECT_TRUE(answers[0].answered) << answers[0].detail;
  EXPECT_EQ(answers[0].detail, "connection refused");
  EXPECT_FALSE(answers[1].answered);
  EXPECT_NE(answers[1].detail.find("does not resolve"), std::string::npos) << answers[1].detail;
}

TEST(ProcessTree, FindsGrandchildren) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child starts a grandchild and both sleep.
    if (::fork() == 0) {
      ::execl("/bin/sleep", "sleep", "30", nullptr);
      ::_exit(127);
    }
    ::execl("/bin/sleep", "sleep", "30", nullptr);
    ::_exit(127);
  }
  std::vector<pid_t> found;
  for (int i = 0; i < 100 && found.empty(); ++i) {
    std::this_thread::sleep_for(20ms);
    found = descendants_of(child);
  }
  EXPECT_EQ(found.size(), 1u);  // the grandchild; `child` itself is the root
  for (pid_t p : found) ::kill(p, SIGKILL);
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
}

TEST(JobFailureSummary, NamesTheLostNodeTheGroupAndTheResume) {
  const std::vector<TimedOutCollective> timeouts = {{"all_reduce", "dp (ranks 0,1,2,3)", "30 s", 0},
                                                    {"all_reduce", "dp (ranks 0,1,2,3)", "30 s", 1}};
  const std::vector<HostAnswer> answers = {{"10.213.0.1", true, "connection refused"},
                                           {"10.213.0.2", false, "no answer within 3 s"}};
  const std::string line =
      job_failure_summary(timeouts, answers, true, 15s, "tessel run -n 4 --hostfile h -- train c.yaml");
  EXPECT_EQ(line,
            "tessel run: the job failed: lost node 10.213.0.2 (no answer within 3 s). Collectives "
            "that did not finish within 30 s: all_reduce on group 'dp (ranks 0,1,2,3)' (ranks 0,1). "
            "mpirun had not ended the job 15 s after the ranks' abort (it waits for the daemons of "
            "nodes it cannot reach, or hangs), so tessel run ended it and every process under it on this "
            "node. Once the node answers again (or with it out of the host file), resume from the "
            "last checkpoint with: tessel run -n 4 --hostfile h -- train c.yaml");
  const std::string all_there = job_failure_summary(
      timeouts, {{"a", true, "connected"}, {"b", true, "connected"}}, false, 15s, "again");
  EXPECT_NE(all_there.find("every node of the host file answered (2)"), std::string::npos) << all_there;
  EXPECT_EQ(all_there.find("tessel run ended it"), std::string::npos);
}

TEST(AbortGrace, FromTheEnvironmentOrFifteenSeconds) {
  ::unsetenv("TESSEL_RUN_ABORT_GRACE_S");
  EXPECT_EQ(default_abort_grace(), 15000ms);
  ::setenv("TESSEL_RUN_ABORT_GRACE_S", "2.5", 1);
  EXPECT_EQ(default_abort_grace(), 2500ms);
  ::setenv("TESSEL_RUN_ABORT_GRACE_S", "soon", 1);
  EXPECT_THROW(default_abort_grace(), UsageError);
  ::unsetenv("TESSEL_RUN_ABORT_GRACE_S");
}

// A stand-in for mpirun as a shell script: real processes, the exit status
// and the hang are the script's.
std::string script(const std::string& name, const std::string& body) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(SuperviseLaunch, PassesTheExitStatusOfAJobThatEnds) {
  const std::string path = script("tessel_job_exits.sh", "echo 'rank 1 failed' >&2\nexit 7\n");
  EXPECT_EQ(supervise_launch({{path}, "", "again", 5s}), 7);
}

TEST(SuperviseLaunch, EndsAJobThatHangsAfterAnAbortNoticeAndItsChildren) {
  // Like mpirun waiting on an unreachable daemon: a rank's timeout line, the
  // abort notice, then a hang, with a child process of its own.
  const std::string pid_file = ::testing::TempDir() + "tessel_job_hangs.pid";
  const std::string path = script(
      "tessel_job_hangs.sh",
      "sleep 300 &\necho $! > " + pid_file + "\n"
      "echo \"tessel: collective all_gather on group 'dp_cp (ranks 0,1,2,3)' did not finish within "
      "30 s on rank 0: a peer process likely died or hangs.\" >&2\n"
      "echo 'MPI_ABORT was invoked on rank 0 in communicator MPI_COMM_WORLD' >&2\nsleep 300\n");
  EXPECT_EQ(supervise_launch({{path}, "", "again", 1500ms}), 1);
  pid_t grandchild = 0;
  std::ifstream(pid_file) >> grandchild;
  ASSERT_GT(grandchild, 0);
  EXPECT_NE(::kill(grandchild, 0), 0) << "the job's child process " << grandchild << " is still alive";
}

}  // namespace
}  // namespace tessel::dist
