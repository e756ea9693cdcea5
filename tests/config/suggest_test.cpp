// "Did you mean" for config keys: a very long mistyped key (the shape
// fuzzing found) still gets its error, a close one its suggestion.
#include "config/suggest.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "config/loader.h"
#include "config/overrides.h"
#include "temp_files.h"

namespace tessel::config {
namespace {

using ::testing::HasSubstr;

TEST(Suggest, LongKeysStillGetTheirErrorAndCloseOnesTheirSuggestion) {
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

TEST(Suggest, AtMostSixteenEditsEvenForLongKeys) {
  // The second shape fuzzing found: a 1.3 KB key in the file and a mistyped
  // 1 KB override. A quarter of a long key would be hundreds of edits (and
  // the distance's cost grows with it): suggestions stop at 16.
  const std::string key(1000, 'k');
  Config c = parse_yaml(key + ": 1\n", "test.yaml");
  std::string far = key, near = key;
  for (int i = 0; i < 17; ++i) far[static_cast<size_t>(i * 50)] = 'x';
  for (int i = 0; i < 16; ++i) near[static_cast<size_t>(i * 50)] = 'x';
  EXPECT_THAT(test_util::usage_error_of([&] { apply_overrides(c, {far + "=2"}); }),
              ::testing::Not(HasSubstr("Did you mean")));
  EXPECT_THAT(test_util::usage_error_of([&] { apply_overrides(c, {near + "=2"}); }),
              HasSubstr("Did you mean '" + key + "'?"));
}

}  // namespace
}  // namespace tessel::config
