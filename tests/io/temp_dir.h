// Helpers for io tests: a temp directory removed after the test
// (support/temp_dir.h), byte-exact file access, and error-message checks.
// io tests use real files, no mocks.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/temp_dir.h"

namespace tessel::io::testing {

using test_support::TempDir;

inline void write_bytes(const std::filesystem::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(out.good()) << "cannot write " << path;
}

inline std::string read_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Runs `fn`, expecting a tessel::Error whose message contains every needle.
template <typename Fn>
void expect_error_mentions(Fn&& fn, std::initializer_list<std::string> needles) {
  try {
    fn();
    ADD_FAILURE() << "expected tessel::Error, nothing was thrown";
  } catch (const tessel::Error& e) {
    const std::string message = e.what();
    for (const auto& needle : needles) {
      EXPECT_NE(message.find(needle), std::string::npos)
          << "message does not mention '" << needle << "':\n  " << message;
    }
  }
}

}  // namespace tessel::io::testing
