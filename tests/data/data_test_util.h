// Helpers for data tests: a temp directory removed after the test, file
// writing, and error-message checks. Data tests read real files, no mocks.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace tessel::data::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tessel_data_XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

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
