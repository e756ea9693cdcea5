// find_straggler on hand-written per-rank waits: a balanced run names nobody,
// one slow rank (least wait, the others waiting notably more) is named with
// its node, a slow node's ranks together, ties in rank order, half the job
// ahead of the other half only as a node. The real case,
// a rank slowed from outside, is tests/cluster/straggler_test.sh.
#include <gtest/gtest.h>

#include "core/error.h"
#include "train/straggler.h"

namespace tessel::train {
namespace {

const std::vector<std::string> kTwoNodes = {"node0", "node0", "node1", "node1"};

TEST(Straggler, BalancedRunNamesNobody) {
  EXPECT_FALSE(find_straggler({0.40, 0.42, 0.38, 0.41}, 1.0, kTwoNodes));
  EXPECT_FALSE(find_straggler({0.0, 0.0, 0.0, 0.0}, 1.0, kTwoNodes));
  // Each rank waits in turn (noise): the spread stays under the margins.
  EXPECT_FALSE(find_straggler({0.30, 0.36, 0.33, 0.39}, 1.1, kTwoNodes));
}

TEST(Straggler, OneSlowRankIsNamedWithItsNode) {
  const auto s = find_straggler({1.20, 1.25, 1.18, 0.05}, 1.5, kTwoNodes);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ranks, std::vector<int>{3});
  EXPECT_EQ(s->node, "node1");
  EXPECT_FALSE(s->whole_node);
  EXPECT_DOUBLE_EQ(s->wait_s, 0.05);
  EXPECT_DOUBLE_EQ(s->others_median_wait_s, 1.20);
  EXPECT_EQ(describe(*s), "rank 3 on node1 — the others waited 1.20 s per step on it (it waited 0.05 s)");
}

TEST(Straggler, ASlowNodeIsNamedAsTheNode) {
  const auto s = find_straggler({0.90, 1.00, 0.10, 0.08}, 1.3, kTwoNodes);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ranks, (std::vector<int>{3, 2}));  // least wait first
  EXPECT_EQ(s->node, "node1");
  EXPECT_TRUE(s->whole_node);
  EXPECT_DOUBLE_EQ(s->others_median_wait_s, 0.95);
  EXPECT_EQ(describe(*s), "node1 (ranks 3, 2) — the others waited 0.95 s per step on them (the least of them waited 0.08 s)");
}

TEST(Straggler, HalfTheRanksAheadOfTheOtherHalfAreNamedOnlyAsANode) {
  // Measured on 4 ranks sharing 2 cores, one host, nobody slowed: ranks 2 and
  // 3 ran while 0 and 1 waited (tests/cluster/straggler_test.sh's control run).
  const std::vector<double> turns = {0.131, 0.133, 0.048, 0.052};
  EXPECT_FALSE(find_straggler(turns, 0.43, {"vm", "vm", "vm", "vm"}));
  EXPECT_FALSE(find_straggler(turns, 0.43, {}));
  // Two of four on different nodes: half the job, no one node.
  EXPECT_FALSE(find_straggler({0.131, 0.048, 0.133, 0.052}, 0.43, kTwoNodes));
  // The same waits where ranks 2 and 3 are node1's: the slow node.
  const auto s = find_straggler(turns, 0.43, kTwoNodes);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ranks, (std::vector<int>{2, 3}));
  EXPECT_TRUE(s->whole_node);
  // One rank of two is still named (below): the rule is for several ranks.
}

TEST(Straggler, TiesAreNamedInRankOrderAcrossNodes) {
  const std::vector<std::string> nodes = {"a", "b", "c", "d", "e", "f"};
  const auto s = find_straggler({0.8, 0.1, 0.8, 0.8, 0.1, 0.8}, 1.0, nodes);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ranks, (std::vector<int>{1, 4}));
  EXPECT_EQ(s->node, "");  // on two nodes: no one node to name
  EXPECT_FALSE(s->whole_node);
  EXPECT_EQ(describe(*s), "ranks 1, 4 — the others waited 0.80 s per step on them (the least of them waited 0.10 s)");
}

TEST(Straggler, MarginsAreAbsoluteAndRelative) {
  // Waits of milliseconds: the others wait 10x more, but 9 ms is nothing to chase.
  EXPECT_FALSE(find_straggler({0.010, 0.010, 0.010, 0.001}, 0.1, kTwoNodes));
  // A gap above 50 ms but under 10% of a long step.
  EXPECT_FALSE(find_straggler({0.30, 0.30, 0.30, 0.10}, 5.0, kTwoNodes));
  // A large gap, but the rank itself waits more than half of what the others do.
  EXPECT_FALSE(find_straggler({2.0, 2.0, 2.0, 1.2}, 3.0, kTwoNodes));
  EXPECT_TRUE(find_straggler({2.0, 2.0, 2.0, 0.9}, 3.0, kTwoNodes));
}

TEST(Straggler, TwoRanksAndOneRank) {
  const auto s = find_straggler({0.6, 0.0}, 1.0, {});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ranks, std::vector<int>{1});
  EXPECT_EQ(describe(*s), "rank 1 — the others waited 0.60 s per step on it (it waited 0.00 s)");
  EXPECT_FALSE(find_straggler({0.6}, 1.0, {}));
  EXPECT_THROW(find_straggler({0.6, 0.0}, 1.0, {"only-one"}), Error);
}

TEST(Straggler, OverARunTheFirstGatheredStepIsLeftOut) {
  // Step 1: rank 0 slow to start (the others wait for it); then rank 2 is slow.
  const std::vector<std::vector<double>> waits = {
      {0.0, 3.0, 3.0, 3.0}, {1.0, 1.1, 0.1, 0.9}, {1.2, 1.0, 0.0, 1.1}};
  const auto s = find_run_straggler(waits, {4.0, 1.4, 1.6}, kTwoNodes);
  ASSERT_TRUE(s);
  EXPECT_EQ(s->ranks, std::vector<int>{2});
  EXPECT_NEAR(s->wait_s, 0.05, 1e-12);
  EXPECT_NEAR(s->step_time_s, 1.5, 1e-12);
  EXPECT_NEAR(s->others_median_wait_s, 1.05, 1e-12);
  // One gathered step only: it counts.
  EXPECT_EQ(find_run_straggler({waits[0]}, {4.0}, kTwoNodes)->ranks, std::vector<int>{0});
  EXPECT_FALSE(find_run_straggler({}, {}, kTwoNodes));
}

}  // namespace
}  // namespace tessel::train
