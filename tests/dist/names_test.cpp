// Group names, the timeout message and the timeout setting: what a user reads
// when a peer died must name the collective, the group, the rank and the fix.
#include <gtest/gtest.h>

#include <cstdlib>

#include "core/error.h"
#include "dist/algorithms.h"
#include "dist/group_name.h"
#include "dist/timeout.h"

namespace tessel::dist {
namespace {

TEST(GroupName, ListsRanks) {
  EXPECT_EQ(format_group_name("dp_shard", {0, 1, 2, 3}), "dp_shard (ranks 0,1,2,3)");
  EXPECT_EQ(format_group_name("tp", {1, 3}), "tp (ranks 1,3)");
}

TEST(GroupName, CompressesLongGroups) {
  std::vector<int> ranks;
  for (int r = 0; r < 20; ++r) ranks.push_back(r);
  ranks.push_back(40);
  ranks.push_back(41);
  EXPECT_EQ(format_group_name("dp", ranks), "dp (ranks 0-19,40,41)");
}

TEST(Timeout, MessageNamesEverything) {
  EXPECT_EQ(timeout_message("all_reduce", "dp_shard (ranks 0,1)", std::chrono::seconds(5), 0),
            "tessel: collective all_reduce on group 'dp_shard (ranks 0,1)' did not finish "
            "within 5 s on rank 0: a peer process likely died or hangs. Set "
            "TESSEL_COLLECTIVE_TIMEOUT_S to change the limit.");
  EXPECT_NE(timeout_message("barrier", "g", std::chrono::milliseconds(2500), 3)
                .find("within 2.5 s on rank 3"),
            std::string::npos);
}

class TimeoutEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* old = std::getenv("TESSEL_COLLECTIVE_TIMEOUT_S");
    had_ = old != nullptr;
    if (had_) old_ = old;
  }
  void TearDown() override {
    if (had_) {
      setenv("TESSEL_COLLECTIVE_TIMEOUT_S", old_.c_str(), 1);
    } else {
      unsetenv("TESSEL_COLLECTIVE_TIMEOUT_S");
    }
  }
  bool had_ = false;
  std::string old_;
};

TEST_F(TimeoutEnv, DefaultAndOverride) {
  unsetenv("TESSEL_COLLECTIVE_TIMEOUT_S");
  EXPECT_EQ(default_collective_timeout(), std::chrono::seconds(300));
  setenv("TESSEL_COLLECTIVE_TIMEOUT_S", "2.5", 1);
  EXPECT_EQ(default_collective_timeout(), std::chrono::milliseconds(2500));
  setenv("TESSEL_COLLECTIVE_TIMEOUT_S", "abc", 1);
  EXPECT_THROW(default_collective_timeout(), UsageError);
  setenv("TESSEL_COLLECTIVE_TIMEOUT_S", "-1", 1);
  EXPECT_THROW(default_collective_timeout(), UsageError);
}

TEST(Algorithms, ResolveNeverAutoAndRespectsNative) {
  for (bool native_ok : {false, true}) {
    for (int64_t bytes : {int64_t{8}, int64_t{1} << 26}) {
      EXPECT_NE(resolve(AllReduceAlgorithm::Auto, native_ok, bytes, 4), AllReduceAlgorithm::Auto);
      EXPECT_NE(resolve(ReduceScatterAlgorithm::Auto, native_ok, bytes, 4),
                ReduceScatterAlgorithm::Auto);
    }
  }
  // bf16/fp16 cannot use MPI's reductions, whatever is requested.
  EXPECT_EQ(resolve(AllReduceAlgorithm::Native, false, 1024, 2),
            AllReduceAlgorithm::ReduceScatterAllGather);
  EXPECT_EQ(resolve(ReduceScatterAlgorithm::Native, false, 1024, 2),
            ReduceScatterAlgorithm::AllToAllReduce);
  EXPECT_EQ(resolve(AllReduceAlgorithm::ReduceScatterAllGather, true, 1024, 2),
            AllReduceAlgorithm::ReduceScatterAllGather);
  Algorithms saved = algorithms();
  set_algorithms({AllReduceAlgorithm::Native, ReduceScatterAlgorithm::Native});
  EXPECT_EQ(algorithms().all_reduce, AllReduceAlgorithm::Native);
  set_algorithms(saved);
}

}  // namespace
}  // namespace tessel::dist
