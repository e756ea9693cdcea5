// mpirun command construction for `tessel run`: exact argv for the local,
// root, oversubscribed and host-file cases, and input errors.
#include "dist/launcher.h"

#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"

namespace tessel::dist {
namespace {

using Argv = std::vector<std::string>;

TEST(MpirunCommand, LocalRunWithinCores) {
  LaunchOptions o;
  o.num_ranks = 2;
  o.local_cores = 8;
  o.program = "/opt/tessel/bin/tessel";
  o.program_args = {"mesh", "--world", "2"};
  EXPECT_EQ(mpirun_command(o),
            (Argv{"mpirun", "-np", "2", "--bind-to", "none", "-x", "OPENBLAS_NUM_THREADS=1", "-x",
                  "OMP_NUM_THREADS=1", "/opt/tessel/bin/tessel", "mesh", "--world", "2"}));
}

TEST(MpirunCommand, RootAndMoreRanksThanCores) {
  LaunchOptions o;
  o.num_ranks = 4;
  o.local_cores = 2;
  o.as_root = true;
  o.mpirun = "/usr/bin/mpirun";
  o.program = "/t";
  o.forward_env = {"TESSEL_COLLECTIVE_TIMEOUT_S", "TESSEL_LOG_LEVEL"};
  EXPECT_EQ(mpirun_command(o),
            (Argv{"/usr/bin/mpirun", "--allow-run-as-root", "-np", "4", "--oversubscribe",
                  "--bind-to", "none", "-x", "OPENBLAS_NUM_THREADS=1", "-x", "OMP_NUM_THREADS=1",
                  "-x", "TESSEL_COLLECTIVE_TIMEOUT_S", "-x", "TESSEL_LOG_LEVEL", "/t"}));
}

TEST(MpirunCommand, HostFileNeverOversubscribes) {
  LaunchOptions o;
  o.num_ranks = 16;
  o.local_cores = 2;
  o.hostfile = "hosts";
  o.program = "/t";
  o.program_args = {"train", "cfg.yaml", "policy.dtensor_cfg.dp_replicate_size=2"};
  EXPECT_EQ(mpirun_command(o),
            (Argv{"mpirun", "-np", "16", "--hostfile", "hosts", "--bind-to", "none", "-x",
                  "OPENBLAS_NUM_THREADS=1", "-x", "OMP_NUM_THREADS=1", "/t", "train", "cfg.yaml",
                  "policy.dtensor_cfg.dp_replicate_size=2"}));
}

TEST(MpirunCommand, RejectsBadInput) {
  LaunchOptions o;
  o.program = "/t";
  o.num_ranks = 0;
  EXPECT_THROW(mpirun_command(o), UsageError);
  o.num_ranks = 2;
  o.program = "";
  EXPECT_THROW(mpirun_command(o), UsageError);
}

TEST(Launcher, TesselEnvNamesListsOnlyTesselVariables) {
  ::setenv("TESSEL_LAUNCHER_TEST_A", "1", 1);
  ::setenv("NOT_TESSEL_LAUNCHER_TEST", "1", 1);
  const auto names = tessel_env_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "TESSEL_LAUNCHER_TEST_A"), names.end());
  EXPECT_EQ(std::find(names.begin(), names.end(), "NOT_TESSEL_LAUNCHER_TEST"), names.end());
  for (const auto& n : names) EXPECT_EQ(n.rfind("TESSEL_", 0), 0u) << n;
  ::unsetenv("TESSEL_LAUNCHER_TEST_A");
  ::unsetenv("NOT_TESSEL_LAUNCHER_TEST");
}

TEST(Launcher, FindExecutableSearchesPath) {
  EXPECT_EQ(find_executable("sh").empty(), false);
  EXPECT_EQ(find_executable("/bin/sh"), "/bin/sh");
  EXPECT_EQ(find_executable("tessel-no-such-program-xyz"), "");
  EXPECT_EQ(find_executable("/nonexistent/mpirun"), "");
}

}  // namespace
}  // namespace tessel::dist
