// Where the test data of the source tree is: $TESSEL_SOURCE_DIR, which ctest
// sets (tests/CMakeLists.txt), else the tree this header was compiled from.
// Not __FILE__ in each test: the build (tests/CMakeLists.txt) and ccache's
// base directory (CMakeLists.txt) make __FILE__ a path relative to the build
// folder, so that a fresh clone elsewhere reuses the cached objects.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace tessel::test_support {

inline std::filesystem::path source_tree() {
  if (const char* dir = std::getenv("TESSEL_SOURCE_DIR"); dir != nullptr && *dir != '\0') {
    return dir;
  }
  // tests/support/source_tree.h -> the root, relative to the build folder
  // (run the test binary from there).
  return std::filesystem::path(__FILE__).parent_path().parent_path().parent_path();
}

// tests/golden/<relative>: the committed golden data (models, tokenizers,
// the Hugging Face figures they were checked against).
inline std::filesystem::path golden_dir(const std::filesystem::path& relative) {
  return source_tree() / "tests" / "golden" / relative;
}

}  // namespace tessel::test_support
