// The world finds which ranks share this machine: every rank of a test job
// runs on this one machine (under mpirun, with or without pretend hostnames),
// so each counts the whole world, and the ranks outnumber the cores exactly
// when the world is larger than this process's CPU set.
#include <gtest/gtest.h>

#include "dist/communicator.h"
#include "dist/core_sharing.h"

namespace tessel::dist {
namespace {

TEST(MpiCoreSharing, EveryRankOfThisMachineIsCounted) {
  CommunicatorPtr w = world();
  const CoreSharing sharing = world_core_sharing();
  EXPECT_EQ(sharing.ranks_on_machine, w->size());
  EXPECT_EQ(sharing.cores, usable_cores());
  EXPECT_EQ(sharing.oversubscribed(), w->size() > usable_cores());
}

}  // namespace
}  // namespace tessel::dist
