#include "config/suggest.h"

#include <algorithm>
#include <map>

#include "config/config.h"

namespace tessel::config {

namespace {

void collect(const Config& node, const std::string& prefix, std::vector<std::string>& out) {
  auto join = [&](const std::string& key) { return prefix.empty() ? key : prefix + "." + key; };
  if (node.is_map()) {
    for (const auto& [key, child] : node.entries()) {
      std::string path = join(key);  // a copy: `out` may reallocate below
      out.push_back(path);
      collect(child, path, out);
    }
  } else if (node.is_list()) {
    for (size_t i = 0; i < node.items().size(); ++i) {
      std::string path = join(std::to_string(i));
      out.push_back(path);
      collect(node.items()[i], path, out);
    }
  }
}

// A typo is "close" when it changes at most about a quarter of the name
// (at least 2 edits, so short keys still get suggestions), and at most 16:
// the banded distance costs length x tolerance, which for a name thousands
// of characters long would otherwise grow with the square of its length
// (fuzzing: a 1 KB override key took seconds against a 1.3 KB config key).
size_t tolerance(size_t length) { return std::clamp<size_t>(length / 4, 2, 16); }

// Best first; drop candidates much worse than the best (a one-letter typo
// should not also suggest every key of similar length).
std::vector<std::string> best_of(std::vector<std::pair<size_t, std::string>> ranked,
                                 size_t max_count) {
  std::sort(ranked.begin(), ranked.end());
  std::vector<std::string> out;
  for (const auto& [d, name] : ranked) {
    if (out.size() >= max_count || d > ranked.front().first + 2) break;
    out.push_back(name);
  }
  return out;
}

}  // namespace

std::vector<std::string> all_paths(const Config& root) {
  std::vector<std::string> out;
  collect(root, "", out);
  return out;
}

std::vector<std::string> closest_keys(const Config& root, std::string_view path,
                                      size_t max_count) {
  // Best score per candidate; lower is better.
  std::map<std::string, size_t> score;
  auto offer = [&](const std::string& candidate, size_t s) {
    auto it = score.find(candidate);
    if (it == score.end() || s < it->second) score[candidate] = s;
  };
  std::vector<std::string> paths = all_paths(root);
  std::vector<std::string> segments;
  try {
    segments = split_path(path);
  } catch (...) {
    segments = {std::string(path)};
  }

  // 1. Whole dotted paths.
  const size_t path_tolerance = tolerance(segments.back().size());
  for (const auto& p : paths) {
    size_t d = edit_distance_within(path, p, path_tolerance);
    if (d <= path_tolerance) offer(p, d);
  }
  // 2. Siblings under the deepest existing parent.
  const Config* node = &root;
  std::string prefix;
  size_t depth = 0;
  for (; depth + 1 < segments.size(); ++depth) {
    const Config* next = node->find(segments[depth]);
    if (!next) break;
    node = next;
    prefix += (prefix.empty() ? "" : ".") + segments[depth];
  }
  if (node->is_map()) {
    const std::string& missing = segments[depth];
    std::string rest;  // segments after the missing one
    for (size_t i = depth + 1; i < segments.size(); ++i) rest += "." + segments[i];
    const size_t missing_tolerance = tolerance(missing.size());
    for (const auto& [key, child] : node->entries()) {
      size_t d = edit_distance_within(missing, key, missing_tolerance);
      if (d > missing_tolerance) continue;
      std::string fixed = prefix.empty() ? key : prefix + "." + key;
      // Prefer the whole corrected path; a bare parent is a weaker hint.
      if (!rest.empty() && root.has(fixed + rest)) {
        offer(fixed + rest, d);
      } else {
        offer(fixed, rest.empty() ? d : d + 1);
      }
    }
  }
  // 3. The user left out a prefix: existing paths ending in ".<path>".
  std::string suffix = "." + std::string(path);
  for (const auto& p : paths) {
    if (p.size() > suffix.size() && p.compare(p.size() - suffix.size(), suffix.size(), suffix) == 0) {
      offer(p, 1);
    }
  }

  std::vector<std::pair<size_t, std::string>> ranked;
  for (const auto& [candidate, s] : score) {
    if (candidate != path) ranked.emplace_back(s, candidate);
  }
  return best_of(std::move(ranked), max_count);
}

std::vector<std::string> closest_names(const std::vector<std::string>& names,
                                       std::string_view name, size_t max_count) {
  std::vector<std::pair<size_t, std::string>> ranked;
  const size_t name_tolerance = tolerance(name.size());
  for (const auto& n : names) {
    size_t d = edit_distance_within(name, n, name_tolerance);
    if (d <= name_tolerance && n != name) ranked.emplace_back(d, n);
  }
  return best_of(std::move(ranked), max_count);
}

std::string did_you_mean(const std::vector<std::string>& candidates) {
  if (candidates.empty()) return "";
  std::string out = " Did you mean ";
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (i > 0) out += (i + 1 == candidates.size()) ? " or " : ", ";
    out += "'" + candidates[i] + "'";
  }
  return out + "?";
}

}  // namespace tessel::config
