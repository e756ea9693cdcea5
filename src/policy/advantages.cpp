#include "policy/advantages.h"

#include <cmath>
#include <map>

#include "core/error.h"

namespace tessel::policy {

std::vector<double> grpo_advantages(const std::vector<double>& rewards, const std::vector<int64_t>& prompt,
                                    const std::vector<bool>& valid, const AdvantageOptions& options) {
  TESSEL_CHECK(prompt.size() == rewards.size() && valid.size() == rewards.size(),
               "grpo_advantages: {} rewards, {} prompt ids, {} valid flags", rewards.size(), prompt.size(),
               valid.size());
  std::map<int64_t, std::vector<size_t>> rollouts;  // prompt -> its rollouts
  for (size_t i = 0; i < prompt.size(); ++i) rollouts[prompt[i]].push_back(i);
  std::vector<double> advantages(rewards.size(), 0.0);
  for (const auto& [id, rows] : rollouts) {
    double sum = 0.0, sum_sq = 0.0;
    int64_t n = 0;
    for (size_t i : rows) {
      if (!valid[i]) continue;
      sum += rewards[i];
      sum_sq += rewards[i] * rewards[i];
      ++n;
    }
    if (n <= 1) continue;
    for (size_t i : rows) {
      if (!valid[i]) continue;
      const bool leave_out = options.leave_one_out_baseline;
      const double m = static_cast<double>(leave_out ? n - 1 : n);
      const double baseline = (sum - (leave_out ? rewards[i] : 0.0)) / m;
      const double mean_sq = (sum_sq - (leave_out ? rewards[i] * rewards[i] : 0.0)) / m;
      const double variance = m > 1 ? (mean_sq - baseline * baseline) * m / (m - 1) : 0.0;
      const double std = variance > 0 ? std::sqrt(variance) : 0.0;
      double a = rewards[i] - baseline;
      if (options.normalize_rewards && std > 0) a /= std + 1e-6;
      advantages[i] = a;
    }
  }
  return advantages;
}

}  // namespace tessel::policy
