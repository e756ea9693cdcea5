// Loading a run's configuration: YAML files with `defaults:` inheritance,
// then command-line overrides, then `${...}` interpolation. This order is
// the reference's (Hydra/OmegaConf): an override of `policy.model_name`
// also changes `policy.tokenizer.name: ${policy.model_name}`.
//
// Inheritance: a file's top-level `defaults:` names one file or a list of
// files, relative to the including file (or absolute). Each is loaded (recursively, depth
// first), merged in order, and the including file is merged last, so later
// wins. Merging is recursive for mappings; lists and scalars are replaced. A
// mapping holding `_override_: true` replaces what it merges onto instead
// (the key itself is dropped). A file that includes itself, directly or not,
// is an error that prints the chain.
//
// A config is the user's own writing, as a shell script is: the files its
// `defaults:` name may be anywhere (`../base.yaml`, an absolute path), and
// so may the paths it sets (checkpoint_dir, resume_from, model, tokenizer
// and data). Only what a checkpoint names is kept inside its directory
// (io/confined_file.h): that comes from a file someone else may have made.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace tessel::config {

// The whole pipeline: load `path` with its defaults, apply `overrides`
// (overrides.h grammar), resolve interpolations. The result's source_path()
// is `path`.
Config load_config(const std::filesystem::path& path,
                   const std::vector<std::string>& overrides = {});

// Only the file and its defaults: no overrides, no interpolation.
Config load_yaml_file(const std::filesystem::path& path);

// Parses YAML text (no `defaults:` processing). `source_name` appears in
// error messages ("file.yaml:3:5: YAML syntax error: ...").
Config parse_yaml(std::string_view text, const std::string& source_name = "<string>");

// Merges `overlay` onto `base` (the inheritance rule above, `_override_`
// included).
void merge_into(Config& base, const Config& overlay);

}  // namespace tessel::config
