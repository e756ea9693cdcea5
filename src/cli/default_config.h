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

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"

namespace tessel::cli {

// The path of the default recipe; tessel::UsageError naming every place
// searched (and how to pass a config instead) when none exists.
std::filesystem::path default_config_path();

// The config of a command that runs a model (`tessel logprobs`, `tessel
// generate`): the default recipe with policy.model_name = MODEL (the first of
// `model_and_overrides`), sft.seed = `init_seed` when >= 0 (a preset's
// initialisation), then the user's overrides.
config::Config model_command_config(const std::vector<std::string>& model_and_overrides, int64_t init_seed);

// A command's positional arguments, [CONFIG] then overrides. The first one is
// the config unless it reads as an override (`a.b=v`, `+a.b=v`, `~a.b`), so
// `tessel mesh key=value` uses the default; `path` is then empty.
struct ConfigArgs {
  std::filesystem::path path;
  std::vector<std::string> overrides;
};
ConfigArgs split_config_args(std::vector<std::string> positional);

}  // namespace tessel::cli
