// Reading a .jsonl data file one JSON object per line, with every error
// naming file:line and what to change. Shared by the SFT files
// (jsonl_dataset.cpp) and the preference files (preference_dataset.h).
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace tessel::data {

// One line of a .jsonl file, for messages.
class JsonlLine {
 public:
  JsonlLine(const std::string& path, int64_t line);

  // tessel::UsageError "<file>:<line>: <what>".
  [[noreturn]] void fail(const std::string& what) const;
  // object[key] as a string; fails naming the key when it is missing (saying
  // it is `needed_for`) or not a string.
  std::string string_field(const nlohmann::json& object, const char* key, const char* needed_for) const;
  const std::string& where() const { return where_; }

 private:
  std::string where_;
};

// Calls fn(object, line) for every non-blank line of `path`, which must hold
// a JSON object. UsageError naming the file when it cannot be opened (with
// `what_names_it`, e.g. "data.*.dataset_name must be ..."), or file:line for
// a line that is not valid JSON or not an object.
void for_each_jsonl_object(const std::string& path, const std::string& what_names_it,
                           const std::function<void(const nlohmann::json&, const JsonlLine&)>& fn);

// "prompt, chosen" (the keys of an object, for messages); "none" when empty.
std::string keys_of(const nlohmann::json& object);

}  // namespace tessel::data
