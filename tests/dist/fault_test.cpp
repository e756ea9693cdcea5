// Dead, hung and throwing peers: launches dist_fault_peer (built next to this binary)
// under mpirun and checks that the job ends non-zero, in bounded time, and,
// for a hung peer, with the timeout message naming the collective and group,
// for a throwing one with its message.
// The outer `timeout` only bounds a broken run; no test asserts on times.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "dist/communicator.h"
#include "support/run_tessel.h"

namespace tessel::dist {
namespace {

using RunResult = test_support::Result;  // exit code 124: the outer `timeout` had to end it

std::string peer_program() { return test_support::program_beside_this_test("dist_fault_peer"); }

RunResult run_job(const std::string& mode, int ranks, int timeout_s) {
  const std::string command =
      "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1 "
      "OMPI_MCA_btl_vader_single_copy_mechanism=none TESSEL_COLLECTIVE_TIMEOUT_S=" +
      std::to_string(timeout_s) + " timeout -k 10 180 mpirun --oversubscribe --bind-to none -np " +
      std::to_string(ranks) + " " + peer_program() + " " + mode + " 2>&1";
  return test_support::run_command(command);
}

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (world()->size() > 1) GTEST_SKIP() << "launches its own mpirun; run without mpirun";
    if (!std::filesystem::exists(peer_program())) {
      FAIL() << "missing " << peer_program() << "; build the dist_fault_peer target";
    }
  }
};

TEST_F(FaultTest, HealthyJobSucceeds) {
  RunResult r = run_job("ok", 3, 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all_reduce finished (correct)"), std::string::npos) << r.output;
}

// The job failed, ended before the outer bound, and no rank finished the
// collective.
void expect_ended_early(const RunResult& r) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "the outer bound had to kill the job:\n" << r.output;
  EXPECT_EQ(r.output.find("all_reduce finished"), std::string::npos) << r.output;
}

// The job ended by the timeout, with the message naming the collective and group.
void expect_ended_by_timeout(const RunResult& r) {
  expect_ended_early(r);
  EXPECT_NE(r.output.find("tessel: collective all_reduce on group 'hang_group (ranks 0,1,2)' "
                          "did not finish within 2 s on rank "),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("Set TESSEL_COLLECTIVE_TIMEOUT_S to change the limit."),
            std::string::npos);
}

TEST_F(FaultTest, HungPeerEndsJobWithTimeoutMessage) {
  // The synchronous form runs as the blocking MPI call, bounded by the watchdog.
  expect_ended_by_timeout(run_job("hang", 3, 2));
}

TEST_F(FaultTest, HungPeerOnAsyncCollectiveEndsJobWithTimeoutMessage) {
  // The asynchronous form is polled by the engine, which checks the deadline itself.
  expect_ended_by_timeout(run_job("hang_async", 3, 2));
}

TEST_F(FaultTest, KilledPeerEndsJob) {
  // Our timeout is set high: mpirun itself notices the dead process and ends
  // the job; either way the job must end non-zero before the outer bound.
  expect_ended_early(run_job("kill", 3, 60));
}

TEST_F(FaultTest, ThrowOnOneRankEndsJobWithItsMessage) {
  // The collective timeout is far beyond the outer bound (180 s): the job
  // must end because the failing rank ends it, not by waiting the others out.
  RunResult r = run_job("throw", 3, 600);
  expect_ended_early(r);
  EXPECT_NE(r.output.find("fault_peer: error on rank 1 of 3: fault_peer: rank 1 failed between "
                          "two collectives"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("did not finish within"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tessel::dist
