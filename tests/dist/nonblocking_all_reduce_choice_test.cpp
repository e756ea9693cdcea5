// The nonblocking all-reduce choice (dist/nonblocking_all_reduce_choice.h):
// the reduce-scatter + all-gather schedule is asked for where the
// environment names none, and a value the user set is never replaced.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "dist/nonblocking_all_reduce_choice.h"

namespace {

using tessel::dist::choose_nonblocking_all_reduce;
using tessel::dist::kNonblockingAllReduceVariable;

TEST(NonblockingAllReduceChoice, AsksForLibnbcsReduceScatterAllGatherAndKeepsTheUsersValue) {
  const char* before = std::getenv(kNonblockingAllReduceVariable);
  const std::string saved = before ? before : "";
  for (bool empty : {false, true}) {
    if (empty) ::setenv(kNonblockingAllReduceVariable, "", 1);
    else ::unsetenv(kNonblockingAllReduceVariable);
    EXPECT_EQ(std::string(choose_nonblocking_all_reduce()), "3");
    EXPECT_EQ(std::string(std::getenv(kNonblockingAllReduceVariable)), "3");  // MPI_Init reads it there
  }
  for (const char* users : {"0", "1", "4"}) {
    ::setenv(kNonblockingAllReduceVariable, users, 1);
    EXPECT_EQ(std::string(choose_nonblocking_all_reduce()), users);
    EXPECT_EQ(std::string(std::getenv(kNonblockingAllReduceVariable)), users);
  }
  if (before) ::setenv(kNonblockingAllReduceVariable, saved.c_str(), 1);
  else ::unsetenv(kNonblockingAllReduceVariable);
}

}  // namespace
