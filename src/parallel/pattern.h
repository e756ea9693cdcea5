// Plan patterns against module paths: both are split on '.', must have the
// same number of segments, and each pattern segment matches its path segment
// as a glob where `*` matches any run of characters within the segment
// (`model.layers.*.self_attn.q_proj`, `model.layers.*.mlp.*_proj`). A `*`
// never crosses a '.', so `layers.*.mlp` does not match `layers.0.1.mlp`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tessel::parallel {

bool match_pattern(std::string_view pattern, std::string_view path);

// Up to `max_count` of `paths` closest to a pattern that matched none of them
// (by edit distance, after replacing each `*` segment with the path's own).
std::vector<std::string> nearest_paths(std::string_view pattern, const std::vector<std::string>& paths,
                                       std::size_t max_count = 5);

}  // namespace tessel::parallel
