#include "config/scalar.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <regex>
#include <string>

namespace tessel::config {

namespace {

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

std::string without_underscores(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c != '_') out += c;
  }
  return out;
}

std::optional<int64_t> parse_int(std::string_view text) {
  static const std::regex decimal(R"([-+]?[0-9]+(_[0-9]+)*)");
  static const std::regex prefixed(R"([-+]?0([xX][0-9a-fA-F_]+|[oO][0-7_]+|[bB][01_]+))");
  std::string s(text);
  int base = 10;
  if (std::regex_match(s, decimal)) {
    base = 10;
  } else if (std::regex_match(s, prefixed)) {
    size_t at = (s[0] == '-' || s[0] == '+') ? 1 : 0;
    char p = static_cast<char>(std::tolower(static_cast<unsigned char>(s[at + 1])));
    base = p == 'x' ? 16 : p == 'o' ? 8 : 2;
    s.erase(at, 2);
  } else {
    return std::nullopt;
  }
  s = without_underscores(s);
  bool negative = !s.empty() && s[0] == '-';
  if (!s.empty() && (s[0] == '-' || s[0] == '+')) s.erase(0, 1);
  uint64_t magnitude = 0;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), magnitude, base);
  if (ec != std::errc() || ptr != s.data() + s.size()) return std::nullopt;  // overflow
  constexpr uint64_t max_pos = static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
  if (negative) {
    if (magnitude > max_pos + 1) return std::nullopt;
    return magnitude == max_pos + 1 ? std::numeric_limits<int64_t>::min()
                                    : -static_cast<int64_t>(magnitude);
  }
  if (magnitude > max_pos) return std::nullopt;
  return static_cast<int64_t>(magnitude);
}

std::optional<double> parse_float(std::string_view text) {
  // Digits with a dot and/or an exponent; a bare integer is not a float.
  static const std::regex number(
      R"([-+]?(([0-9][0-9_]*)?\.[0-9_]*|[0-9][0-9_]*)([eE][-+]?[0-9]+)?)");
  std::string s(text);
  if (iequals(s, ".inf") || iequals(s, "+.inf") || iequals(s, "inf") || iequals(s, "+inf")) {
    return std::numeric_limits<double>::infinity();
  }
  if (iequals(s, "-.inf") || iequals(s, "-inf")) return -std::numeric_limits<double>::infinity();
  if (iequals(s, ".nan") || iequals(s, "nan")) return std::numeric_limits<double>::quiet_NaN();
  if (!std::regex_match(s, number)) return std::nullopt;
  bool has_digit = std::any_of(s.begin(), s.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); });
  bool has_dot_or_exp = s.find_first_of(".eE") != std::string::npos;
  if (!has_digit || !has_dot_or_exp) return std::nullopt;
  s = without_underscores(s);
  try {
    size_t used = 0;
    double value = std::stod(s, &used);
    if (used != s.size()) return std::nullopt;
    return value;
  } catch (const std::out_of_range&) {
    return std::nullopt;  // keep absurd literals as strings rather than guess
  } catch (const std::invalid_argument&) {
    return std::nullopt;
  }
}

}  // namespace

Config resolve_plain_scalar(std::string_view text) {
  if (text == "~" || text == "null" || text == "Null" || text == "NULL") return Config::null();
  if (iequals(text, "true")) return Config(true);
  if (iequals(text, "false")) return Config(false);
  if (auto i = parse_int(text)) return Config(*i);
  if (auto f = parse_float(text)) return Config(*f);
  return Config(std::string(text));
}

bool plain_text_is_not_string(std::string_view text) {
  return text.empty() || resolve_plain_scalar(text).kind() != Kind::String;
}

}  // namespace tessel::config
