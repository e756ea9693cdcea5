// The compact module list of `tessel plan`: a decoder repeats one block per
// layer, so a plan's per-module lines repeat too (16 layers x 7 projections
// of a 1B model are 112 lines that say 7 things). Modules whose paths differ
// only in the layer index, with the same style and pattern, become one line:
// "model.layers.{0..15}.self_attn.q_proj". A layer a custom plan treats
// differently stays visible, since it breaks its group's index set
// ("{0..3,8..15}") and gets its own line.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::cli {

// One line of the module list (parallel::AppliedStyle's fields, as text).
struct ModuleLine {
  std::string modules;  // a module path, or one with its layer indices as a set
  std::string style;
  std::string pattern;
};

// Groups one-module lines by (path with its first all-digit segment as the
// layer index, style, pattern), in the order each group's first module
// appears. Paths without such a segment, and groups of one layer, keep the
// plain path.
std::vector<ModuleLine> group_layers(const std::vector<ModuleLine>& modules);

// Sorted distinct indices as runs: {0, 1, 2, 3, 8} -> "{0..3,8}".
std::string index_set(const std::vector<int64_t>& sorted_indices);

}  // namespace tessel::cli
