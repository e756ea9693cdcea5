#include "policy/verifier.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cctype>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "core/text.h"

namespace tessel::policy {

namespace {

class ExactMatch : public Verifier {
 public:
  std::string name() const override { return "exact_match"; }
  double reward(const std::string& response, const std::string& answer) const override {
    return trim_whitespace(response) == trim_whitespace(answer) ? 1.0 : 0.0;
  }
};

// The last number of `text`: [-]digits[.digits], as a value; none when the
// text holds no digit.
std::optional<double> last_number(std::string_view text) {
  std::optional<double> found;
  for (size_t i = 0; i < text.size();) {
    if (!std::isdigit(static_cast<unsigned char>(text[i]))) {
      ++i;
      continue;
    }
    size_t begin = i, end = i;
    while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    if (end + 1 < text.size() && text[end] == '.' && std::isdigit(static_cast<unsigned char>(text[end + 1]))) {
      ++end;
      while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end]))) ++end;
    }
    if (begin > 0 && text[begin - 1] == '-') --begin;
    found = std::stod(std::string(text.substr(begin, end - begin)));
    i = end;
  }
  return found;
}

class FinalNumber : public Verifier {
 public:
  std::string name() const override { return "final_number"; }
  double reward(const std::string& response, const std::string& answer) const override {
    const auto got = last_number(response), want = last_number(answer);
    return got && want && *got == *want ? 1.0 : 0.0;
  }
};

}  // namespace

const std::vector<std::string>& verifier_names() {
  static const std::vector<std::string> names = {"exact_match", "final_number"};
  return names;
}

std::unique_ptr<Verifier> make_verifier(const std::string& name, const std::string& key) {
  if (name == "exact_match") return std::make_unique<ExactMatch>();
  if (name == "final_number") return std::make_unique<FinalNumber>();
  throw UsageError(fmt::format("{}: '{}' is not a built-in verifier; use one of {}", key, name,
                               fmt::join(verifier_names(), ", ")));
}

}  // namespace tessel::policy
