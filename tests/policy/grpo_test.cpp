// GRPO's pieces on one process:
//   - advantages against hand-computed cases (leave-one-out and whole-group
//     baselines, std normalisation, a prompt with one valid sample, all
//     rewards alike, masked samples);
//   - the built-in verifiers;
//   - prompts with reference answers read from .jsonl, bad lines named;
//   - a step's rollouts laid out as micro batches: the response's tokens and
//     generation log-probs sit where the labels put them;
//   - every grpo.* / policy.generation.* / env.* key read, refused with a
//     message, or rejected when unknown;
//   - a run resumed from a checkpoint continues exactly as the uninterrupted
//     one (weights, optimizer, reference policy, prompt order, and the
//     sampler's seed of each step).
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "config/loader.h"
#include "core/error.h"
#include "data/byte_tokenizer.h"
#include "data/prompt_dataset.h"
#include "loss/cross_entropy.h"
#include "policy/advantages.h"
#include "policy/grpo_options.h"
#include "policy/grpo_recipe.h"
#include "policy/grpo_test_run.h"
#include "policy/logprob_goldens.h"
#include "policy/policy_batch.h"
#include "policy/verifier.h"
#include "support/source_tree.h"
#include "support/temp_dir.h"

namespace tessel::policy {
namespace {

constexpr double kEps = 1e-6;  // the normalisation's epsilon

TEST(GrpoAdvantages, LeaveOneOutWithNormalisation) {
  // Prompt 0: rewards 1, 0, 0, 1. For rollout 0 the others are {0, 0, 1}:
  // baseline 1/3, mean of squares 1/3, variance (1/3 - 1/9) * 3/2 = 1/3.
  // Prompt 1: rewards 0.5, 2 -> leave-one-out baselines 2 and 0.5, one
  // other each: no std, advantages -1.5 and 1.5.
  const std::vector<double> a = grpo_advantages({1, 0, 0, 1, 0.5, 2}, {0, 0, 0, 0, 1, 1},
                                                {true, true, true, true, true, true}, {true, true});
  const double std0 = std::sqrt(1.0 / 3.0);
  EXPECT_NEAR(a[0], (1.0 - 1.0 / 3.0) / (std0 + kEps), 1e-12);
  EXPECT_NEAR(a[1], (0.0 - 2.0 / 3.0) / (std0 + kEps), 1e-12);  // others {0, 1, 1}: baseline 2/3, same variance
  EXPECT_NEAR(a[2], a[1], 1e-12);
  EXPECT_NEAR(a[3], a[0], 1e-12);
  EXPECT_NEAR(a[4], -1.5, 1e-12);
  EXPECT_NEAR(a[5], 1.5, 1e-12);
}

TEST(GrpoAdvantages, WholeGroupBaselineAndNoNormalisation) {
  // Baseline over all four: 0.5; sample variance of {1, 0, 0, 1} = 1/3.
  const std::vector<bool> all(4, true);
  const std::vector<double> normalised = grpo_advantages({1, 0, 0, 1}, {7, 7, 7, 7}, all, {false, true});
  EXPECT_NEAR(normalised[0], 0.5 / (std::sqrt(1.0 / 3.0) + kEps), 1e-12);
  EXPECT_NEAR(normalised[1], -0.5 / (std::sqrt(1.0 / 3.0) + kEps), 1e-12);
  const std::vector<double> plain = grpo_advantages({1, 0, 0, 1}, {7, 7, 7, 7}, all, {false, false});
  EXPECT_EQ(plain, (std::vector<double>{0.5, -0.5, -0.5, 0.5}));
  // Leave-one-out without normalisation: r_i - mean of the others.
  const std::vector<double> loo = grpo_advantages({3, 1, 2}, {0, 0, 0}, {true, true, true}, {true, false});
  EXPECT_NEAR(loo[0], 3 - 1.5, 1e-12);
  EXPECT_NEAR(loo[1], 1 - 2.5, 1e-12);
  EXPECT_NEAR(loo[2], 2 - 2.0, 1e-12);
}

TEST(GrpoAdvantages, OneValidSampleAndEqualRewardsGiveZero) {
  // Prompt 0: one valid rollout (the other masked): zero for both.
  // Prompt 1: every reward 1: zero std, zero advantage (no division).
  // Prompt 2: three valid of four: the masked one is 0 and left out.
  const std::vector<double> a =
      grpo_advantages({1, 0, 1, 1, 1, 0, 1, 1, 5}, {0, 0, 1, 1, 1, 2, 2, 2, 2},
                      {true, false, true, true, true, true, true, true, false}, {true, true});
  for (int i = 0; i < 5; ++i) EXPECT_EQ(a[static_cast<size_t>(i)], 0.0) << i;
  // Prompt 2's valid rewards {0, 1, 1}: rollout 5's others {1, 1}: baseline
  // 1, variance 0 -> -1 undivided; rollouts 6, 7: others {0, 1}: baseline
  // 0.5, variance (0.5 - 0.25) * 2 = 0.5.
  EXPECT_NEAR(a[5], -1.0, 1e-12);
  EXPECT_NEAR(a[6], 0.5 / (std::sqrt(0.5) + kEps), 1e-12);
  EXPECT_NEAR(a[7], a[6], 1e-12);
  EXPECT_EQ(a[8], 0.0);
}

TEST(Verifiers, ExactMatchAndFinalNumber) {
  const auto exact = make_verifier("exact_match", "env.verifier");
  EXPECT_EQ(exact->reward("19", "19"), 1.0);
  EXPECT_EQ(exact->reward(" 19\n", "19"), 1.0);
  EXPECT_EQ(exact->reward("191", "19"), 0.0);
  EXPECT_EQ(exact->reward("cba", "abc"), 0.0);
  EXPECT_EQ(exact->reward("", "19"), 0.0);
  const auto number = make_verifier("final_number", "env.verifier");
  EXPECT_EQ(number->reward("so 3 + 4 is 7", "7"), 1.0);
  EXPECT_EQ(number->reward("7 then 8", "7"), 0.0);
  EXPECT_EQ(number->reward("it is -2.50", "-2.5"), 1.0);
  EXPECT_EQ(number->reward("no digits", "0"), 0.0);
  EXPECT_THROW(make_verifier("math", "env.verifier"), UsageError);
}

TEST(PromptDataset, ReadsInputsAndAnswersAndNamesBadLines) {
  test_support::TempDir dir;
  const data::ByteTokenizer tok(512);
  data::DatasetOptions options;
  options.sequence.max_input_seq_length = 12;
  const auto write = [&](const std::string& text) {
    const auto path = dir.path() / "p.jsonl";
    std::ofstream(path) << text;
    return path.string();
  };
  const data::PromptDataset set =
      data::load_prompt_dataset(write("{\"input\": \"1+2=\", \"output\": \"3\"}\n\n{\"input\": \"ab\", \"output\": \"x\", "
                                      "\"other\": 1}\n"),
                                tok, options);
  ASSERT_EQ(set.size(), 2);
  std::vector<int64_t> expected = {tok.bos_id()};
  for (int64_t id : tok.encode("1+2=")) expected.push_back(id);
  EXPECT_EQ(set[0].tokens, expected);
  EXPECT_EQ(set[0].answer, "3");
  EXPECT_EQ(set[1].answer, "x");
  try {
    (void)data::load_prompt_dataset(write("{\"input\": \"1+2=\", \"output\": \"3\"}\n{\"input\": \"x\"}\n"), tok, options);
    FAIL() << "a line without its answer is an error";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find(":2:"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("output"), std::string::npos) << e.what();
  }
  EXPECT_THROW(data::load_prompt_dataset(write("{\"input\": \"a very long prompt here\", \"output\": \"3\"}\n"), tok,
                                         options),
               UsageError);
  const data::PromptDataset demo = data::load_prompt_dataset("demo_sft", tok, data::DatasetOptions{});
  EXPECT_EQ(demo.size(), 480);
}

TEST(GrpoBatches, ResponsesSitWhereTheLabelsPutThem) {
  Rollouts r;
  r.prompts = {{1, 10, 11}, {1, 12}};
  r.responses.tokens = at::tensor({20, 21, 2, 22, 0, 0}, at::kLong).view({2, 3});
  r.responses.logprobs = at::tensor({-0.5f, -1.0f, -1.5f, -2.0f, 0.0f, 0.0f}).view({2, 3});
  r.responses.lengths = at::tensor({3, 1}, at::kLong);
  r.responses.stopped = at::tensor({1, 0}, at::kLong).to(at::kBool);
  r.rewards = {1, 0};
  r.valid = {true, false};
  r.advantages = {0.7, -0.3};
  const auto batches = rollout_micro_batches(r, 0, 2, 2, 4);
  ASSERT_EQ(batches.size(), 1u);
  const train::MicroBatch& mb = batches[0];
  // Rows: 1 10 11 20 21 2 | 1 12 22; padded to 8 (a multiple of 4).
  EXPECT_TRUE(at::equal(mb.input_ids, at::tensor({1, 10, 11, 20, 21, 2, 0, 0, 1, 12, 22, 0, 0, 0, 0, 0}, at::kLong)
                                          .view({2, 8})));
  const at::Tensor mask = mb.token_values.at(kTokenMask);
  EXPECT_TRUE(at::equal(mask, at::tensor({0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0}, at::kFloat).view({2, 8})));
  // Where the mask is 1 the label is the response token; elsewhere ignored.
  const int64_t x = loss::kIgnoreIndex;
  EXPECT_TRUE(at::equal(mb.labels, at::tensor(std::vector<int64_t>{x, x, 20, 21, 2, x, x, x, x, 22, x, x, x, x, x, x}, at::kLong).view({2, 8})));
  const at::Tensor gen = mb.token_values.at(kGenerationLogprobs);
  EXPECT_FLOAT_EQ(gen[0][2].item<float>(), -0.5f);
  EXPECT_FLOAT_EQ(gen[0][4].item<float>(), -1.5f);
  EXPECT_FLOAT_EQ(gen[1][1].item<float>(), -2.0f);
  EXPECT_FLOAT_EQ(mb.token_values.at(kAdvantages)[1][1].item<float>(), -0.3f);
  EXPECT_TRUE(at::equal(mb.row_values.at(kSampleMask), at::tensor({1.0f, 0.0f})));
  EXPECT_EQ(mb.num_tokens, 6 + 3);
}

config::Config grpo_config(const std::vector<std::string>& overrides) {
  return config::load_config(test_support::source_tree() / "examples" / "configs" / "grpo.yaml", overrides);
}

GrpoOptions options_of(const config::Config& c) {
  return grpo_options_from(c, train::train_options_from(c, grpo_section()));
}

TEST(GrpoKeys, EveryKeyIsReadOrRefused) {
  const GrpoOptions d = options_of(grpo_config({}));
  EXPECT_EQ(d.num_prompts_per_step, 16);
  EXPECT_EQ(d.num_generations_per_prompt, 8);
  EXPECT_EQ(d.max_new_tokens, 512);
  EXPECT_EQ(d.verifier, "exact_match");
  EXPECT_TRUE(d.sft_warmup.empty());
  // Each key changes what it names.
  const GrpoOptions o = options_of(grpo_config(
      {"grpo.num_prompts_per_step=4", "grpo.num_generations_per_prompt=2", "grpo.normalize_rewards=false",
       "grpo.use_leave_one_out_baseline=false", "grpo.overlong_filtering=true", "grpo.max_val_samples=5",
       "grpo.val_batch_size=3", "policy.generation.max_new_tokens=7", "policy.generation.temperature=0.5",
       "policy.generation.top_p=0.9", "policy.generation.top_k=20", "policy.generation.stop_token_ids=[4,5]",
       "policy.generation.decoding_layout=replicated", "policy.generation_batch_size=6",
       "policy.logprob_batch_size=2", "env.verifier=final_number", "sft_warmup=x.yaml"}));
  EXPECT_EQ(o.num_prompts_per_step, 4);
  EXPECT_EQ(o.num_generations_per_prompt, 2);
  EXPECT_FALSE(o.advantages.normalize_rewards);
  EXPECT_FALSE(o.advantages.leave_one_out_baseline);
  EXPECT_TRUE(o.overlong_filtering);
  EXPECT_EQ(o.max_val_samples, 5);
  EXPECT_EQ(o.val_batch_size, 3);
  EXPECT_EQ(o.max_new_tokens, 7);
  EXPECT_EQ(o.sampling.temperature, 0.5);
  EXPECT_EQ(o.sampling.top_p, 0.9);
  EXPECT_EQ(o.sampling.top_k, 20);
  EXPECT_EQ(o.stop_token_ids, (std::vector<int64_t>{4, 5}));
  EXPECT_EQ(o.decoding_layout, DecodingLayout::Replicated);
  EXPECT_EQ(o.generation_batch_size, 6);
  EXPECT_EQ(o.logprob_batch_size, 2);
  EXPECT_EQ(o.verifier, "final_number");
  EXPECT_EQ(o.sft_warmup, "x.yaml");
  // Values tessel cannot honour, and unknown keys, are refused.
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"policy.train_global_batch_size=100"},
           {"grpo.max_rollout_turns=2"},
           {"grpo.async_grpo.enabled=true"},
           {"+grpo.val_batches=2"},
           {"policy.generation.backend=vllm"},
           {"policy.generation.stop_strings=[\"x\"]"},
           {"policy.generation.colocated.enabled=false"},
           {"+policy.generation.vllm_cfg.tensor_parallel_size=2"},
           {"policy.generation.temperature=0"},
           {"policy.generation.top_p=0"},
           {"policy.generation.decoding_layout=pipeline"},
           {"policy.logprob_chunk_size=1024"},
           {"policy.sequence_packing.enabled=true"},
           {"env.verifier=math"},
           {"+env.math.num_workers=2"},
           {"+grpo.num_generations=4"},
           {"+policy.generation.top_a=1"},
       }) {
    EXPECT_THROW(options_of(grpo_config(bad)), UsageError) << bad[0];
  }
}

