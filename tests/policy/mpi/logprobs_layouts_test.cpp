// get_logprobs on every layout equals Hugging Face transformers' float64
// log-probs (tests/golden/<case>/logprobs.json) within 1e-5: FSDP 2, HSDP
// 2x2, TP 2 (vocab-parallel: the vocabularies 97 and 101 do not divide by 2),
// TP 2 + SP, CP 2 (whole rows again from each rank's chunks), TP 2 x FSDP 2,
// and for the mixture-of-experts cases EP 2 and EP 2 x FSDP 2. 4 ranks, one
// launch; layouts of 2 ranks run twice (ranks {0,1} and {2,3}).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "dist/communicator.h"
#include "policy/logprob_goldens.h"
#include "policy/logprobs.h"
#include "policy/policy_layouts.h"

namespace tessel::policy {
namespace {

void expect_golden_on(const std::string& name, const testing::Layout& layout) {
  SCOPED_TRACE(name + " at " + layout.name);
  const testing::LogprobGolden g = testing::load_logprob_golden(name);
  const dist::DeviceMesh mesh = layout.mesh();
  train::ShardedModel model = testing::golden_model(name, mesh, layout.overrides());
  for (size_t t = 0; t < g.temperatures.size(); ++t) {
    const at::Tensor got = get_logprobs(model, mesh, g.input_ids, g.input_lengths, g.temperatures[t]);
    const double diff = (got.to(at::kDouble) - g.logprobs[t]).abs().max().item<double>();
    EXPECT_LT(diff, 1e-5) << "temperature " << g.temperatures[t];
  }
}

class LogprobsOnEveryLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks";
  }
};

TEST_F(LogprobsOnEveryLayout, DenseFamilies) {
  for (const char* name : {"llama", "qwen2", "mistral", "gemma3_softcap"}) {
    for (const auto& layout : testing::dense_layouts()) expect_golden_on(name, layout);
  }
}

TEST_F(LogprobsOnEveryLayout, MixtureOfExperts) {
  for (const char* name : {"qwen3_moe", "mixtral"}) {
    for (const auto& layout : testing::expert_layouts()) expect_golden_on(name, layout);
    expect_golden_on(name, {"fsdp 2", 2});
    expect_golden_on(name, {"tp 2", 2, 2});
  }
}

}  // namespace
}  // namespace tessel::policy
