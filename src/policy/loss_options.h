// The policy losses' settings as NeMo RL's recipes name them (SPEC 11):
// `loss_fn.*` for the clipped policy-gradient loss of GRPO, `dpo.*` for DPO.
// Every listed key is read (tests/policy/loss_keys_test.cpp probes each);
// any other key under loss_fn, or a DPO key misspelt, is a UsageError naming
// it and the closest known ones. docs/rl.md says what each key does.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "train/train_options.h"

namespace tessel::policy {

struct ClippedPGOptions {
  double reference_policy_kl_penalty = 0.01;  // beta of the k3 KL term; 0: no KL term
  double ratio_clip_min = 0.2;                // ratio clipped below at 1 - ratio_clip_min
  double ratio_clip_max = 0.2;                // ... and above at 1 + ratio_clip_max
  std::optional<double> ratio_clip_c;         // dual clip (> 1) for negative advantages; none: off
  bool use_on_policy_kl_approximation = false;      // KL weighted by exp(curr - generation)
  bool use_importance_sampling_correction = false;  // loss weighted by exp(prev - generation)
  std::optional<double> truncated_importance_sampling_ratio;  // those weights clamped to at most this
  bool sequence_level_importance_ratios = false;    // ratio and weights per sequence (GSPO)
  bool token_level_loss = true;  // normalise by global valid tokens; false: per sequence, by valid sequences
};

// The keys of `loss_fn`.
const std::vector<std::string>& clipped_pg_keys();

// `loss_fn` of `config` (absent: the defaults above), every key checked.
ClippedPGOptions clipped_pg_options_from(const config::Config& config);

struct DpoOptions {
  double reference_policy_kl_penalty = 0.05;  // beta
  double preference_loss_weight = 1.0;
  double sft_loss_weight = 0.0;
  bool preference_average_log_probs = false;  // rewards averaged over the response's tokens
  bool sft_average_log_probs = false;         // the NLL averaged over the response's tokens
};

// The algorithm section of a DPO recipe (`dpo`: the loop's keys and the
// loss's), for train::train_options_from.
train::AlgorithmSection dpo_section();

// The loss keys of `dpo` (defaults above when absent).
DpoOptions dpo_options_from(const config::Config& config);

}  // namespace tessel::policy
