// The clipped policy-gradient loss and the DPO loss against the float64
// goldens of tests/golden/generate_policy_losses.py (an independent Python
// implementation of the formulas): loss, every metric and the gradient with
// respect to the current log-probs, for every case there (clipping on both
// sides, dual clip, KL on, off and clamped at +-20, the on-policy KL weight,
// importance-sampling correction per token and per sequence with truncation,
// token- and sequence-level normalisation, GSPO, masked samples; DPO with
// and without averaging, with the SFT term, a masked pair). In float64 the
// values agree to 1e-12 (the same arithmetic); in float32 to 1e-5 relative.
#include <gtest/gtest.h>

#include <ATen/ATen.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <string>

#include "policy/clipped_pg_loss.h"
#include "policy/dpo_loss.h"
#include "support/source_tree.h"

namespace tessel::policy {
namespace {

using nlohmann::json;

json goldens() {
  std::ifstream in(test_support::golden_dir("policy_losses.json"));
  return json::parse(in);
}

// A nested JSON list of numbers as a tensor of `dtype`.
at::Tensor tensor_of(const json& j, at::ScalarType dtype) {
  if (!j.is_array()) return at::tensor(j.get<double>(), at::kDouble).to(dtype);
  if (j.empty() || !j[0].is_array()) return at::tensor(j.get<std::vector<double>>(), at::kDouble).to(dtype);
  std::vector<at::Tensor> rows;
  for (const auto& row : j) rows.push_back(tensor_of(row, dtype));
  return at::stack(rows);
}

ClippedPGOptions pg_options(const json& o) {
  ClippedPGOptions p;
  p.reference_policy_kl_penalty = o["reference_policy_kl_penalty"];
  p.ratio_clip_min = o["ratio_clip_min"];
  p.ratio_clip_max = o["ratio_clip_max"];
  if (!o["ratio_clip_c"].is_null()) p.ratio_clip_c = o["ratio_clip_c"].get<double>();
  p.use_on_policy_kl_approximation = o["use_on_policy_kl_approximation"];
  p.use_importance_sampling_correction = o["use_importance_sampling_correction"];
  if (!o["truncated_importance_sampling_ratio"].is_null()) {
    p.truncated_importance_sampling_ratio = o["truncated_importance_sampling_ratio"].get<double>();
  }
  p.sequence_level_importance_ratios = o["sequence_level_importance_ratios"];
  p.token_level_loss = o["token_level_loss"];
  return p;
}

DpoOptions dpo_options(const json& o) {
  DpoOptions d;
  d.reference_policy_kl_penalty = o["reference_policy_kl_penalty"];
  d.preference_loss_weight = o["preference_loss_weight"];
  d.sft_loss_weight = o["sft_loss_weight"];
  d.preference_average_log_probs = o["preference_average_log_probs"];
  d.sft_average_log_probs = o["sft_average_log_probs"];
  return d;
}

void expect_matches(const json& c, const LossPart& part, const at::Tensor& curr, double rel) {
  for (const auto& [name, want] : c["metrics"].items()) {
    bool found = false;
    for (const auto& [key, got] : part.metrics) {
      if (key != name) continue;
      found = true;
      EXPECT_NEAR(got.item<double>(), want.get<double>(), rel * std::max(1.0, std::abs(want.get<double>()))) << name;
    }
    EXPECT_TRUE(found) << "no metric " << name;
  }
  EXPECT_EQ(part.metrics.front().first, "loss");
  EXPECT_EQ(part.metrics.size(), c["metrics"].size());
  const at::Tensor want = tensor_of(c["grad_curr"], at::kDouble);
  const at::Tensor got = curr.grad().to(at::kDouble);
  EXPECT_TRUE(at::allclose(got, want, rel, rel)) << "gradient, max diff " << (got - want).abs().max().item<double>();
}

TEST(PolicyLosses, ClippedPolicyGradientMatchesTheFloat64Formulas) {
  const json all = goldens();
  ASSERT_EQ(all["clipped_pg"].size(), 12u);
  for (const auto& c : all["clipped_pg"]) {
    for (const auto dtype : {at::kDouble, at::kFloat}) {
      SCOPED_TRACE(c["name"].get<std::string>() + (dtype == at::kDouble ? " float64" : " float32"));
      const json& x = c["inputs"];
      ClippedPGInputs in;
      in.curr_logprobs = tensor_of(x["curr"], dtype).requires_grad_(true);
      in.prev_logprobs = tensor_of(x["prev"], dtype);
      in.generation_logprobs = tensor_of(x["gen"], dtype);
      in.reference_logprobs = tensor_of(x["ref"], dtype);
      in.advantages = tensor_of(x["advantages"], dtype);
      in.token_mask = tensor_of(x["token_mask"], dtype);
      in.sample_mask = tensor_of(x["sample_mask"], dtype);
      in.row_tokens = in.token_mask.sum(1);
      in.row_log_importance =
          ((in.prev_logprobs - in.generation_logprobs) * in.token_mask * in.sample_mask.unsqueeze(1)).sum(1);
      const GlobalCounts global{c["global_valid_tokens"], c["global_valid_sequences"]};
      const LossPart part = clipped_pg_loss(in, pg_options(c["options"]), global);
      part.loss.backward();
      expect_matches(c, part, in.curr_logprobs, dtype == at::kDouble ? 1e-12 : 2e-5);
    }
  }
}

TEST(PolicyLosses, DpoMatchesTheFloat64Formulas) {
  const json all = goldens();
  ASSERT_EQ(all["dpo"].size(), 4u);
  for (const auto& c : all["dpo"]) {
    for (const auto dtype : {at::kDouble, at::kFloat}) {
      SCOPED_TRACE(c["name"].get<std::string>() + (dtype == at::kDouble ? " float64" : " float32"));
      const json& x = c["inputs"];
      DpoInputs in;
      in.curr_logprobs = tensor_of(x["curr"], dtype).requires_grad_(true);
      in.reference_logprobs = tensor_of(x["ref"], dtype);
      in.token_mask = tensor_of(x["token_mask"], dtype);
      in.sample_mask = tensor_of(x["sample_mask"], dtype);
      in.row_tokens = in.token_mask.sum(1);
      const LossPart part = dpo_loss(in, dpo_options(c["options"]), c["global_valid_sequences"]);
      part.loss.backward();
      expect_matches(c, part, in.curr_logprobs, dtype == at::kDouble ? 1e-12 : 2e-5);
    }
  }
}

}  // namespace
}  // namespace tessel::policy
