// `tessel plan` on a mixture-of-experts model: Mixtral-8x7B (the real config,
// tests/models/hf_configs) FSDP-sharded over 16 ranks counts every expert and
// router parameter once, and each rank's share matches a hand computation
// from the published dimensions (the 8-row routers leave ranks 8..15 none of
// theirs). With expert parallelism (EP 8 x ep_shard 2 on 16 ranks) each rank
// holds one expert per layer, half its rows, and the token exchange per step
// is the hand-computed closed form for uniform routing. Tensor parallelism
// splits only attention (routers and experts whole); sequence parallelism
// and tp with ep are refused with exit 2; --predict under EP keeps the token
// exchange inside nodes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "support/run_tessel.h"
#include "support/source_tree.h"

namespace {

using ::testing::HasSubstr;
using tessel::test_support::run_tessel;

const std::string kMixtral =
    "policy.model_name=" +
    (tessel::test_support::source_tree() / "tests/models/hf_configs/mistralai__Mixtral-8x7B-v0.1").string();

TEST(MoePlanCli, Mixtral8x7BOnSixteenRanksCountsEveryExpertOnce) {
  const auto r = run_tessel("plan --world 16 " + kMixtral + " --json", /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  // hidden 4096, 8 experts of 14336, vocab 32000, 32 layers, 32 heads and 8
  // kv heads of 128, untied.
  const int64_t attention = 4096LL * (4096 + 1024 + 1024 + 4096);
  const int64_t router = 8LL * 4096;
  const int64_t experts = 8LL * 3 * 14336 * 4096;
  const int64_t total = 32 * (attention + router + experts + 2 * 4096) + 2LL * 32000 * 4096 + 4096;
  EXPECT_EQ(total, 46702792704LL);  // the published 46.7B
  EXPECT_EQ(j["model_param_elements"].get<int64_t>(), total);
  // Every dim 0 but the routers' (8 rows) divides by 16.
  ASSERT_EQ(j["ranks"].size(), 16u);
  int64_t sum = 0;
  for (size_t rank = 0; rank < 16; ++rank) {
    const int64_t want = (total - 32 * router) / 16 + (rank < 8 ? 32 * 4096 : 0);
    const int64_t got = j["ranks"][rank]["param_elements"].get<int64_t>();
    EXPECT_EQ(got, want) << "rank " << rank;
    sum += got;
  }
  EXPECT_EQ(sum, total);
}

TEST(MoePlanCli, Mixtral8x7BWithEp8HoldsOneExpertPerLayerPerRank) {
  const auto r = run_tessel("plan --world 16 " + kMixtral +
                                " policy.dtensor_cfg.expert_parallel_size=8 policy.precision=float32"
                                " policy.max_total_sequence_length=4096 policy.train_micro_batch_size=1"
                                " policy.train_global_batch_size=16 policy.dtensor_cfg.activation_checkpointing=false"
                                " --json",
                            /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  const int64_t attention = 4096LL * (4096 + 1024 + 1024 + 4096);
  const int64_t router = 8LL * 4096;
  const int64_t expert = 3LL * 14336 * 4096;
  const int64_t dense = 32 * (attention + router + 2 * 4096) + 2LL * 32000 * 4096 + 4096;
  ASSERT_EQ(j["ranks"].size(), 16u);
  int64_t sum = 0;
  for (size_t rank = 0; rank < 16; ++rank) {
    const auto& got = j["ranks"][rank];
    // The dense part over all 16 ranks as without EP; experts: rank r is ep
    // position r % 8 (expert r % 8 of every layer), ep_shard position r / 8
    // (half of each expert's rows).
    const int64_t dense_share = (dense - 32 * router) / 16 + (rank < 8 ? 32 * 4096 : 0);
    const int64_t expert_share = 32 * expert / 2;
    EXPECT_EQ(got["ep"].get<int>(), static_cast<int>(rank % 8)) << rank;
    EXPECT_EQ(got["expert_elements"].get<int64_t>(), expert_share) << rank;
    EXPECT_EQ(got["param_elements"].get<int64_t>(), dense_share + expert_share) << rank;
    sum += got["param_elements"].get<int64_t>();
  }
  EXPECT_EQ(sum, 46702792704LL);
  const auto& e = j["experts"];
  EXPECT_EQ(e["ep"].get<int>(), 8);
  EXPECT_EQ(e["ep_shard"].get<int>(), 2);
  EXPECT_EQ(e["experts_per_rank"].get<int>(), 1);
  EXPECT_EQ(e["sparse_layers"].get<int>(), 32);
  EXPECT_EQ(e["expert_bytes_per_rank"].get<int64_t>(), 32 * expert / 2 * 4);
  // dp 16 and global batch 16: one micro batch of 4096 tokens per rank; each
  // of 32 layers sends 7/8 of its 4096 x 2 assignments away and gets as many
  // back, fp32 rows of 4096; backward the same rows again; counts: 1 int64
  // to each of 7 peers per layer.
  const int64_t rows_off = 32 * (4096 * 2 * 7 / 8);
  const int64_t row_bytes = 2 * rows_off * 4096 * 4;
  const auto& a = e["all_to_all"];
  EXPECT_EQ(a["forward_calls_per_rank"].get<int64_t>(), 32);
  EXPECT_EQ(a["rows_off_rank_per_rank"].get<int64_t>(), rows_off);
  EXPECT_EQ(a["bytes_per_rank"].get<int64_t>(), 32 * 7 * 8 + 2 * row_bytes);
  EXPECT_EQ(a["bytes_all_ranks"].get<int64_t>(), 16 * (32 * 7 * 8 + 2 * row_bytes));
  // The text form says the same in words.
  const auto text = run_tessel("plan --world 16 " + kMixtral + " policy.dtensor_cfg.expert_parallel_size=8");
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_THAT(text.output, HasSubstr("experts: 8 per sparse layer over ep 8 (1 per rank, their rows over ep_shard 2)"));
  EXPECT_THAT(text.output, HasSubstr("token exchange per step (all-to-all, estimate for uniform routing)"));
  EXPECT_THAT(text.output, HasSubstr("(experts 7..7)"));
}

TEST(MoePlanCli, TensorParallelismSplitsOnlyTheDensePart) {
  const auto r = run_tessel("plan --world 2 " + kMixtral + " policy.dtensor_cfg.tensor_parallel_size=2 --json",
                            /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["plan"]["source"].get<std::string>(), "optimized");
  bool attention = false;
  for (const auto& m : j["modules"]) {
    const std::string path = m["module"].get<std::string>();
    EXPECT_EQ(path.find("block_sparse_moe"), std::string::npos) << path;
    attention = attention || path.find("self_attn.q_proj") != std::string::npos;
  }
  EXPECT_TRUE(attention);
  // Every tp rank holds all 8 experts of every layer whole (1 dp rank).
  EXPECT_EQ(j["ranks"][0]["expert_elements"].get<int64_t>(), 32LL * 8 * 3 * 14336 * 4096);
}

// --predict under EP 2 on 2 nodes x 2 ranks: the ep groups (consecutive
// ranks) stay inside a node, the experts' ep_shard groups cross nodes.
TEST(MoePlanCli, PredictWithEpPutsTheTokenExchangeInsideNodes) {
  const auto r = run_tessel("plan --world 4 " + kMixtral +
                                " policy.dtensor_cfg.expert_parallel_size=2 cluster.num_nodes=2 cluster.gpus_per_node=2"
                                " --predict --json --gflops 100 --inter-node-gbit 1 --intra-node-gbit 10",
                            /*merge_stderr=*/false);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = nlohmann::json::parse(r.output);
  const auto& bytes = j["prediction"]["this_layout"]["bytes_per_step"];
  EXPECT_EQ(bytes["ep"]["other_node"].get<int64_t>(), 0);
  // The token exchange of the plan's own estimate, plus the gradient norm's
  // fp64 sum over each ep pair (a reduce-scatter and an all-gather of one
  // element: 8 bytes from each of the 4 ranks).
  EXPECT_EQ(bytes["ep"]["same_node"].get<int64_t>(), j["experts"]["all_to_all"]["bytes_all_ranks"].get<int64_t>() + 4 * 8);
  EXPECT_GT(bytes["ep_shard"]["other_node"].get<int64_t>(), 0);
  EXPECT_EQ(bytes["ep_shard"]["same_node"].get<int64_t>(), 0);
}

TEST(MoePlanCli, SequenceParallelAndTpWithEpAreRefused) {
  auto r = run_tessel("plan --world 4 " + kMixtral +
                      " policy.dtensor_cfg.tensor_parallel_size=2 policy.dtensor_cfg.sequence_parallel=true");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("mixture-of-experts"));
  EXPECT_THAT(r.output, HasSubstr("sequence_parallel=false"));
  r = run_tessel("plan --world 4 " + kMixtral + " policy.dtensor_cfg.tensor_parallel_size=2 policy.dtensor_cfg.expert_parallel_size=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("set one of them to 1"));

  r = run_tessel("plan --world 4 " + kMixtral + " policy.dtensor_cfg.expert_parallel_size=3");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("world size 4 is not divisible"));
  r = run_tessel("plan --world 6 " + kMixtral + " policy.dtensor_cfg.expert_parallel_size=3");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("8 experts of MixtralForCausalLM do not split evenly over 3 ranks"));
  EXPECT_THAT(r.output, HasSubstr("{1, 2, 4, 8}"));
  r = run_tessel("plan --world 4 policy.model_name=tiny-llama policy.dtensor_cfg.expert_parallel_size=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("needs a mixture-of-experts model"));
}

}  // namespace
