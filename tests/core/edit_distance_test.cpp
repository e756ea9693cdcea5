// Edit distances: the banded one agrees with the plain dynamic programme
// wherever the distance is within the limit, and says "beyond" otherwise.
#include "core/edit_distance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>

namespace tessel {
namespace {

TEST(EditDistance, KnownPairs) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("", "abc"), 3u);
  EXPECT_EQ(edit_distance("flaw", "lawn"), 2u);
  EXPECT_EQ(edit_distance_within("kitten", "sitting", 3), 3u);
  EXPECT_EQ(edit_distance_within("kitten", "sitting", 2), 3u);  // beyond the limit: limit + 1
  EXPECT_EQ(edit_distance_within("kitten", "sitting", 0), 1u);
  EXPECT_EQ(edit_distance_within("same", "same", 0), 0u);
  EXPECT_EQ(edit_distance_within("", "abcdef", 2), 3u);
}

TEST(EditDistance, WithinAgreesWithTheFullDistanceUpToTheLimit) {
  // Random strings over a small alphabet (so near matches are common), every
  // length pair up to 14 and every limit up to 9, against the unbanded table.
  std::mt19937 rng(7);
  auto random_string = [&](size_t n) {
    std::string s(n, 'a');
    for (char& c : s) c = static_cast<char>('a' + rng() % 3);
    return s;
  };
  int checked = 0;
  for (size_t la = 0; la <= 14; ++la) {
    for (size_t lb = 0; lb <= 14; ++lb) {
      for (int rep = 0; rep < 6; ++rep) {
        const std::string a = random_string(la), b = random_string(lb);
        const size_t full = edit_distance(a, b);
        for (size_t limit = 0; limit <= 9; ++limit) {
          ASSERT_EQ(edit_distance_within(a, b, limit), std::min(full, limit + 1))
              << "'" << a << "' '" << b << "' limit " << limit;
          ++checked;
        }
      }
    }
  }
  EXPECT_EQ(checked, 15 * 15 * 6 * 10);
}

}  // namespace
}  // namespace tessel
