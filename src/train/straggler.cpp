#include "train/straggler.h"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.h"

namespace tessel::train {

namespace {

// The middle value; the mean of the two middle ones for an even count.
double median_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::vector<double> all_but(const std::vector<double>& v, std::size_t skip) {
  std::vector<double> out;
  out.reserve(v.size() - 1);
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i != skip) out.push_back(v[i]);
  }
  return out;
}

}  // namespace

std::optional<Straggler> find_straggler(const std::vector<double>& wait_s, double step_time_s,
                                        const std::vector<std::string>& node_of_rank) {
  TESSEL_CHECK(node_of_rank.empty() || node_of_rank.size() == wait_s.size(),
               "find_straggler: {} waits but {} node names", wait_s.size(), node_of_rank.size());
  if (wait_s.size() < 2) return std::nullopt;
  const double min_gap = std::max(kStragglerMinGapS, kStragglerMinGapOfStep * step_time_s);
  std::vector<int> named;
  for (std::size_t r = 0; r < wait_s.size(); ++r) {
    const double others = median_of(all_but(wait_s, r));
    if (others - wait_s[r] >= min_gap && wait_s[r] <= kStragglerMaxWaitShare * others) {
      named.push_back(static_cast<int>(r));
    }
  }
  if (named.empty()) return std::nullopt;
  // Least wait first; equal waits in rank order.
  std::stable_sort(named.begin(), named.end(), [&](int a, int b) { return wait_s[a] < wait_s[b]; });

  Straggler s;
  s.ranks = named;
  s.wait_s = wait_s[named.front()];
  s.step_time_s = step_time_s;
  std::vector<double> others;
  for (std::size_t r = 0; r < wait_s.size(); ++r) {
    if (std::find(named.begin(), named.end(), static_cast<int>(r)) == named.end()) others.push_back(wait_s[r]);
  }
  // Every rank named cannot happen (a rank is named only below the others'
  // median), but an empty median must not be read.
  s.others_median_wait_s = others.empty() ? 0.0 : median_of(others);
  if (!node_of_rank.empty()) {
    const std::string& node = node_of_rank[named.front()];
    const bool one_node = std::all_of(named.begin(), named.end(), [&](int r) { return node_of_rank[r] == node; });
    if (one_node) {
      s.node = node;
      const auto on_node = std::count(node_of_rank.begin(), node_of_rank.end(), node);
      // A node of one rank is that rank, not a slow node among others.
      s.whole_node = on_node > 1 && on_node == static_cast<std::ptrdiff_t>(named.size()) &&
                     on_node < static_cast<std::ptrdiff_t>(node_of_rank.size());
    }
  }
  if (named.size() > 1 && 2 * named.size() >= wait_s.size() && !s.whole_node) return std::nullopt;
  return s;
}

std::optional<Straggler> find_run_straggler(const std::vector<std::vector<double>>& waits_per_step,
                                            const std::vector<double>& step_time_s,
                                            const std::vector<std::string>& node_of_rank) {
  TESSEL_CHECK(waits_per_step.size() == step_time_s.size(), "find_run_straggler: {} steps of waits, {} step times",
               waits_per_step.size(), step_time_s.size());
  if (waits_per_step.empty()) return std::nullopt;
  const std::size_t first = waits_per_step.size() > 1 ? 1 : 0;
  std::vector<double> wait(waits_per_step[first].size(), 0.0);
  double step_s = 0.0;
  for (std::size_t i = first; i < waits_per_step.size(); ++i) {
    TESSEL_CHECK(waits_per_step[i].size() == wait.size(), "find_run_straggler: {} ranks at one step, {} at another",
                 waits_per_step[i].size(), wait.size());
    for (std::size_t r = 0; r < wait.size(); ++r) wait[r] += waits_per_step[i][r];
    step_s += step_time_s[i];
  }
  const double n = static_cast<double>(waits_per_step.size() - first);
  for (double& w : wait) w /= n;
  return find_straggler(wait, step_s / n, node_of_rank);
}

std::string describe(const Straggler& s) {
  std::string ranks;
  for (std::size_t i = 0; i < s.ranks.size(); ++i) ranks += (i ? ", " : "") + std::to_string(s.ranks[i]);
  const bool many = s.ranks.size() > 1;
  std::string who;
  if (s.whole_node) {
    who = fmt::format("{} (ranks {})", s.node, ranks);
  } else {
    who = fmt::format("rank{} {}{}", many ? "s" : "", ranks, s.node.empty() ? "" : " on " + s.node);
  }
  return fmt::format("{} — the others waited {:.2f} s per step on {} ({} {:.2f} s)", who, s.others_median_wait_s,
                     many ? "them" : "it", many ? "the least of them waited" : "it waited", s.wait_s);
}

}  // namespace tessel::train
