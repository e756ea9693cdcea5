// The pieces `tessel run` uses to end a job mpirun cannot end: reading ranks'
// timeout lines back, host files, asking nodes whether they answer, the
// process tree, the closing line, the nodes of a SLURM allocation (from a
// stand-in scontrol), and the supervisor itself on real child processes (a
// job that ends, one that hangs after a rank's abort notice, one that lost a
// node of its allocation). The pretend-cluster test (tests/cluster/lost_node_test.sh) runs it
// with a node's link really taken down.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
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
#include "dist/slurm_allocation.h"
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

// A stand-in for mpirun as a shell script: real processes, the exit status
// and the hang are the script's.
std::string script(const std::string& name, const std::string& body) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << "#!/bin/sh\n" << body;
  ::chmod(path.c_str(), 0755);
  return path;
}

TEST(JobFailureSummary, NamesTheLostNodeTheGroupAndTheResume) {
  const std::vector<TimedOutCollective> timeouts = {{"all_reduce", "dp (ranks 0,1,2,3)", "30 s", 0},
                                                    {"all_reduce", "dp (ranks 0,1,2,3)", "30 s", 1}};
  const NodeAnswers answers = {
      "host file", {{"10.213.0.1", true, "connection refused"}, {"10.213.0.2", false, "no answer within 3 s"}}, ""};
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
      timeouts, {"host file", {{"a", true, "connected"}, {"b", true, "connected"}}, ""}, false, 15s, "again");
  EXPECT_NE(all_there.find("every node of the host file answered (2)"), std::string::npos) << all_there;
  EXPECT_EQ(all_there.find("tessel run ended it"), std::string::npos);
}

TEST(JobFailureSummary, UnderSlurmSaysTheExitStatusThatRequeues) {
  const std::vector<TimedOutCollective> timeouts = {{"all_gather", "dp_replicate (ranks 0,2)", "60 s", 0}};
  const NodeAnswers allocation = {"SLURM allocation",
                                  {{"node0 at 10.213.0.1", true, "connection refused"},
                                   {"node1 at 10.213.0.2", false, "no answer within 3 s"}},
                                  ""};
  EXPECT_EQ(job_failure_summary(timeouts, allocation, false, 15s, "tessel run -n 4 -- train c.yaml"),
            "tessel run: the job failed: lost node node1 at 10.213.0.2 (no answer within 3 s). Collectives that "
            "did not finish within 60 s: all_gather on group 'dp_replicate (ranks 0,2)' (rank 0). Exit status 75: "
            "a job script run with --requeue is requeued once SLURM marks the node down "
            "(examples/slurm/tessel.sbatch waits for that); else resume from the last checkpoint with: tessel run "
            "-n 4 -- train c.yaml");
  const std::string all_there = job_failure_summary(
      timeouts, {"SLURM allocation", {{"node0", true, "connected"}, {"node1", true, "connected"}}, ""}, false, 15s,
      "again");
  EXPECT_NE(all_there.find("every node of the SLURM allocation answered (2)"), std::string::npos) << all_there;
  EXPECT_NE(all_there.find("Resume from the last checkpoint with: again"), std::string::npos) << all_there;
  const std::string unlisted =
      job_failure_summary(timeouts, {"", {}, "scontrol did not answer within 10000 ms"}, false, 15s, "again");
  EXPECT_NE(unlisted.find("could not list the nodes to ask them: scontrol did not answer within 10000 ms"),
            std::string::npos)
      << unlisted;
}

TEST(SlurmAllocation, ParsesNodeNamesAndAddresses) {
  // As `scontrol show node -o node[0-2]` prints them (22.05), one line each.
  const std::string text =
      "NodeName=node0 Arch=x86_64 CoresPerSocket=1 CPUAlloc=2 CPUTot=2 CPULoad=0.50 AvailableFeatures=(null) "
      "ActiveFeatures=(null) Gres=(null) NodeAddr=10.213.0.1 NodeHostName=node0 Version=22.05.8 OS=Linux "
      "RealMemory=1 AllocMem=0 FreeMem=N/A Sockets=2 Boards=1 State=ALLOCATED ThreadsPerCore=1 TmpDisk=0 "
      "Weight=1 Owner=N/A MCS_label=N/A Partitions=main\n"
      "NodeName=node1 Arch=x86_64 CPUTot=2 NodeAddr=10.213.0.2 NodeHostName=node1 State=ALLOCATED+NOT_RESPONDING\n"
      "\n"
      "NodeName=gpu-a17 CPUTot=64 NodeHostName=gpu-a17 State=IDLE\n"
      "No nodes in the system\n";
  const std::vector<AllocationNode> nodes = parse_scontrol_nodes(text);
  ASSERT_EQ(nodes.size(), 3u);
  EXPECT_EQ(nodes[0].name, "node0");
  EXPECT_EQ(nodes[0].address, "10.213.0.1");
  EXPECT_EQ(nodes[1].name, "node1");
  EXPECT_EQ(nodes[1].address, "10.213.0.2");
  EXPECT_EQ(nodes[2].name, "gpu-a17");
  EXPECT_EQ(nodes[2].address, "gpu-a17");  // no NodeAddr: reached by its name
}

