// Reading .jsonl SFT files (formats in dataset.h). Every error names
// file:line and says what to change.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/log.h"
#include "data/dataset.h"
#include "data/jsonl_lines.h"
#include "data/sft_template.h"

namespace tessel::data {
namespace {

using nlohmann::json;

// The SFT formats' fields of one line.
class LineReader : public JsonlLine {
 public:
  explicit LineReader(const JsonlLine& line) : JsonlLine(line) {}

  std::vector<int64_t> int_array(const json& object, const char* key) const {
    const json& v = object[key];
    if (!v.is_array()) fail(fmt::format("field '{}' is {}, expected an array", key, v.type_name()));
    std::vector<int64_t> out;
    out.reserve(v.size());
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_number_integer()) {
        fail(fmt::format("field '{}'[{}] is {}, expected an integer", key, i, v[i].dump()));
      }
      out.push_back(v[i].get<int64_t>());
    }
    return out;
  }

  Example tokens(const json& object, int64_t vocab_size) const {
    Example example;
    example.tokens = int_array(object, "tokens");
    if (example.tokens.empty()) fail("field 'tokens' is empty");
    for (std::size_t i = 0; i < example.tokens.size(); ++i) {
      const int64_t id = example.tokens[i];
      if (id < 0 || (vocab_size > 0 && id >= vocab_size)) {
        fail(fmt::format("tokens[{}] = {} is outside the model's vocabulary [0, {})", i, id,
                         vocab_size));
      }
    }
    if (object.contains("loss_mask")) {
      example.loss_mask = int_array(object, "loss_mask");
      if (example.loss_mask.size() != example.tokens.size()) {
        fail(fmt::format("'loss_mask' has {} entries but 'tokens' has {}; they must match",
                         example.loss_mask.size(), example.tokens.size()));
      }
      for (std::size_t i = 0; i < example.loss_mask.size(); ++i) {
        if (example.loss_mask[i] != 0 && example.loss_mask[i] != 1) {
          fail(fmt::format("loss_mask[{}] = {}, expected 0 or 1", i, example.loss_mask[i]));
        }
      }
    } else {
      example.loss_mask.assign(example.tokens.size(), 1);
    }
    return example;
  }

  std::vector<ChatMessage> messages(const json& object) const {
    const json& v = object["messages"];
    if (!v.is_array() || v.empty()) fail("field 'messages' must be a non-empty array");
    std::vector<ChatMessage> out;
    bool has_assistant = false;
    for (std::size_t i = 0; i < v.size(); ++i) {
      if (!v[i].is_object()) fail(fmt::format("messages[{}] is not an object", i));
      const std::string what = fmt::format("in messages[{}]", i);
      ChatMessage m{string_field(v[i], "role", what.c_str()),
                    string_field(v[i], "content", what.c_str())};
      if (m.role != "system" && m.role != "user" && m.role != "assistant") {
        fail(fmt::format("messages[{}] has role '{}'; use \"system\", \"user\" or \"assistant\"", i,
                         m.role));
      }
      has_assistant = has_assistant || m.role == "assistant";
      out.push_back(std::move(m));
    }
    if (!has_assistant) fail("'messages' has no \"assistant\" message, so nothing to learn");
    return out;
  }
};

}  // namespace

Dataset load_jsonl_dataset(const std::string& path, const Tokenizer* tokenizer,
                           const DatasetOptions& options) {
  std::vector<Example> examples;
  int64_t dropped = 0;
  const char* names_it = "data.*.dataset_name must be a readable .jsonl file, \"synthetic\" or \"demo_sft\"";
  for_each_jsonl_object(path, names_it, [&](const json& object, const JsonlLine& where) {
    const LineReader line(where);
    auto need_tokenizer = [&] {
      if (tokenizer == nullptr) line.fail("a text example needs a tokenizer, but none was given");
    };
    Example example;
    try {
      if (object.contains("messages")) {
        need_tokenizer();
        example = build_chat(*tokenizer, line.messages(object), options.sequence);
      } else if (object.contains("tokens")) {
        example = line.tokens(object, options.vocab_size);
      } else if (object.contains("input") || object.contains("output")) {
        need_tokenizer();
        const char* both = "an input/output example needs both 'input' and 'output'";
        const std::string input = line.string_field(object, "input", both);
        const std::string output = line.string_field(object, "output", both);
        example = build_prompt_response(*tokenizer, input, output, options.sequence);
      } else {
        line.fail(
            fmt::format("no known fields: expected 'input' and 'output', 'messages' or "
                        "'tokens' (the line has: {})",
                        keys_of(object)));
      }
    } catch (const UsageError&) {
      throw;
    } catch (const Error& e) {
      line.fail(e.what());
    }
    if (truncate_example(example, options.sequence.max_input_seq_length)) {
      examples.push_back(std::move(example));
    } else {
      ++dropped;
    }
  });
  if (dropped > 0) {
    log::warn("{}: dropped {} example(s) with no response token within max_input_seq_length={}",
              path, dropped, options.sequence.max_input_seq_length);
  }
  if (examples.empty()) {
    throw UsageError(dropped > 0
                         ? fmt::format("{}: every example ({}) lost its response to truncation at "
                                       "max_input_seq_length={}; raise data.max_input_seq_length",
                                       path, dropped, options.sequence.max_input_seq_length)
                         : fmt::format("{}: the dataset is empty (no non-blank lines)", path));
  }
  return Dataset(path, std::move(examples));
}

}  // namespace tessel::data
