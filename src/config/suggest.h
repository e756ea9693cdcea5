// "Did you mean ...?" for config keys. A mistyped key on the command line or
// in a typed struct is the most common config error; naming the closest
// existing keys turns it into a one-character fix. Candidates come from three
// places: whole dotted paths by edit distance (catches a typo in any
// segment), sibling names under the deepest existing parent (catches a typo in
// the last segment of a long path), and paths ending in the given name
// (catches a missing prefix, e.g. `tensor_parallel_size=2`).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "core/edit_distance.h"

namespace tessel::config {

class Config;

// Every dotted path in `root` (mappings and list indices, interior nodes too).
std::vector<std::string> all_paths(const Config& root);

// Up to `max_count` existing paths close to the missing `path`, best first.
std::vector<std::string> closest_keys(const Config& root, std::string_view path,
                                      size_t max_count = 3);

// " Did you mean 'a'?" / " Did you mean 'a' or 'b'?"; "" for no candidates.
std::string did_you_mean(const std::vector<std::string>& candidates);

// Up to `max_count` of `names` close to `name` (for fixed vocabularies).
std::vector<std::string> closest_names(const std::vector<std::string>& names,
                                       std::string_view name, size_t max_count = 3);

}  // namespace tessel::config
