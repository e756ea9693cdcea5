// The value part of a command-line override (`key=VALUE`), in the
// reference's (Hydra) grammar, a YAML flow subset:
//   3  -1  1e-5  .inf  true  False  null      typed as in scalar.h
//   'text'  "text"                            always strings ('' or \' escapes)
//   [1, 2, x]   {k: v, 'a.b': [1]}            nested freely
//   anything else                             a string, spaces kept inside
//   (empty)                                   the empty string
// `${...}` interpolations are kept as text (resolved after all overrides),
// and their braces, colons and commas never end a value.
// We parse it ourselves instead of with yaml-cpp so that error messages can
// point at the offending character and `${a.b}` works inside lists.
#pragma once

#include <string_view>

#include "config/config.h"

namespace tessel::config {

// UsageError naming the text and the position of the problem.
Config parse_flow_value(std::string_view text);

}  // namespace tessel::config
