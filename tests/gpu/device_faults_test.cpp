// Hung, dead and throwing peers on the device (issue 39: "a hung or failed
// peer ends the job with the group named, as on CPU"; and "a clear error when
// ranks per node exceed devices, unless explicitly allowed"): launches
// device_fault_peer (built next to this binary) on two ranks sharing the GPU
// under mpirun (TESSEL_TEST_MPIRUN, default mpirun on PATH) and checks that
// the job ends non-zero, before the outer bound, and for a hung peer with
// the timeout message naming the collective's group, for a throwing one with
// its message. Runs at one process (it launches its own job); skipped
// without a CUDA device. The outer `timeout` only bounds a broken run; no
// test asserts on times.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "dist/communicator.h"
#include "gpu/gpu_world.h"
#include "support/run_tessel.h"

namespace tessel::gpu_testing {
namespace {

using JobResult = test_support::Result;  // exit code 124: the outer `timeout` had to end it

std::string peer_program() { return test_support::program_beside_this_test("device_fault_peer"); }

// `env` (assignments) is set for the job's ranks too.
// The job's device path as its rank 0 printed it ("... path <path>"), for the report.
void record_device_path(const JobResult& r) {
  const std::string mark = ", path ";
  const size_t at = r.output.find(mark);
  if (at == std::string::npos) return;
  const size_t end = r.output.find('\n', at);
  ::testing::Test::RecordProperty("device_path",
                                  r.output.substr(at + mark.size(), end - at - mark.size()));
}

JobResult run_job(const std::string& mode, int collective_timeout_s, const std::string& env = "") {
  const char* mpirun = std::getenv("TESSEL_TEST_MPIRUN");
  const std::string command =
      "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 TESSEL_COLLECTIVE_TIMEOUT_S=" +
      std::to_string(collective_timeout_s) + " " + env + " timeout -k 10 150 " +
      (mpirun ? mpirun : "mpirun") +
      " --oversubscribe --bind-to none -np 2 -x LD_LIBRARY_PATH -x TESSEL_COLLECTIVE_TIMEOUT_S " +
      peer_program() + " " + mode + " 2>&1";
  JobResult r = test_support::run_command(command);
  record_device_path(r);
  return r;
}

class DeviceFaults : public ::testing::Test {
 protected:
  void SetUp() override {
    TESSEL_REQUIRE_GPU();
    if (dist::world()->size() > 1) GTEST_SKIP() << "launches its own job; runs at one process";
    ASSERT_TRUE(std::filesystem::exists(peer_program()))
        << "missing " << peer_program() << "; build the device_fault_peer target";
  }
};

// The job failed, ended before the outer bound, and no rank finished the collective.
void expect_ended_early(const JobResult& r) {
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.exit_code, 124) << "the outer bound had to end the job:\n" << r.output;
  EXPECT_EQ(r.output.find("all_reduce finished"), std::string::npos) << r.output;
}

TEST_F(DeviceFaults, AHealthyJobSucceeds) {
  const JobResult r = run_job("ok", 60);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("all_reduce finished (correct)"), std::string::npos) << r.output;
}

// Two ranks on one GPU are refused, saying how to start them, unless
// TESSEL_ALLOW_SHARED_GPU=1 (which the other cases set).
TEST_F(DeviceFaults, RanksBeyondTheDevicesAreRefusedUnlessAllowed) {
  if (device::cuda_device_count() > 1) GTEST_SKIP() << "two ranks fit on this machine's devices";
  const JobResult r = run_job("ok", 60, "TESSEL_ALLOW_SHARED_GPU=0");
  expect_ended_early(r);
  EXPECT_NE(r.output.find("2 ranks on this node but only 1 CUDA device"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("TESSEL_ALLOW_SHARED_GPU=1"), std::string::npos) << r.output;
}

TEST_F(DeviceFaults, AHungPeerEndsTheJobNamingTheGroup) {
  const JobResult r = run_job("hang", 10);
  expect_ended_early(r);
  EXPECT_NE(r.output.find("did not finish within 10 s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hang_group (ranks 0,1)"), std::string::npos) << r.output;
}

TEST_F(DeviceFaults, AKilledPeerEndsTheJob) {
  // The collective timeout is beyond the outer bound: mpirun notices the
  // dead process, or the survivors' transport does; the job must end anyway.
  expect_ended_early(run_job("kill", 600));
}

TEST_F(DeviceFaults, AThrowOnOneRankEndsTheJobWithItsMessage) {
  const JobResult r = run_job("throw", 600);
  expect_ended_early(r);
  EXPECT_NE(r.output.find("device_fault_peer: rank 1 failed between two collectives"),
            std::string::npos)
      << r.output;
  EXPECT_EQ(r.output.find("did not finish within"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace tessel::gpu_testing
