// Helpers for data tests: a temp directory removed after the test
// (support/temp_dir.h), file writing, and error-message checks. Data tests
// read real files, no mocks.
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "core/error.h"
#include "support/temp_dir.h"

namespace tessel::data::testing {

using test_support::TempDir;

inline void write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

// Runs `fn`, expecting an exception of type E whose message contains every needle.
template <typename E = tessel::Error, typename Fn>
void expect_error_mentions(Fn&& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected an exception, nothing was thrown";
  } catch (const E& e) {
    const std::string message = e.what();
    for (const auto& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos)
          << "message does not mention '" << needle << "':\n  " << message;
    }
  }
}

}  // namespace tessel::data::testing
