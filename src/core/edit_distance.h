// Levenshtein distance (insert, delete, substitute: cost 1 each), for the
// "did you mean" of every mistyped name: config keys, module paths, plan
// patterns.
#pragma once

#include <cstddef>
#include <string_view>

namespace tessel {

size_t edit_distance(std::string_view a, std::string_view b);

// The same where it is at most `limit`, else limit + 1, in time proportional
// to the shorter length times the limit: suggestions only want close names,
// and a name thousands of characters long (fuzzing found a config override
// of one) otherwise costs seconds against every candidate.
size_t edit_distance_within(std::string_view a, std::string_view b, size_t limit);

}  // namespace tessel
