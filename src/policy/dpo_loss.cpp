#include "policy/dpo_loss.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "policy/metric_tensor.h"

namespace tessel::policy {

namespace {

at::Tensor chosen(const at::Tensor& rows) { return rows.slice(0, 0, rows.size(0), 2); }
at::Tensor rejected(const at::Tensor& rows) { return rows.slice(0, 1, rows.size(0), 2); }

}  // namespace

LossPart dpo_loss(const DpoInputs& in, const DpoOptions& o, double global_valid_sequences, const RowParts& rows) {
  const at::Tensor& curr = in.curr_logprobs;
  TESSEL_CHECK(curr.size(0) % 2 == 0, "DPO rows come in chosen/rejected pairs; got {} rows", curr.size(0));
  const at::Tensor tm = in.token_mask.to(curr.scalar_type());
  const at::Tensor sm = in.sample_mask.to(curr.scalar_type());
  const double pairs = std::max(global_valid_sequences / 2.0, 1.0);
  const at::Tensor n = in.row_tokens.to(curr.scalar_type());

  // Rewards of whole rows; the preference term is a function of them, which
  // one rank per row counts (every rank keeps it in its graph, so the
  // gradient's all-reduce runs everywhere).
  at::Tensor rewards = sum_row_parts(((curr - in.reference_logprobs) * tm).sum(1), rows);
  if (o.preference_average_log_probs) rewards = rewards / n.clamp_min(1.0);
  const at::Tensor margin = chosen(rewards) - rejected(rewards);
  const double row_share = rows.counts_rows ? 1.0 : 0.0;
  const at::Tensor preference =
      (-at::log_sigmoid(o.reference_policy_kl_penalty * margin) * chosen(sm)).sum() / pairs * row_share;

  // The NLL of the chosen responses: a sum over tokens, so each rank's part.
  at::Tensor sft = at::zeros({}, curr.options());
  if (o.sft_loss_weight > 0) {
    at::Tensor nll = -(curr * tm * sm.unsqueeze(1)).sum(1);
    if (o.sft_average_log_probs) nll = nll / (n * sm).clamp_min(1.0);
    sft = (chosen(nll) * chosen(sm)).sum() / pairs;
  }

  LossPart out;
  out.loss = o.sft_loss_weight * sft + o.preference_loss_weight * preference;
  at::NoGradGuard no_grad;
  const at::Tensor chosen_mean = metric_tensor((chosen(rewards) * chosen(sm)).sum() / pairs) * row_share;
  const at::Tensor rejected_mean = metric_tensor((rejected(rewards) * rejected(sm)).sum() / pairs) * row_share;
  out.metrics = {
      {"loss", metric_tensor(out.loss)},
      {"sft_loss", metric_tensor(sft)},
      {"preference_loss", metric_tensor(preference)},
      {"accuracy", metric_tensor((margin.gt(0).to(curr.scalar_type()) * chosen(sm)).sum() / pairs) * row_share},
      {"rewards_chosen_mean", chosen_mean},
      {"rewards_rejected_mean", rejected_mean},
      {"reward_margin", chosen_mean - rejected_mean},
      {"num_valid_samples", metric_tensor(sm.sum()) / 2.0 * row_share},
  };
  return out;
}

}  // namespace tessel::policy