// `steps` GRPO steps of a tiny Llama with checkpoints in `dir` every 2 steps
// (resuming from the latest there), rewarded by the byte-sum rule.
train::TrainResult grpo_run(const std::string& dir, int64_t steps) {
  const config::Config c = grpo_config(
      {"grpo.num_prompts_per_step=2", "grpo.num_generations_per_prompt=4", "grpo.max_num_steps=" + std::to_string(steps),
       "grpo.val_period=0", "grpo.val_at_start=false", "grpo.val_at_end=false", "policy.train_micro_batch_size=4",
       "policy.max_total_sequence_length=32", "policy.generation.max_new_tokens=6", "policy.optimizer.kwargs.lr=0.003",
       "policy.optimizer.kwargs.eps=1e-5", "policy.scheduler=null", "loss_fn.reference_policy_kl_penalty=0.05",
       "data.validation=null", "checkpointing.enabled=true", "checkpointing.save_period=2",
       "checkpointing.checkpoint_dir=" + dir});
  return testing::run_grpo_with_byte_sums(c, testing::one_process_mesh());
}

TEST(GrpoResume, AResumedRunContinuesAsTheUninterruptedOne) {
  test_support::TempDir dir;
  const train::TrainResult uninterrupted = grpo_run((dir.path() / "whole").string(), 4);
  ASSERT_EQ(uninterrupted.steps.size(), 4u);
  (void)grpo_run((dir.path() / "resumed").string(), 2);
  const train::TrainResult resumed = grpo_run((dir.path() / "resumed").string(), 4);
  ASSERT_EQ(resumed.steps.size(), 2u);
  for (size_t s = 0; s < 2; ++s) {
    const auto& want = uninterrupted.steps[s + 2];
    EXPECT_EQ(resumed.steps[s].step, want.step);
    EXPECT_NEAR(resumed.steps[s].loss, want.loss, 1e-6 * std::max(1.0, std::abs(want.loss))) << "step " << want.step;
    for (const char* key : {"reward_mean", "kl_penalty", "advantage_abs_mean"}) {
      EXPECT_NEAR(train::metric(resumed.steps[s].objective_metrics, key),
                  train::metric(want.objective_metrics, key), 1e-6)
          << key << " at step " << want.step;
    }
  }
  // The KL term is on and the weights moved: the reference came back from the checkpoint.
  EXPECT_GT(train::metric(resumed.steps.back().objective_metrics, "kl_penalty"), 0.0);
}

}  // namespace
}  // namespace tessel::policy
