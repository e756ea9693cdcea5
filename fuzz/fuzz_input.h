// Shared by the libFuzzer targets in this directory (one per parser of
// untrusted input; fuzz/README.md). A parser may reject any input, but only
// with tessel::Error (a message a user can act on): any other exception
// escaping it, a crash, or an AddressSanitizer report is a finding, and
// libFuzzer keeps the input that caused it.
#pragma once

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <typeinfo>

#include "core/error.h"

namespace tessel::fuzz {

// A directory of this process's own for parsers that read files.
inline const std::filesystem::path& scratch_dir() {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("tessel_fuzz_" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::filesystem::path write_scratch(const std::string& name, const uint8_t* data, size_t size) {
  const auto path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

template <typename Parse>
void expect_only_tessel_errors(Parse&& parse) {
  try {
    parse();
  } catch (const tessel::Error&) {
    // The parser refused the input with a message: what it should do.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: %s escaped the parser: %s\n", typeid(e).name(), e.what());
    std::abort();
  }
}

}  // namespace tessel::fuzz
