// DistributedSampler: coverage of an epoch across dp ranks, the split of a
// step into ranks and micro batches (hand-written for shuffle = false), and
// resume from a saved state.
#include "data/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "data_test_util.h"

namespace tessel::data {
namespace {

using testing::expect_error_mentions;
using Rows = std::vector<int64_t>;
using Step = std::vector<std::vector<int64_t>>;

SamplerOptions opts(int64_t g, int64_t m, int64_t d, int64_t rank, bool shuffle = true,
                    uint64_t seed = 42) {
  SamplerOptions o;
  o.global_batch_size = g;
  o.micro_batch_size = m;
  o.dp_size = d;
  o.dp_rank = rank;
  o.shuffle = shuffle;
  o.seed = seed;
  return o;
}

TEST(DistributedSampler, UnshuffledSplitIsRankThenMicroBatch) {
  // N 24, G 8, M 2, D 2: accumulation 2; step 0 covers rows 0..7, dp rank 0
  // rows 0..3, dp rank 1 rows 4..7, each as two micro batches of 2.
  DistributedSampler r0(24, opts(8, 2, 2, 0, false));
  DistributedSampler r1(24, opts(8, 2, 2, 1, false));
  EXPECT_EQ(r0.accumulation_steps(), 2);
  EXPECT_EQ(r0.steps_per_epoch(), 3);
  EXPECT_EQ(r0.next_step(), (Step{{0, 1}, {2, 3}}));
  EXPECT_EQ(r1.next_step(), (Step{{4, 5}, {6, 7}}));
  EXPECT_EQ(r0.next_step(), (Step{{8, 9}, {10, 11}}));
  EXPECT_EQ(r1.next_step(), (Step{{12, 13}, {14, 15}}));
}

TEST(DistributedSampler, EpochCoversDatasetOnceAcrossDpRanks) {
  const int64_t n = 48;
  for (int64_t d : {1, 2, 3, 4}) {
    const int64_t g = 12;
    const int64_t m = g / d / (d == 1 ? 3 : 1);  // accumulation 3 on one rank, 1 otherwise
    std::vector<DistributedSampler> ranks;
    for (int64_t r = 0; r < d; ++r) ranks.emplace_back(n, opts(g, m, d, r));
    Rows all;
    for (int64_t s = 0; s < ranks[0].steps_per_epoch(); ++s) {
      for (auto& rank : ranks) {
        for (const auto& micro : rank.next_step()) {
          EXPECT_EQ(static_cast<int64_t>(micro.size()), m);
          all.insert(all.end(), micro.begin(), micro.end());
        }
      }
    }
    std::sort(all.begin(), all.end());
    Rows expected(n);
    std::iota(expected.begin(), expected.end(), int64_t{0});
    EXPECT_EQ(all, expected) << "dp size " << d;
    EXPECT_EQ(ranks[0].epoch(), 1);
  }
}

TEST(DistributedSampler, TpRanksOfOneDpRankSeeTheSameRows) {
  // tp ranks 0 and 1 of dp rank 1 (dp 2) construct the same sampler.
  DistributedSampler tp0(40, opts(8, 2, 2, 1));
  DistributedSampler tp1(40, opts(8, 2, 2, 1));
  DistributedSampler other_dp(40, opts(8, 2, 2, 0));
  for (int s = 0; s < 12; ++s) {
    Step a = tp0.next_step();
    EXPECT_EQ(a, tp1.next_step());
    EXPECT_NE(a, other_dp.next_step());
  }
}

TEST(DistributedSampler, ShuffleIsSeededPerEpochAndDropsTheTail) {
  DistributedSampler a(20, opts(8, 4, 1, 0, true, 7));
  DistributedSampler b(20, opts(8, 4, 1, 0, true, 7));
  DistributedSampler c(20, opts(8, 4, 1, 0, true, 8));
  EXPECT_EQ(a.epoch_order(0), b.epoch_order(0));
  EXPECT_NE(a.epoch_order(0), c.epoch_order(0));
  EXPECT_NE(a.epoch_order(0), a.epoch_order(1));
  Rows sorted = a.epoch_order(1);
  std::sort(sorted.begin(), sorted.end());
  Rows expected(20);
  std::iota(expected.begin(), expected.end(), int64_t{0});
  EXPECT_EQ(sorted, expected);
  // 20 rows, global batch 8: two steps per epoch, the last 4 rows are skipped.
  const Rows order0 = a.epoch_order(0);
  const Rows order1 = a.epoch_order(1);
  EXPECT_EQ(a.next_step(), (Step{Rows(order0.begin(), order0.begin() + 4),
                                 Rows(order0.begin() + 4, order0.begin() + 8)}));
  a.next_step();
  EXPECT_EQ(a.state().epoch, 1);
  EXPECT_EQ(a.state().position, 0);
  EXPECT_EQ(a.peek_global_batch(), Rows(order1.begin(), order1.begin() + 8));
}

TEST(DistributedSampler, ResumeEqualsUninterruptedRun) {
  DistributedSampler uninterrupted(20, opts(8, 2, 2, 1));
  std::vector<Step> expected;
  for (int s = 0; s < 7; ++s) expected.push_back(uninterrupted.next_step());

  DistributedSampler first(20, opts(8, 2, 2, 1));
  for (int s = 0; s < 3; ++s) EXPECT_EQ(first.next_step(), expected[static_cast<size_t>(s)]);
  const std::string saved = first.state().to_json();

  DistributedSampler resumed(20, opts(8, 2, 2, 1));
  resumed.load_state(SamplerState::from_json(saved));
  EXPECT_EQ(resumed.state().epoch, 1);
  EXPECT_EQ(resumed.state().position, 8);
  for (int s = 3; s < 7; ++s) EXPECT_EQ(resumed.next_step(), expected[static_cast<size_t>(s)]);
}

TEST(DistributedSampler, ResumeOnAnotherDpSizeKeepsTheGlobalBatches) {
  DistributedSampler two_ranks(40, opts(8, 2, 2, 0));
  two_ranks.next_step();
  DistributedSampler one_rank(40, opts(8, 4, 1, 0));
  one_rank.load_state(two_ranks.state());
  EXPECT_EQ(one_rank.peek_global_batch(), two_ranks.peek_global_batch());
}

TEST(DistributedSampler, Errors) {
  expect_error_mentions<UsageError>([] { DistributedSampler s(100, opts(10, 2, 3, 0)); },
                                    {"10", "micro batch size 2", "data-parallel size 3", "6"});
  expect_error_mentions<UsageError>([] { DistributedSampler s(5, opts(8, 2, 2, 0)); },
                                    {"5 examples", "8"});
  DistributedSampler s(40, opts(8, 2, 2, 0));
  SamplerState other = s.state();
  other.dataset_size = 41;
  expect_error_mentions<UsageError>([&] { s.load_state(other); }, {"41", "40"});
  expect_error_mentions([] { SamplerState::from_json("{\"epoch\": 1}"); }, {"position"});
}

}  // namespace
}  // namespace tessel::data
