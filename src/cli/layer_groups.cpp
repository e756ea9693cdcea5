#include "cli/layer_groups.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <optional>
#include <tuple>

namespace tessel::cli {

namespace {

// A module path split around its layer index: "model.layers.3.mlp" ->
// {"model.layers.", 3, ".mlp"}.
struct SplitPath {
  std::string before;
  int64_t index = 0;
  std::string after;
};

std::optional<SplitPath> split_at_layer(const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find('.', start), path.size());
    const std::string segment = path.substr(start, end - start);
    // Digits only, and short enough for int64: a layer index, not a name.
    const bool index = !segment.empty() && segment.size() < 19 &&
                       std::all_of(segment.begin(), segment.end(),
                                   [](unsigned char c) { return std::isdigit(c) != 0; });
    if (index) return SplitPath{path.substr(0, start), std::stoll(segment), path.substr(end)};
    start = end + 1;
  }
  return std::nullopt;
}

}  // namespace

std::string index_set(const std::vector<int64_t>& sorted_indices) {
  std::vector<std::string> runs;
  for (size_t i = 0; i < sorted_indices.size();) {
    size_t j = i;
    while (j + 1 < sorted_indices.size() && sorted_indices[j + 1] == sorted_indices[j] + 1) ++j;
    runs.push_back(j == i ? fmt::format("{}", sorted_indices[i])
                          : fmt::format("{}..{}", sorted_indices[i], sorted_indices[j]));
    i = j + 1;
  }
  return fmt::format("{{{}}}", fmt::join(runs, ","));
}

std::vector<ModuleLine> group_layers(const std::vector<ModuleLine>& modules) {
  struct Pending {
    std::string before, after;  // empty `indices`: a path without a layer index
    std::string path, style, pattern;
    std::vector<int64_t> indices;
  };
  std::vector<Pending> groups;
  // (before, after, style, pattern) -> position in `groups`
  std::map<std::tuple<std::string, std::string, std::string, std::string>, size_t> where;
  for (const auto& m : modules) {
    const auto split = split_at_layer(m.modules);
    if (!split) {
      groups.push_back({"", "", m.modules, m.style, m.pattern, {}});
      continue;
    }
    const auto key = std::make_tuple(split->before, split->after, m.style, m.pattern);
    auto [it, added] = where.try_emplace(key, groups.size());
    if (added) {
      groups.push_back({split->before, split->after, m.modules, m.style, m.pattern, {}});
    }
    groups[it->second].indices.push_back(split->index);
  }
  std::vector<ModuleLine> out;
  out.reserve(groups.size());
  for (auto& g : groups) {
    std::sort(g.indices.begin(), g.indices.end());
    const std::string modules =
        g.indices.size() > 1 ? g.before + index_set(g.indices) + g.after : g.path;
    out.push_back({modules, g.style, g.pattern});
  }
  return out;
}

}  // namespace tessel::cli
