// Counting the ranks that share a machine (one kernel) from their machine
// ids, and this machine's own id and cores.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "dist/core_sharing.h"

namespace tessel::dist {
namespace {

TEST(CoreSharing, CountsTheRanksOfOneMachine) {
  // Two pretend nodes on one host share its id; a second host has its own.
  const std::vector<std::string> ids = {"host-a", "host-a", "host-b", "host-a"};
  EXPECT_EQ(core_sharing(ids, 0, 2).ranks_on_machine, 3);
  EXPECT_TRUE(core_sharing(ids, 0, 2).oversubscribed());
  EXPECT_FALSE(core_sharing(ids, 0, 3).oversubscribed());  // a core each
  EXPECT_EQ(core_sharing(ids, 2, 2).ranks_on_machine, 1);
  EXPECT_FALSE(core_sharing(ids, 2, 1).oversubscribed());
}

TEST(CoreSharing, AnUnknownIdIsAMachineOfItsOwn) {
  const std::vector<std::string> ids = {"", "", ""};
  EXPECT_EQ(core_sharing(ids, 1, 1).ranks_on_machine, 1);
  EXPECT_FALSE(core_sharing(ids, 1, 1).oversubscribed());
  EXPECT_EQ(core_sharing(ids, 1, 0).cores, 1);  // never fewer than one core
  EXPECT_THROW(core_sharing(ids, 3, 1), Error);
}

TEST(CoreSharing, ThisMachine) {
  EXPECT_GE(usable_cores(), 1);
  // The kernel's boot id: 36 characters (a UUID) on Linux, where /proc shows it.
  if (!std::ifstream("/proc/sys/kernel/random/boot_id")) GTEST_SKIP() << "no boot id here: every rank counts alone";
  EXPECT_EQ(this_machine_id().size(), 36u);
  EXPECT_EQ(this_machine_id(), this_machine_id());
}

}  // namespace
}  // namespace tessel::dist