// A stand-in for SLURM's scontrol, first on PATH while `body` runs: a real
// process whose output, exit status and hang are the script's.
class FakeScontrol : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "fake_scontrol";
    ::mkdir(dir_.c_str(), 0755);
    old_path_ = std::getenv("PATH") ? std::getenv("PATH") : "";
    ::setenv("PATH", (dir_ + ":" + old_path_).c_str(), 1);
  }
  void TearDown() override {
    ::setenv("PATH", old_path_.c_str(), 1);
    ::unsetenv("SLURM_JOB_NODELIST");
    ::unlink((dir_ + "/scontrol").c_str());
  }
  void scontrol(const std::string& body) {
    const std::string path = dir_ + "/scontrol";
    std::ofstream(path) << "#!/bin/sh\n" << body;
    ::chmod(path.c_str(), 0755);
  }
  std::string dir_, old_path_;
};

TEST_F(FakeScontrol, ListsTheAllocationsNodesOrSaysWhyNot) {
  std::string why;
  ::unsetenv("SLURM_JOB_NODELIST");
  scontrol("exit 1\n");
  EXPECT_TRUE(slurm_allocation_nodes(2s, why).empty());  // not in an allocation: scontrol is not asked
  EXPECT_EQ(why, "");

  ::setenv("SLURM_JOB_NODELIST", "node[0-1]", 1);
  // The arguments must be the allocation's list: anything else lists nothing.
  scontrol("[ \"$*\" = 'show node -o node[0-1]' ] || exit 3\n"
           "echo 'NodeName=node0 NodeAddr=10.213.0.1 State=ALLOCATED'\n"
           "echo 'NodeName=node1 NodeAddr=10.213.0.2 State=ALLOCATED'\n");
  const std::vector<AllocationNode> nodes = slurm_allocation_nodes(2s, why);
  EXPECT_EQ(why, "");
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes[1].name, "node1");
  EXPECT_EQ(nodes[1].address, "10.213.0.2");

  why.clear();
  scontrol("echo 'slurm_load_node: Unable to contact slurm controller (connect failure)' >&2\nexit 1\n");
  EXPECT_TRUE(slurm_allocation_nodes(2s, why).empty());
  EXPECT_EQ(why, "scontrol failed: slurm_load_node: Unable to contact slurm controller (connect failure)");

  why.clear();
  scontrol("exec sleep 30\n");
  const auto start = std::chrono::steady_clock::now();
  EXPECT_TRUE(slurm_allocation_nodes(300ms, why).empty());
  EXPECT_LT(std::chrono::steady_clock::now() - start, 10s);  // killed at its deadline, not waited for
  EXPECT_EQ(why, "scontrol did not answer within 300 ms");
}

TEST_F(FakeScontrol, AJobThatLostANodeOfItsAllocationExitsWithTheRequeueStatus) {
  // mpirun inside an allocation (no host file): a rank's timeout, then the
  // job ends. node1's address does not resolve (.invalid never does), so it
  // does not answer; this machine does (a refused connection answers too).
  ::setenv("SLURM_JOB_NODELIST", "node[0-1]", 1);
  scontrol("echo 'NodeName=node0 NodeAddr=127.0.0.1'\necho 'NodeName=node1 NodeAddr=node1.invalid'\n");
  const std::string path = script(
      "tessel_job_loses_node.sh",
      "echo \"tessel: collective all_gather on group 'dp_replicate (ranks 0,2)' did not finish within "
      "60 s on rank 0: a peer process likely died or hangs.\" >&2\nexit 1\n");
  ::testing::internal::CaptureStderr();
  const int status = supervise_launch({{path}, "", "again", 5s});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(status, kLostNodeExitStatus) << err;
  EXPECT_NE(err.find("lost node node1 at node1.invalid ("), std::string::npos) << err;
  EXPECT_EQ(err.find("node0"), std::string::npos) << err;  // it answered

  // Every node answers: the run itself failed, and its own status is passed on.
  scontrol("echo 'NodeName=node0 NodeAddr=127.0.0.1'\n");
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(supervise_launch({{path}, "", "again", 5s}), 1);
  const std::string answered = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(answered.find("every node of the SLURM allocation answered (1)"), std::string::npos) << answered;
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
