#include "io/name_hints.h"

#include <fmt/format.h>

#include <algorithm>

namespace tessel::io {
namespace {

size_t shared_affix(const std::string& a, const std::string& b) {
  const size_t n = std::min(a.size(), b.size());
  size_t prefix = 0;
  while (prefix < n && a[prefix] == b[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < n && a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) ++suffix;
  return prefix + suffix;
}

}  // namespace

std::string describe_available_names(const std::vector<std::string>& available,
                                     const std::string& requested, size_t limit) {
  if (available.empty()) return "the file holds no tensors";
  std::vector<std::pair<size_t, const std::string*>> ranked;
  ranked.reserve(available.size());
  for (const auto& name : available) ranked.emplace_back(shared_affix(name, requested), &name);
  const size_t shown = std::min(limit, ranked.size());
  std::partial_sort(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(shown),
                    ranked.end(), [](const auto& a, const auto& b) {
                      return a.first != b.first ? a.first > b.first : *a.second < *b.second;
                    });
  std::string list;
  for (size_t i = 0; i < shown; ++i) {
    if (i > 0) list += ", ";
    list += fmt::format("'{}'", *ranked[i].second);
  }
  return fmt::format("{} tensors available, closest: {}", available.size(), list);
}

}  // namespace tessel::io
