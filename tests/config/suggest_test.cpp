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

}  // namespace
}  // namespace tessel::config
