// Training with the policy losses on every layout against one process (SPEC
// 8, SPEC 11), 4 ranks in one launch: 10 optimizer steps give the same loss,
// objective metrics, grad norm and valid-token counts per step and the same
// final parameters at FSDP 2, HSDP 2x2, TP 2 (vocab-parallel log-probs), TP 2
// + SP, CP 2, TP 2 x FSDP 2, and for a mixture-of-experts preset EP 2 and
// EP 2 x FSDP 2:
//   - the clipped policy-gradient loss on fixed rollouts, as GRPO runs it: per
//     rollout batch the previous log-probs from the policy, the reference's
//     from the reference policy, generation log-probs that differ from the
//     previous ones (a sampler's mismatch), advantages per row, a masked
//     sample, then two optimizer steps on the batch (the second sees ratios
//     away from 1, so clipping bites); token-level with the dual clip, the
//     KL term with the on-policy weight and importance sampling, and GSPO's
//     sequence-level ratios and truncated weights (rows made whole over cp);
//   - DPO (`tessel dpo`'s recipe) on fixed preference pairs;
// and both with the fused head (policy.fused_lm_head_loss) against the
// unfused one-process run, on the layouts that keep the whole vocabulary.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "config/parallelism_config.h"
#include "dist/communicator.h"
#include "optim/adamw.h"
#include "policy/clipped_pg_objective.h"
#include "policy/dpo_recipe.h"
#include "policy/logprob_goldens.h"
#include "policy/logprobs.h"
#include "policy/policy_layouts.h"
#include "policy/reference_policy.h"
#include "support/source_tree.h"
#include "train/layout_parity.h"

