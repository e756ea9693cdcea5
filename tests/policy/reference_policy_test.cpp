// The reference policy on one process: after the policy has trained (its
// weights moved), the reference's log-probs are the initial model's, the
// policy's own log-probs and shards come back bit for bit after the swap,
// the copies cost one set of local shards and the swap no more than its 1 MiB
// buffer (both counted by the allocator wrapper, from outside), and a
// checkpoint keeps the reference: loaded into a fresh model it gives the same
// reference log-probs.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <filesystem>
#include <map>

#include "core/counting_allocator.h"
#include "core/error.h"
#include "optim/adamw.h"
#include "policy/logprob_goldens.h"
#include "policy/logprobs.h"
#include "policy/reference_policy.h"
#include "support/temp_dir.h"
#include "train/checkpoint.h"
#include "train/train_step.h"

namespace tessel::policy {
namespace {

// A few SFT steps on the golden batch: the weights move, as training moves them.
void train_a_little(train::ShardedModel& model, const dist::DeviceMesh& mesh, const testing::LogprobGolden& g) {
  optim::AdamW optimizer(model.params, optim::AdamWOptions{});
  train::MicroBatch mb;
  mb.input_ids = g.input_ids;
  mb.labels = next_token_targets(g.input_ids, g.input_lengths).masked_fill(
      next_token_targets(g.input_ids, g.input_lengths).lt(0), -100);
  mb.num_tokens = g.input_lengths.sum().item<int64_t>();
  for (int i = 0; i < 3; ++i) train::train_step(model, optimizer, mesh, {mb}, 1e-2, 1.0);
}

std::vector<at::Tensor> shard_copies(train::ShardedModel& model) {
  std::vector<at::Tensor> out;
  for (const auto& p : model.params) out.push_back(p.detach().clone());
  return out;
}

TEST(ReferencePolicy, KeepsTheInitialWeightsAndRestoresThePolicyBitForBit) {
  CountingCpuAllocator::install();
  const dist::DeviceMesh mesh = testing::one_process_mesh();
  for (const char* name : {"llama", "qwen2", "gemma3"}) {  // untied lm_head, tied, tied + softcap-free gemma
    SCOPED_TRACE(name);
    const testing::LogprobGolden g = testing::load_logprob_golden(name);
    train::ShardedModel model = testing::golden_model(name, mesh);
    const at::Tensor initial = get_logprobs(model, mesh, g.input_ids, g.input_lengths, 0.6);

    const int64_t before = CountingCpuAllocator::live_bytes();
    ReferencePolicy reference(model);
    EXPECT_EQ(CountingCpuAllocator::live_bytes() - before, model.local_param_bytes())
        << "the copies are one set of local shards";
    EXPECT_EQ(reference.bytes(), model.local_param_bytes());

    train_a_little(model, mesh, g);
    const at::Tensor trained = get_logprobs(model, mesh, g.input_ids, g.input_lengths, 0.6);
    ASSERT_GT((trained - initial).abs().max().item<float>(), 1e-3) << "training did not move the policy";
    const auto shards = shard_copies(model);

    const at::Tensor ref = get_reference_policy_logprobs(reference, model, mesh, g.input_ids, g.input_lengths, 0.6);
    EXPECT_TRUE(at::equal(ref, initial)) << (ref - initial).abs().max().item<float>();
    for (size_t i = 0; i < shards.size(); ++i) EXPECT_TRUE(at::equal(model.params[i].detach(), shards[i])) << i;
    EXPECT_TRUE(at::equal(get_logprobs(model, mesh, g.input_ids, g.input_lengths, 0.6), trained));

    // The swap itself: nothing retained, a peak of at most its buffer.
    const int64_t live = CountingCpuAllocator::live_bytes();
    CountingCpuAllocator::reset_peak();
    reference.with_reference_weights(model, mesh, [] {});
    EXPECT_EQ(CountingCpuAllocator::live_bytes(), live);
    EXPECT_LE(CountingCpuAllocator::peak_bytes() - live, int64_t{1} << 20);
  }
}

TEST(ReferencePolicy, CheckpointsKeepTheReference) {
  const dist::DeviceMesh mesh = testing::one_process_mesh();
  const testing::LogprobGolden g = testing::load_logprob_golden("qwen2");
  test_support::TempDir dir;
  train::ShardedModel model = testing::golden_model("qwen2", mesh);
  ReferencePolicy reference(model);
  const at::Tensor initial = get_logprobs(model, mesh, g.input_ids, g.input_lengths);
  train_a_little(model, mesh, g);
  const at::Tensor trained = get_logprobs(model, mesh, g.input_ids, g.input_lengths);
  train::save_checkpoint(dir.path(), {3, {}, {}}, model, nullptr, mesh, testing::recipe({}), {}, reference.shard_sets());

  // A fresh model whose "initial" weights are the trained ones: loading
  // restores the policy and, separately, the saved reference.
  train::ShardedModel resumed = testing::golden_model("qwen2", mesh);
  ReferencePolicy resumed_reference(resumed);
  train::load_checkpoint(dir.path() / "step_3", resumed, nullptr, &resumed_reference.shard_sets());
  EXPECT_TRUE(at::allclose(get_logprobs(resumed, mesh, g.input_ids, g.input_lengths), trained, 0, 1e-6));
  EXPECT_TRUE(at::allclose(
      get_reference_policy_logprobs(resumed_reference, resumed, mesh, g.input_ids, g.input_lengths), initial, 0, 1e-6));

  // A checkpoint without a reference cannot resume a run that needs one.
  train::save_checkpoint(dir.path(), {4, {}, {}}, model, nullptr, mesh, testing::recipe({}), {});
  EXPECT_THROW(train::load_checkpoint(dir.path() / "step_4", resumed, nullptr, &resumed_reference.shard_sets()), Error);
}

}  // namespace
}  // namespace tessel::policy
