// Typing of unquoted scalars, shared by the YAML reader, the command-line
// value parser and the printer so that all three agree on what `1e-5`,
// `True` or `null` mean. The rules follow YAML 1.2's core schema with the
// additions OmegaConf makes (so reference recipes read the same):
//   null, Null, NULL, ~          -> null
//   true/false in any case       -> bool   (yes/no/on/off stay strings)
//   [-+]?digits (with _ groups)  -> int, 0x/0o/0b prefixes too
//   decimal or exponent forms    -> float, `1e-5` included; .inf, -.inf, .nan
//   anything else                -> string
#pragma once

#include <string_view>

#include "config/config.h"

namespace tessel::config {

Config resolve_plain_scalar(std::string_view text);

// True when `text` written unquoted would read back as something other than
// the string `text` (so the printer must quote it).
bool plain_text_is_not_string(std::string_view text);

}  // namespace tessel::config
