// `${...}` interpolation, as in the reference recipes (OmegaConf syntax):
//   key: ${a.b}            the value at a.b, keeping its type (int, list, ...)
//   key: run-${a.b}-x      text: each ${} is replaced by its scalar's text
//   key: ${.sibling}       relative: one dot = the mapping holding `key`,
//                          each extra dot one level up
//   key: ${oc.env:VAR,default}   an environment variable (default optional)
//   key: ${mul:${a},${b}}  product of numbers (`add` sums); used by the
//                          reference for sequence-packing token budgets
//   key: \${literal}       an escaped `${`, kept as text
// Targets are resolved first (chains work), and a missing target, an unknown
// resolver or a cycle is a UsageError naming the key that holds it.
#pragma once

#include "config/config.h"

namespace tessel::config {

// Replaces every interpolation in `config` by its value, in place.
void resolve_interpolations(Config& config);

// True when `text` holds an unescaped `${`.
bool has_interpolation(std::string_view text);

}  // namespace tessel::config
