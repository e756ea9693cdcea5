// GRPO's advantages (SPEC 11), per prompt: each prompt's rollouts are scored
// against the others of the same prompt, as NeMo RL's GRPO does.
//
// For the rollouts i of one prompt, with rewards r_i and the valid ones V
// (sample mask 1; with overlong_filtering a truncated rollout is invalid),
// n = |V|:
//   - n <= 1: every advantage of the prompt is 0 (nothing to compare with);
//   - else, with O_i = V without i (leave-one-out baseline) or V, m = |O_i|
//     (n - 1 or n):
//       baseline_i = sum_{j in O_i} r_j / m
//       std_i      = sqrt((sum_{j in O_i} r_j^2 / m - baseline_i^2) m / (m - 1))   (0 when m <= 1)
//       A_i        = r_i - baseline_i,  divided by (std_i + 1e-6) when
//                    normalize_rewards and std_i > 0
//   - an invalid rollout's advantage is 0 (its loss is masked anyway).
// A prompt whose rollouts all scored alike gets advantages 0 with or without
// normalisation: the std is 0, and so is r_i - baseline_i.
#pragma once

#include <cstdint>
#include <vector>

namespace tessel::policy {

struct AdvantageOptions {
  bool leave_one_out_baseline = true;  // grpo.use_leave_one_out_baseline
  bool normalize_rewards = true;       // grpo.normalize_rewards
};

// rewards, prompt (which prompt each rollout answers) and valid, one each
// per rollout. Returns one advantage per rollout.
std::vector<double> grpo_advantages(const std::vector<double>& rewards, const std::vector<int64_t>& prompt,
                                    const std::vector<bool>& valid, const AdvantageOptions& options);

}  // namespace tessel::policy