namespace tessel::policy {
namespace {

constexpr int kSteps = 10;
constexpr int64_t kRows = 8, kSeq = 24;  // a rollout batch; 24 divides by 2·cp·tp for every layout here
constexpr double kTemperature = 0.9;

struct PolicyRun {
  std::vector<train::StepResult> steps;
  std::vector<std::pair<std::string, train::MeshParameter>> placed;  // the final parameters, this rank's shards
};

// Rollout batch `b` of the global batch: deterministic on every rank.
struct Rollouts {
  at::Tensor ids, lengths, prompt_lengths, advantages, sample_mask, noise;
};
Rollouts rollouts(int b, int64_t vocab) {
  std::mt19937 rng(1000 + b);
  Rollouts r{at::zeros({kRows, kSeq}, at::kLong), at::empty({kRows}, at::kLong), at::empty({kRows}, at::kLong),
             at::empty({kRows}, at::kFloat), at::ones({kRows}, at::kFloat), at::empty({kRows, kSeq}, at::kFloat)};
  std::uniform_int_distribution<int64_t> token(3, vocab - 1), length(12, kSeq), prompt(3, 8);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < kRows; ++i) {
    const int64_t n = length(rng);
    r.lengths[i] = n;
    r.prompt_lengths[i] = prompt(rng);
    for (int64_t t = 0; t < n; ++t) r.ids[i][t] = token(rng);
    r.advantages[i] = normal(rng);
    for (int64_t t = 0; t < kSeq; ++t) r.noise[i][t] = 0.2f * normal(rng);
  }
  r.sample_mask[3] = 0.0f;  // a sample the loss drops
  return r;
}

config::Config policy_recipe(const std::string& preset, const testing::Layout& layout) {
  auto o = layout.overrides();
  o.insert(o.end(), {"policy.model_name=" + preset, "policy.optimizer.kwargs.lr=0.003", "policy.scheduler=null",
                     "policy.max_grad_norm=1.0", "policy.train_global_batch_size=8",
                     "policy.train_micro_batch_size=2"});
  return testing::recipe(o);
}

// GRPO's update on fixed rollouts: 5 rollout batches x 2 optimizer steps.
// `fused_head`: the log-probs, previous and reference ones included, from the
// fused head (policy.fused_lm_head_loss) at the sampling temperature.
PolicyRun run_clipped_pg(const std::string& preset, const testing::Layout& layout, const ClippedPGOptions& loss,
                         bool fused_head = false) {
  const config::Config c = policy_recipe(preset, layout);
  const train::TrainOptions options = train::train_options_from(c);
  const dist::DeviceMesh mesh = layout.mesh();
  train::ShardedModel model = train::setup_model(options, mesh, config::parallelism_from(c));
  ReferencePolicy reference(model);
  optim::AdamW optimizer(model.params, options.adamw);
  ClippedPGObjective objective(loss, kTemperature);
  objective.set_fused_head(fused_head, model);
  const int64_t dp = mesh.layout().dp_size(), per_rank = kRows / dp, first = mesh.coordinate("dp") * per_rank;
  std::vector<train::StepResult> steps;
  for (int b = 0; steps.size() < kSteps; ++b) {
    const Rollouts all = rollouts(b, model.model->config().vocab_size);
    const at::Tensor ids = all.ids.narrow(0, first, per_rank), lengths = all.lengths.narrow(0, first, per_rank);
    const at::Tensor prev =
        logprobs_aligned_with_labels(get_logprobs(model, mesh, ids, lengths, kTemperature, fused_head));
    const at::Tensor ref = logprobs_aligned_with_labels(
        get_reference_policy_logprobs(reference, model, mesh, ids, lengths, kTemperature, fused_head));
    const at::Tensor targets = next_token_targets(ids, lengths);
    // The response: tokens from the prompt's end to the row's end (aligned: position t is token t + 1).
    const at::Tensor next = at::arange(1, kSeq + 1, at::kLong).unsqueeze(0);
    const at::Tensor token_mask =
        (next.ge(all.prompt_lengths.narrow(0, first, per_rank).unsqueeze(1)) & targets.ge(0)).to(at::kFloat);
    std::vector<train::MicroBatch> batches;
    for (int64_t m = 0; m < per_rank; m += options.micro_batch_size) {
      const int64_t n = options.micro_batch_size;
      train::MicroBatch mb;
      mb.input_ids = ids.narrow(0, m, n);
      mb.labels = targets.narrow(0, m, n).masked_fill(targets.narrow(0, m, n).lt(0), -100);
      mb.num_tokens = lengths.narrow(0, m, n).sum().item<int64_t>();
      mb.token_values[kTokenMask] = token_mask.narrow(0, m, n);
      mb.token_values[kPrevLogprobs] = prev.narrow(0, m, n);
      mb.token_values[kGenerationLogprobs] = prev.narrow(0, m, n) + all.noise.narrow(0, first + m, n) * token_mask.narrow(0, m, n);
      mb.token_values[kReferenceLogprobs] = ref.narrow(0, m, n);
      mb.token_values[kAdvantages] = all.advantages.narrow(0, first + m, n).unsqueeze(1).expand({n, kSeq}).contiguous();
      mb.row_values[kSampleMask] = all.sample_mask.narrow(0, first + m, n);
      add_whole_row_values(mb);
      batches.push_back(std::move(mb));
    }
    for (int update = 0; update < 2 && steps.size() < kSteps; ++update) {
      steps.push_back(train::train_step(model, optimizer, mesh, batches, objective, 0.003, options.max_grad_norm));
    }
  }
  PolicyRun out;
  out.steps = std::move(steps);
  out.placed = train::mesh_state_dict(model);
  return out;
}

PolicyRun run_dpo(const std::string& preset, const testing::Layout& layout, const std::vector<std::string>& extra = {}) {
  auto o = layout.overrides();
  o.insert(o.end(), extra.begin(), extra.end());
  o.insert(o.end(), {"policy.model_name=" + preset, "dpo.max_num_steps=10", "dpo.max_num_epochs=10",
                     "dpo.val_period=0", "dpo.val_at_start=false", "dpo.reference_policy_kl_penalty=0.1",
                     "dpo.sft_loss_weight=0.2", "policy.train_global_batch_size=8", "policy.train_micro_batch_size=2",
                     "policy.max_total_sequence_length=64", "policy.optimizer.kwargs.lr=0.003",
                     "policy.scheduler=null", "checkpointing.enabled=false", "data.validation=null"});
  const config::Config c = config::load_config(test_support::source_tree() / "examples" / "configs" / "dpo.yaml", o);
  train::RunOptions quiet;
  quiet.quiet = true;
  quiet.write_logs = false;
  train::TrainResult r = train_dpo(c, layout.mesh(), quiet);
  PolicyRun out;
  for (const auto& m : r.steps) {
    train::StepResult s;
    s.loss = m.loss;
    s.grad_norm = m.grad_norm;
    s.valid_tokens = m.valid_tokens;
    s.metrics = m.objective_metrics;
    out.steps.push_back(s);
  }
  out.placed = train::mesh_state_dict(r.model);
  return out;
}

// Steps and final parameters of `got` against the one-process run `ref`,
// whose parameters are whole.
void expect_same(const PolicyRun& got, const PolicyRun& ref, const std::string& what) {
  ASSERT_EQ(got.steps.size(), ref.steps.size()) << what;
  for (size_t s = 0; s < ref.steps.size(); ++s) {
    const auto &g = got.steps[s], &r = ref.steps[s];
    EXPECT_NEAR(g.loss, r.loss, 2e-5 * std::max(1.0, std::abs(r.loss))) << what << " step " << s + 1;
    EXPECT_NEAR(g.grad_norm, r.grad_norm, 1e-4 * r.grad_norm) << what << " step " << s + 1;
    EXPECT_EQ(g.valid_tokens, r.valid_tokens) << what << " step " << s + 1;
    ASSERT_EQ(g.metrics.size(), r.metrics.size()) << what;
    for (size_t i = 0; i < r.metrics.size(); ++i) {
      EXPECT_EQ(g.metrics[i].first, r.metrics[i].first);
      EXPECT_NEAR(g.metrics[i].second, r.metrics[i].second, 5e-5 * std::max(1.0, std::abs(r.metrics[i].second)))
          << what << " step " << s + 1 << " " << r.metrics[i].first;
    }
  }
  testing::expect_same_parameters(got.placed, ref.placed, what);
}

class PolicyTrainingParity : public ::testing::Test {
 protected:
  void SetUp() override {
    if (dist::world()->size() != 4) GTEST_SKIP() << "needs 4 ranks";
  }
};

ClippedPGOptions grpo_token_level() {
  ClippedPGOptions o;
  o.reference_policy_kl_penalty = 0.05;
  o.ratio_clip_min = 0.2;
  o.ratio_clip_max = 0.28;
  o.ratio_clip_c = 3.0;
  o.use_on_policy_kl_approximation = true;
  o.use_importance_sampling_correction = true;
  return o;
}

ClippedPGOptions gspo_sequence_level() {
  ClippedPGOptions o = grpo_token_level();
  o.sequence_level_importance_ratios = true;
  o.token_level_loss = false;
  o.truncated_importance_sampling_ratio = 1.5;
  return o;
}

TEST_F(PolicyTrainingParity, ClippedPolicyGradientOnFixedRollouts) {
  for (const auto& [loss, name] : std::vector<std::pair<ClippedPGOptions, std::string>>{
           {grpo_token_level(), "token level"}, {gspo_sequence_level(), "sequence level (GSPO)"}}) {
    const PolicyRun ref = run_clipped_pg("tiny-llama", testing::one_process(), loss);
    double clipped = 0.0;  // the second update of a batch moves the ratio off 1
    for (const auto& s : ref.steps) clipped = std::max(clipped, std::abs(train::metric(s.metrics, "probs_ratio") - 1.0));
    EXPECT_GT(clipped, 1e-3) << name;
    for (const auto& layout : testing::dense_layouts()) {
      expect_same(run_clipped_pg("tiny-llama", layout, loss), ref, name + " at " + layout.name);
    }
  }
}

TEST_F(PolicyTrainingParity, ClippedPolicyGradientWithExperts) {
  const PolicyRun ref = run_clipped_pg("tiny-qwen3-moe", testing::one_process(), grpo_token_level());
  for (const auto& layout : testing::expert_layouts()) {
    expect_same(run_clipped_pg("tiny-qwen3-moe", layout, grpo_token_level()), ref, "moe at " + layout.name);
  }
}

TEST_F(PolicyTrainingParity, DpoOnFixedPairs) {
  const PolicyRun ref = run_dpo("tiny-llama", testing::one_process());
  EXPECT_GT(train::metric(ref.steps.back().metrics, "reward_margin"), 0.0);
  for (const auto& layout : testing::dense_layouts()) expect_same(run_dpo("tiny-llama", layout), ref, "dpo at " + layout.name);
}

// policy.fused_lm_head_loss: the policy's log-probs from the fused head (no
// logits) train as the logits' do, at one process and every layout that
// keeps the whole vocabulary on a rank; tied embeddings too (tiny-qwen2).
TEST_F(PolicyTrainingParity, DpoWithTheFusedHead) {
  for (const std::string preset : {"tiny-llama", "tiny-qwen2"}) {
    const PolicyRun ref = run_dpo(preset, testing::one_process());
    const std::vector<std::string> fused = {"policy.fused_lm_head_loss=true"};
    expect_same(run_dpo(preset, testing::one_process(), fused), ref, preset + " fused at one process");
    for (const auto& layout : testing::dense_layouts()) {
      if (layout.tp > 1) continue;  // refused: the head's vocabulary is split
      expect_same(run_dpo(preset, layout, fused), ref, preset + " fused at " + layout.name);
    }
  }
}

// GRPO's log-probs from the fused head at the sampling temperature (0.9)
// train as the logits' do: one process and the layouts that keep the whole
// vocabulary on a rank; tied embeddings at one process.
TEST_F(PolicyTrainingParity, ClippedPolicyGradientWithTheFusedHead) {
  const ClippedPGOptions loss = grpo_token_level();
  const PolicyRun ref = run_clipped_pg("tiny-llama", testing::one_process(), loss);
  expect_same(run_clipped_pg("tiny-llama", testing::one_process(), loss, true), ref, "fused at one process");
  for (const auto& layout : testing::dense_layouts()) {
    if (layout.tp > 1) continue;  // refused: the head's vocabulary is split
    expect_same(run_clipped_pg("tiny-llama", layout, loss, true), ref, "fused at " + layout.name);
  }
  expect_same(run_clipped_pg("tiny-qwen2", testing::one_process(), loss, true),
              run_clipped_pg("tiny-qwen2", testing::one_process(), loss), "tied, fused at one process");
}

// The fused head on a mixture-of-experts model (the router logits come out
// of forward_token_losses beside the positions' losses): DPO and the clipped
// policy gradient at one process and with experts split over 2 ranks.
TEST_F(PolicyTrainingParity, TheFusedHeadWithExperts) {
  const PolicyRun dpo_ref = run_dpo("tiny-qwen3-moe", testing::one_process());
  const PolicyRun pg_ref = run_clipped_pg("tiny-qwen3-moe", testing::one_process(), grpo_token_level());
  std::vector<testing::Layout> layouts = {testing::one_process()};
  for (const auto& layout : testing::expert_layouts()) layouts.push_back(layout);
  for (const auto& layout : layouts) {
    expect_same(run_dpo("tiny-qwen3-moe", layout, {"policy.fused_lm_head_loss=true"}), dpo_ref,
                "dpo fused, moe at " + layout.name);
    expect_same(run_clipped_pg("tiny-qwen3-moe", layout, grpo_token_level(), true), pg_ref,
                "clipped pg fused, moe at " + layout.name);
  }
}

TEST_F(PolicyTrainingParity, DpoWithExperts) {
  const PolicyRun ref = run_dpo("tiny-qwen3-moe", testing::one_process());
  for (const auto& layout : testing::expert_layouts()) {
    expect_same(run_dpo("tiny-qwen3-moe", layout), ref, "dpo moe at " + layout.name);
  }
}

}  // namespace
}  // namespace tessel::policy
