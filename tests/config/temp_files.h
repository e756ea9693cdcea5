// Test helper: a fresh temporary directory that tests fill with small YAML
// files (inheritance needs real files on disk); removed at the end.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "core/error.h"

namespace tessel::config::test_util {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tessel_config_XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    if (!made) throw std::runtime_error("mkdtemp failed");
    path_ = made;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  // Writes `text` to `name` (subfolders created) and returns the full path.
  std::filesystem::path write(const std::string& name, const std::string& text) const {
    std::filesystem::path p = path_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << text;
    return p;
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The message of the UsageError `fn` throws; fails the test if none is thrown.
template <typename Fn>
std::string usage_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const tessel::UsageError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a tessel::UsageError";
  return "";
}

}  // namespace tessel::config::test_util
