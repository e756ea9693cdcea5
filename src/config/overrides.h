// Command-line overrides in the reference (Hydra) grammar, applied to a
// loaded config before interpolation:
//   a.b.c=VALUE    change an existing key (a typo fails, with suggestions)
//   +a.b=VALUE     add a key that does not exist yet (parents are created)
//   ++a.b=VALUE    set, whether or not it exists
//   ~a.b           delete an existing key
//   ~a.b=VALUE     delete it only if its value is VALUE
// VALUE follows flow_value.h. Keys are dotted; digit segments index lists
// (`data.train.0.name=x`). Assigning a mapping replaces the old value whole.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"

namespace tessel::config {

struct Override {
  enum class Op { Set, Add, ForceSet, Delete };
  Op op = Op::Set;
  std::string key;                // dotted path
  std::optional<Config> value;    // absent only for a plain `~key`
  std::string value_text;         // as typed, for messages
  std::string text;               // the whole override, for messages
};

// Parses one override; UsageError on a malformed one.
Override parse_override(std::string_view text);

// Applies one override; UsageError for an unknown key (naming the closest
// keys and the `+` form), `+` on an existing key, `~` of a missing key.
void apply_override(Config& config, const Override& override_);

// Parses and applies each in order.
void apply_overrides(Config& config, const std::vector<std::string>& overrides);

}  // namespace tessel::config
