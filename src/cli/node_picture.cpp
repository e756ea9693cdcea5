#include "cli/node_picture.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstddef>

namespace tessel::cli {

namespace {

// A world of hundreds of ranks would make one line per group kind unreadable;
// the first few groups show the pattern.
constexpr std::size_t kGroupsShown = 4;

std::string spans(const std::vector<std::vector<int>>& groups) {
  std::vector<std::string> shown;
  for (std::size_t i = 0; i < std::min(groups.size(), kGroupsShown); ++i) {
    shown.push_back(rank_span(groups[i]));
  }
  return fmt::format("{}{}", fmt::join(shown, " | "), groups.size() > kGroupsShown ? " ..." : "");
}

}  // namespace

std::string rank_span(const std::vector<int>& ranks) {
  bool consecutive = ranks.size() > 1;
  for (std::size_t i = 1; i < ranks.size(); ++i) consecutive &= ranks[i] == ranks[i - 1] + 1;
  return consecutive ? fmt::format("{}-{}", ranks.front(), ranks.back())
                     : fmt::format("{}", fmt::join(ranks, ","));
}

std::string node_picture(const dist::MeshLayout& layout, int64_t num_nodes) {
  const int world = layout.world_size();
  if (num_nodes < 1 || world % num_nodes != 0) {
    return fmt::format(
        "nodes: world {} does not split evenly over cluster.num_nodes={}, so no node picture; "
        "set cluster.gpus_per_node (or --world) so that world = num_nodes x ranks per node\n",
        world, num_nodes);
  }
  const int per_node = static_cast<int>(world / num_nodes);
  std::string out = fmt::format("nodes: {} x {} ranks (node-major)\n", num_nodes, per_node);
  for (int n = 0; n < static_cast<int>(num_nodes); ++n) {
    std::vector<int> ranks(static_cast<std::size_t>(per_node));
    for (int i = 0; i < per_node; ++i) ranks[static_cast<std::size_t>(i)] = n * per_node + i;
    out += fmt::format("  node {}: ranks {}\n", n, rank_span(ranks));
  }
  out += "\n";
  for (const auto& spec : dist::MeshLayout::group_specs()) {
    const auto groups = layout.groups(spec.name);
    std::string where;
    if (layout.size(spec.name) == 1) {
      where = "size 1, no traffic";
    } else {
      std::vector<std::vector<int>> crossing;
      for (const auto& g : groups) {
        // Node-major ranks: a group stays inside a node iff its lowest and
        // highest rank share one.
        const auto [lo, hi] = std::minmax_element(g.begin(), g.end());
        if (*lo / per_node != *hi / per_node) crossing.push_back(g);
      }
      if (crossing.empty()) {
        where = fmt::format("groups stay inside a node (ranks {})", spans(groups));
      } else if (crossing.size() == groups.size()) {
        where = fmt::format("every group crosses nodes (ranks {})", spans(groups));
      } else {
        where = fmt::format("{} of {} groups cross nodes (ranks {})", crossing.size(),
                            groups.size(), spans(crossing));
      }
    }
    out += fmt::format("{:<13} {}\n", spec.name + ":", where);
  }
  return out;
}

}  // namespace tessel::cli
