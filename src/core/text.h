// Small text helpers shared by the parsers of configs, overrides and
// answers.
#pragma once

#include <string_view>

namespace tessel {

// `s` without the whitespace (std::isspace) at either end.
std::string_view trim_whitespace(std::string_view s);

}  // namespace tessel
