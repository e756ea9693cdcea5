// Text examples -> tokens and loss masks.
//
// Prompt/response ({"input", "output"}):
//   [bos] input output [eos]       mask: 0 on bos and input, 1 on output and eos
// Chat ({"messages": [...]}), tessel's fixed template (the model's Jinja
// chat_template is not evaluated):
//   [bos]
//   "<|system|>\n" content "\n"           all 0
//   "<|user|>\n" content "\n"             all 0
//   "<|assistant|>\n"                     0
//        content [eos]                     1 (loss only on assistant content)
// Each part is encoded separately and concatenated, so a mask boundary is
// always a token boundary (a BPE merge never straddles prompt and response).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/example.h"
#include "data/tokenizer.h"

namespace tessel::data {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

Example build_prompt_response(const Tokenizer& tokenizer, std::string_view input,
                              std::string_view output, const SequenceOptions& options);

// Throws tessel::UsageError for an unknown role (the caller adds file:line).
Example build_chat(const Tokenizer& tokenizer, const std::vector<ChatMessage>& messages,
                   const SequenceOptions& options);

}  // namespace tessel::data
