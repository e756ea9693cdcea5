#include "io/byte_size.h"

#include <fmt/format.h>

#include <array>
#include <cctype>
#include <cmath>
#include <string>
#include <utility>

#include "core/error.h"

namespace tessel::io {

uint64_t parse_byte_size(std::string_view text, std::string_view what) {
  const auto refuse = [&](std::string_view why) {
    return UsageError(fmt::format("{}: '{}' is not a size ({}); write a number of bytes with an optional unit, "
                                  "e.g. 5GB, 500MB, 2GiB or 1000000",
                                  what, text, why));
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
  const std::string number(text.substr(0, i));
  if (number.empty() || number.find_first_of("0123456789") == std::string::npos ||
      number.find('.') != number.rfind('.')) {
    throw refuse("it does not start with a number");
  }
  while (i < text.size() && text[i] == ' ') ++i;
  std::string unit;
  for (char c : text.substr(i)) unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static constexpr std::array<std::pair<std::string_view, double>, 10> kUnits{{{"", 1.0},
                                                                              {"b", 1.0},
                                                                              {"kb", 1e3},
                                                                              {"mb", 1e6},
                                                                              {"gb", 1e9},
                                                                              {"tb", 1e12},
                                                                              {"kib", 0x1p10},
                                                                              {"mib", 0x1p20},
                                                                              {"gib", 0x1p30},
                                                                              {"tib", 0x1p40}}};
  double scale = 0.0;
  for (const auto& [name, factor] : kUnits) {
    if (unit == name) scale = factor;
  }
  if (scale == 0.0) throw refuse(fmt::format("unknown unit '{}'", text.substr(i)));
  const double bytes = std::floor(std::stod(number) * scale);
  if (!(bytes >= 1.0)) throw refuse("it is less than one byte");
  if (bytes >= 0x1p63) throw refuse("it is more than 2^63 bytes");
  return static_cast<uint64_t>(bytes);
}

}  // namespace tessel::io
