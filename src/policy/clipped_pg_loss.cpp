#include "policy/clipped_pg_loss.h"

#include <ATen/ATen.h>

#include <algorithm>

#include "core/error.h"
#include "policy/metric_tensor.h"

namespace tessel::policy {

namespace {

at::Tensor finite_or_zero(const at::Tensor& x) { return at::nan_to_num(x, 0.0, 0.0, 0.0); }

}  // namespace

LossPart clipped_pg_loss(const ClippedPGInputs& in, const ClippedPGOptions& o, const GlobalCounts& global,
                         const RowParts& rows) {
  const at::Tensor& curr = in.curr_logprobs;
  const at::Tensor& prev = in.prev_logprobs;
  const at::Tensor& gen = in.generation_logprobs;
  const at::Tensor& adv = in.advantages;
  const at::Tensor tm = in.token_mask.to(curr.scalar_type());
  const at::Tensor sm = in.sample_mask.to(curr.scalar_type());
  const at::Tensor m = tm * sm.unsqueeze(1);
  // An empty global batch adds nothing (every sum is 0): divide by 1.
  const double g_tok = std::max(global.valid_tokens, 1.0), g_seq = std::max(global.valid_sequences, 1.0);
  const at::Tensor n = in.row_tokens.to(curr.scalar_type());
  const at::Tensor safe_n = at::where(n.gt(0), n, at::ones_like(n));
  // This rank's part of the loss from per-token values v.
  const auto reduce = [&](const at::Tensor& v) {
    if (o.token_level_loss) return (v * m).sum() / g_tok;
    return (sm * ((v * tm).sum(1) / safe_n)).sum() / g_seq;
  };

  at::Tensor ratio;
  if (o.sequence_level_importance_ratios) {
    const at::Tensor row_log_ratio = sum_row_parts(((curr - prev) * tm).sum(1), rows) / safe_n;
    ratio = row_log_ratio.exp().unsqueeze(1).expand_as(curr);
  } else {
    ratio = (curr - prev).exp();
  }
  const at::Tensor clamped = ratio.clamp(1.0 - o.ratio_clip_min, 1.0 + o.ratio_clip_max);
  at::Tensor pg = at::maximum(-adv * ratio, -adv * clamped);
  if (o.ratio_clip_c) pg = at::where(adv.lt(0), at::minimum(pg, -adv * *o.ratio_clip_c), pg);

  at::Tensor weights = at::ones_like(prev);
  if (o.use_importance_sampling_correction) {
    if (o.sequence_level_importance_ratios) {
      TESSEL_CHECK(in.row_log_importance.defined(),
                   "sequence-level importance weights need the batch's row_log_importance (add_whole_row_values)");
      weights = finite_or_zero(in.row_log_importance.to(curr.scalar_type()).exp()).unsqueeze(1).expand_as(prev);
    } else {
      weights = finite_or_zero((prev - gen).exp());
    }
    if (o.truncated_importance_sampling_ratio) weights = weights.clamp_max(*o.truncated_importance_sampling_ratio);
  }
  const at::Tensor actor = reduce(weights * pg);

  const double beta = o.reference_policy_kl_penalty;
  at::Tensor kl = at::zeros({}, curr.options());
  if (beta != 0.0) {
    const at::Tensor d = (in.reference_logprobs - curr).clamp(-20.0, 20.0);
    at::Tensor per_token = beta * (d.exp() - d - 1);
    if (o.use_on_policy_kl_approximation) per_token = per_token * finite_or_zero((curr - gen).exp()).detach();
    kl = reduce(per_token);
  }

  LossPart out;
  out.loss = actor + kl;
  at::NoGradGuard no_grad;
  const at::Tensor none = at::zeros({}, curr.options().dtype(at::kDouble));
  out.metrics = {
      {"loss", metric_tensor(out.loss)},
      {"probs_ratio", metric_tensor((ratio * m).sum() / g_tok)},
      {"probs_ratio_clamped", metric_tensor((clamped * m).sum() / g_tok)},
      {"kl_penalty", beta != 0.0 ? metric_tensor(kl) / beta : none},
      {"token_mult_prob_error", metric_tensor(((gen - prev).abs() * m).exp().mul(m).sum() / g_tok)},
      {"approx_entropy", metric_tensor(-((curr - gen).exp() * curr * m).sum() / g_tok)},
      {"num_valid_samples", rows.counts_rows ? metric_tensor(sm.sum()) : none},
  };
  return out;
}

}  // namespace tessel::policy
