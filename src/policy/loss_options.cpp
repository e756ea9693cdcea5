#include "policy/loss_options.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tessel::policy {

namespace {

using config::Config;

std::optional<double> optional_number(const Config& c, const std::string& key) {
  return c.get_or<std::optional<double>>(key, std::nullopt);
}

double non_negative(const Config& c, const std::string& key, double fallback) {
  const double v = c.get_or<double>(key, fallback);
  if (v < 0) throw UsageError(fmt::format("{} must be >= 0, got {}", key, v));
  return v;
}

}  // namespace

const std::vector<std::string>& clipped_pg_keys() {
  static const std::vector<std::string> keys = {
      "reference_policy_kl_penalty",        "ratio_clip_min",
      "ratio_clip_max",                     "ratio_clip_c",
      "use_on_policy_kl_approximation",     "use_importance_sampling_correction",
      "truncated_importance_sampling_ratio", "sequence_level_importance_ratios",
      "token_level_loss"};
  return keys;
}

ClippedPGOptions clipped_pg_options_from(const Config& config) {
  ClippedPGOptions o;
  const Config* node = config.find("loss_fn");
  if (node == nullptr || node->is_null()) return o;
  if (!node->is_map()) throw UsageError(fmt::format("loss_fn must be a mapping, got {}", node->to_flow()));
  train::check_section_keys(*node, {"loss_fn", clipped_pg_keys()});
  o.reference_policy_kl_penalty =
      non_negative(config, "loss_fn.reference_policy_kl_penalty", o.reference_policy_kl_penalty);
  o.ratio_clip_min = non_negative(config, "loss_fn.ratio_clip_min", o.ratio_clip_min);
  o.ratio_clip_max = non_negative(config, "loss_fn.ratio_clip_max", o.ratio_clip_max);
  if (o.ratio_clip_min >= 1.0) {
    throw UsageError(fmt::format("loss_fn.ratio_clip_min must be < 1 (the ratio is clipped below at 1 - "
                                 "ratio_clip_min), got {}",
                                 o.ratio_clip_min));
  }
  o.ratio_clip_c = optional_number(config, "loss_fn.ratio_clip_c");
  if (o.ratio_clip_c && *o.ratio_clip_c <= 1.0) {
    throw UsageError(fmt::format("loss_fn.ratio_clip_c must exceed 1 (it bounds the ratio of negative-advantage "
                                 "tokens; 3 is usual), or be null for no dual clip; got {}",
                                 *o.ratio_clip_c));
  }
  o.use_on_policy_kl_approximation = config.get_or<bool>("loss_fn.use_on_policy_kl_approximation", false);
  o.use_importance_sampling_correction = config.get_or<bool>("loss_fn.use_importance_sampling_correction", false);
  o.truncated_importance_sampling_ratio = optional_number(config, "loss_fn.truncated_importance_sampling_ratio");
  if (o.truncated_importance_sampling_ratio) {
    if (!o.use_importance_sampling_correction) {
      throw UsageError("loss_fn.truncated_importance_sampling_ratio truncates the importance-sampling weights: set "
                       "loss_fn.use_importance_sampling_correction=true, or the ratio to null");
    }
    if (*o.truncated_importance_sampling_ratio <= 0) {
      throw UsageError(fmt::format("loss_fn.truncated_importance_sampling_ratio must be > 0, got {}",
                                   *o.truncated_importance_sampling_ratio));
    }
  }
  o.sequence_level_importance_ratios = config.get_or<bool>("loss_fn.sequence_level_importance_ratios", false);
  o.token_level_loss = config.get_or<bool>("loss_fn.token_level_loss", true);
  if (o.sequence_level_importance_ratios && o.token_level_loss) {
    throw UsageError("loss_fn.sequence_level_importance_ratios=true (GSPO) averages each sequence, which a "
                     "token-level loss does not: set loss_fn.token_level_loss=false");
  }
  return o;
}

train::AlgorithmSection dpo_section() {
  return {"dpo",
          {"reference_policy_kl_penalty", "preference_loss_weight", "sft_loss_weight", "preference_average_log_probs",
           "sft_average_log_probs"},
          {}};
}

DpoOptions dpo_options_from(const Config& config) {
  DpoOptions o;
  o.reference_policy_kl_penalty = config.get_or<double>("dpo.reference_policy_kl_penalty", o.reference_policy_kl_penalty);
  if (o.reference_policy_kl_penalty <= 0) {
    throw UsageError(fmt::format("dpo.reference_policy_kl_penalty (beta) must be > 0, got {}",
                                 o.reference_policy_kl_penalty));
  }
  o.preference_loss_weight = non_negative(config, "dpo.preference_loss_weight", o.preference_loss_weight);
  o.sft_loss_weight = non_negative(config, "dpo.sft_loss_weight", o.sft_loss_weight);
  o.preference_average_log_probs = config.get_or<bool>("dpo.preference_average_log_probs", false);
  o.sft_average_log_probs = config.get_or<bool>("dpo.sft_average_log_probs", o.preference_average_log_probs);
  return o;
}

}  // namespace tessel::policy
