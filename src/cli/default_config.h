// Where a command finds its config when the user names none: the base SFT
// recipe, examples/configs/sft.yaml of the source tree. The binary may run
// from a build folder, an install prefix or another directory, so the tree
// is searched in this order:
//   1. $TESSEL_SOURCE_DIR/examples/configs/sft.yaml (set by the test suite;
//      users can set it too)
//   2. examples/configs/sft.yaml in the current directory or any parent
//   3. examples/configs/sft.yaml beside the executable or in any parent of
//      its directory (a build folder inside the checkout: build/x/bin/tessel)
#pragma once

#include <filesystem>

namespace tessel::cli {

// The path of the default recipe; tessel::UsageError naming every place
// searched (and how to pass a config instead) when none exists.
std::filesystem::path default_config_path();

}  // namespace tessel::cli
