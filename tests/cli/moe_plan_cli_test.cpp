// `tessel plan` on a mixture-of-experts model: Mixtral-8x7B (the real config,
// tests/models/hf_configs) FSDP-sharded over 16 ranks counts every expert and
// router parameter once, and each rank's share matches a hand computation
// from the published dimensions (the 8-row routers leave ranks 8..15 none of
// theirs); tensor and expert parallelism are refused with exit 2.
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

TEST(MoePlanCli, TensorAndExpertParallelismAreRefused) {
  auto r = run_tessel("plan --world 4 " + kMixtral + " policy.dtensor_cfg.tensor_parallel_size=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("mixture-of-experts"));
  EXPECT_THAT(r.output, HasSubstr("tensor_parallel_size=1"));
  r = run_tessel("plan --world 4 " + kMixtral + " policy.dtensor_cfg.expert_parallel_size=2");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("does not model expert parallelism"));
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
