#include "data/sft_template.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tessel::data {
namespace {

void append(Example& example, const std::vector<int64_t>& ids, int64_t mask) {
  example.tokens.insert(example.tokens.end(), ids.begin(), ids.end());
  example.loss_mask.insert(example.loss_mask.end(), ids.size(), mask);
}

void append_text(Example& example, const Tokenizer& tokenizer, std::string_view text,
                 int64_t mask) {
  if (!text.empty()) append(example, tokenizer.encode(text), mask);
}

}  // namespace

Example build_prompt_response(const Tokenizer& tokenizer, std::string_view input,
                              std::string_view output, const SequenceOptions& options) {
  Example example;
  if (options.add_bos) append(example, {tokenizer.bos_id()}, 0);
  append_text(example, tokenizer, input, 0);
  append_text(example, tokenizer, output, 1);
  if (options.add_eos) append(example, {tokenizer.eos_id()}, 1);
  return example;
}

Example build_chat(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                   const SequenceOptions& options) {
  Example example;
  if (options.add_bos) append(example, {tokenizer.bos_id()}, 0);
  for (const ChatMessage& message : messages) {
    if (message.role != "system" && message.role != "user" && message.role != "assistant") {
      throw UsageError(fmt::format("unknown role '{}' (use \"system\", \"user\" or \"assistant\")",
                                   message.role));
    }
    append_text(example, tokenizer, fmt::format("<|{}|>\n", message.role), 0);
    if (message.role == "assistant") {
      append_text(example, tokenizer, message.content, 1);
      if (options.add_eos) append(example, {tokenizer.eos_id()}, 1);
    } else {
      append_text(example, tokenizer, message.content, 0);
      append_text(example, tokenizer, "\n", 0);
    }
  }
  return example;
}

}  // namespace tessel::data
