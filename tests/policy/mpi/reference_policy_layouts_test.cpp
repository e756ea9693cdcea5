// The reference policy on every layout (4 ranks, one launch): after the
// policy trained a few steps, get_reference_policy_logprobs equals the
// initial model's log-probs (and HF transformers' goldens), the policy's own
// shards come back bit for bit, and the copies cost each rank exactly its own
// local shards (allocator-counted): at FSDP 2, HSDP 2x2, TP 2 (a tied
// embedding kept gathered in the root), TP 2 + SP, CP 2, FSDP 2 with
// node-shared parameters (the swap writes memory the node's ranks share), and
// EP 2 for a mixture-of-experts model.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include "core/counting_allocator.h"
#include "dist/communicator.h"
#include "optim/adamw.h"
#include "policy/logprob_goldens.h"
#include "policy/logprobs.h"
#include "policy/policy_layouts.h"
#include "policy/reference_policy.h"
#include "train/train_step.h"

namespace tessel::policy {
namespace {

void check_on(const std::string& name, const testing::Layout& layout, const std::vector<std::string>& extra = {}) {
  SCOPED_TRACE(name + " at " + layout.name);
  const testing::LogprobGolden g = testing::load_logprob_golden(name);
  const dist::DeviceMesh mesh = layout.mesh();
  auto overrides = layout.overrides();
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  train::ShardedModel model = testing::golden_model(name, mesh, overrides);
  const at::Tensor initial = get_logprobs(model, mesh, g.input_ids, g.input_lengths);
  EXPECT_LT((initial.to(at::kDouble) - g.logprobs[0]).abs().max().item<double>(), 1e-5);

  const int64_t before = CountingCpuAllocator::live_bytes();
  ReferencePolicy reference(model);
  EXPECT_EQ(CountingCpuAllocator::live_bytes() - before, model.local_param_bytes());

  optim::AdamW optimizer(model.params, optim::AdamWOptions{});
  train::MicroBatch mb;
  mb.input_ids = g.input_ids;
  const at::Tensor targets = next_token_targets(g.input_ids, g.input_lengths);
  mb.labels = targets.masked_fill(targets.lt(0), -100);
  mb.num_tokens = g.input_lengths.sum().item<int64_t>();
  for (int i = 0; i < 3; ++i) train::train_step(model, optimizer, mesh, {mb}, 1e-2, 1.0);
  const at::Tensor trained = get_logprobs(model, mesh, g.input_ids, g.input_lengths);
  std::vector<at::Tensor> shards;
  for (const auto& p : model.params) shards.push_back(p.detach().clone());

  const at::Tensor ref = get_reference_policy_logprobs(reference, model, mesh, g.input_ids, g.input_lengths);
  EXPECT_TRUE(at::equal(ref, initial)) << (ref - initial).abs().max().item<float>();
  for (size_t i = 0; i < shards.size(); ++i) EXPECT_TRUE(at::equal(model.params[i].detach(), shards[i])) << i;
  EXPECT_TRUE(at::equal(get_logprobs(model, mesh, g.input_ids, g.input_lengths), trained));
}

class ReferencePolicyOnEveryLayout : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks";
    CountingCpuAllocator::install();
  }
};

TEST_F(ReferencePolicyOnEveryLayout, DenseModels) {
  for (const char* name : {"llama", "qwen2"}) {
    for (const auto& layout : testing::dense_layouts()) check_on(name, layout);
  }
}

TEST_F(ReferencePolicyOnEveryLayout, NodeSharedParameters) {
  check_on("llama", {"fsdp 2", 2}, {"policy.dtensor_cfg.node_shared_params=true"});
}

TEST_F(ReferencePolicyOnEveryLayout, ExpertParallel) {
  for (const auto& layout : testing::expert_layouts()) check_on("qwen3_moe", layout);
}

}  // namespace
}  // namespace tessel::policy
