// The edit distances behind "did you mean": the banded one agrees with the
// plain dynamic programme wherever it is within the limit, and a very long
// mistyped key (the shape fuzzing found) still gets its error.
#include "config/suggest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "config/loader.h"
#include "config/overrides.h"
#include "temp_files.h"

namespace tessel::config {
namespace {

using ::testing::HasSubstr;

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

TEST(EditDistance, LongKeysStillGetTheirErrorAndCloseOnesTheirSuggestion) {
  // Fuzzing (yaml_config) found an override adding a key path of 3,330
  // bytes in 77 segments, then a deletion of a missing path of 1,000 bytes:
  // the suggestion compared every prefix of the long path with the missing
  // one in full (seconds). The error is the same with the banded distance.
  Config c = parse_yaml("a: {b: 1}\n", "test.yaml");
  std::string long_path = "e";
  for (int i = 0; i < 77; ++i) long_path += "." + std::string(42, static_cast<char>('a' + i % 26));
  apply_overrides(c, {"+" + long_path + "=1"});
  ASSERT_TRUE(c.has(long_path));
  const std::string missing = "c" + std::string(999, 'x');
  const std::string m = test_util::usage_error_of([&] { apply_overrides(c, {"~" + missing}); });
  EXPECT_THAT(m, HasSubstr("cannot delete '" + missing + "': no such key."));
  EXPECT_THAT(m, ::testing::Not(HasSubstr("Did you mean")));
  // A one-letter slip in the long path is still found.
  std::string slipped = long_path;
  slipped[10] = 'Z';
  EXPECT_THAT(test_util::usage_error_of([&] { apply_overrides(c, {"~" + slipped}); }),
              HasSubstr("Did you mean '" + long_path + "'?"));
}

}  // namespace
}  // namespace tessel::config
