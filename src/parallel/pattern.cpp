#include "parallel/pattern.h"

#include <algorithm>

#include "core/edit_distance.h"

namespace tessel::parallel {

namespace {

std::vector<std::string_view> segments(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    std::size_t dot = s.find('.', start);
    out.push_back(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start));
    if (dot == std::string_view::npos) return out;
    start = dot + 1;
  }
}

// Glob with `*` only, iterative with backtracking to the last star.
bool glob(std::string_view p, std::string_view s) {
  std::size_t pi = 0, si = 0, star = std::string_view::npos, mark = 0;
  while (si < s.size()) {
    if (pi < p.size() && p[pi] == '*') {
      star = pi++;
      mark = si;
    } else if (pi < p.size() && p[pi] == s[si]) {
      ++pi;
      ++si;
    } else if (star != std::string_view::npos) {
      pi = star + 1;
      si = ++mark;
    } else {
      return false;
    }
  }
  while (pi < p.size() && p[pi] == '*') ++pi;
  return pi == p.size();
}

}  // namespace

bool match_pattern(std::string_view pattern, std::string_view path) {
  const auto ps = segments(pattern), ss = segments(path);
  if (ps.size() != ss.size()) return false;
  for (std::size_t i = 0; i < ps.size(); ++i) {
    if (!glob(ps[i], ss[i])) return false;
  }
  return true;
}

std::vector<std::string> nearest_paths(std::string_view pattern, const std::vector<std::string>& paths,
                                       std::size_t max_count) {
  std::vector<std::pair<std::size_t, std::string>> scored;
  const auto ps = segments(pattern);
  for (const auto& path : paths) {
    if (path.empty()) continue;
    // Score against the pattern with its wildcard segments filled in from the
    // path, so `model.layers.*.attn.q_proj` is close to `...self_attn.q_proj`.
    const auto ss = segments(path);
    std::string filled;
    for (std::size_t i = 0; i < ps.size(); ++i) {
      if (i) filled += '.';
      filled += (ps[i] == "*" && i < ss.size()) ? std::string(ss[i]) : std::string(ps[i]);
    }
    scored.emplace_back(edit_distance(filled, path), path);
  }
  std::stable_sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  for (const auto& [d, p] : scored) {
    if (out.size() >= max_count) break;
    if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
  }
  return out;
}

}  // namespace tessel::parallel
