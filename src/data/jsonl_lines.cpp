#include "data/jsonl_lines.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace tessel::data {

JsonlLine::JsonlLine(const std::string& path, int64_t line) : where_(fmt::format("{}:{}", path, line)) {}

void JsonlLine::fail(const std::string& what) const { throw UsageError(fmt::format("{}: {}", where_, what)); }

std::string JsonlLine::string_field(const nlohmann::json& object, const char* key, const char* needed_for) const {
  if (!object.contains(key)) fail(fmt::format("field '{}' is missing ({})", key, needed_for));
  if (!object[key].is_string()) fail(fmt::format("field '{}' is {}, expected a string", key, object[key].type_name()));
  return object[key].get<std::string>();
}

void for_each_jsonl_object(const std::string& path, const std::string& what_names_it,
                           const std::function<void(const nlohmann::json&, const JsonlLine&)>& fn) {
  std::ifstream in(path);
  if (!in) {
    throw UsageError(fmt::format("dataset file '{}' cannot be opened ({}); {}", path,
                                 std::filesystem::exists(path) ? "permission denied?" : "no such file", what_names_it));
  }
  std::string text;
  for (int64_t line_no = 1; std::getline(in, text); ++line_no) {
    if (text.find_first_not_of(" \t\r\n") == std::string::npos) continue;
    const JsonlLine line(path, line_no);
    nlohmann::json object;
    try {
      object = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for a number overflow
      line.fail(fmt::format("not valid JSON ({}); each line must hold one JSON object", e.what()));
    }
    if (!object.is_object()) line.fail("the line is not a JSON object");
    fn(object, line);
  }
}

std::string keys_of(const nlohmann::json& object) {
  std::string keys;
  for (const auto& item : object.items()) keys += (keys.empty() ? "" : ", ") + item.key();
  return keys.empty() ? "none" : keys;
}

}  // namespace tessel::data
