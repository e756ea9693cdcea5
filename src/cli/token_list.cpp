#include "cli/token_list.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include <charconv>

#include "core/error.h"

namespace tessel::cli {

std::vector<int64_t> parse_token_list(const std::string& text) {
  std::vector<int64_t> ids;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t end = text.find(',', begin);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(begin, end - begin);
    const auto first = item.find_first_not_of(" \t");
    const auto last = item.find_last_not_of(" \t");
    item = first == std::string::npos ? "" : item.substr(first, last - first + 1);
    int64_t value = 0;
    const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), value);
    if (item.empty() || ec != std::errc() || ptr != item.data() + item.size()) {
      throw UsageError(fmt::format(
          "--tokens: '{}' is not an integer token id (expected a comma-separated list such as "
          "--tokens 3,10,17)",
          item));
    }
    ids.push_back(value);
    begin = end + 1;
  }
  return ids;
}

void check_token_ids(const std::vector<int64_t>& ids, int64_t vocab_size, const std::string& what) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size) {
      throw UsageError(fmt::format(
          "{}: token id {} (position {}) is out of range: the model's vocab_size is {}, so ids must be in [0, {}]",
          what, ids[i], i, vocab_size, vocab_size - 1));
    }
  }
}

std::vector<int64_t> json_token_ids(const nlohmann::json& row, int64_t vocab_size, const std::string& where,
                                    const std::string& expected) {
  if (!row.is_object() || !row.contains("tokens") || !row.at("tokens").is_array() || row.at("tokens").empty()) {
    throw UsageError(fmt::format("{}: expected {} with at least one id", where, expected));
  }
  std::vector<int64_t> ids;
  for (const auto& id : row.at("tokens")) {
    if (!id.is_number_integer()) throw UsageError(fmt::format("{}: token {} is not an integer", where, id.dump()));
    ids.push_back(id.get<int64_t>());
  }
  check_token_ids(ids, vocab_size, where);
  return ids;
}

}  // namespace tessel::cli
