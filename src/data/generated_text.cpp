#include "data/generated_text.h"

namespace tessel::data {

std::string generated_text(const Tokenizer& tokenizer, const std::vector<int64_t>& ids, bool skip_special_tokens) {
  static const std::string kReplacement = "\xEF\xBF\xBD";  // U+FFFD in UTF-8
  std::string text;
  std::vector<int64_t> run;  // consecutive known ids, decoded together (a character may span several)
  for (int64_t id : ids) {
    if (id >= 0 && id < tokenizer.vocab_size()) {
      run.push_back(id);
      continue;
    }
    text += tokenizer.decode(run, skip_special_tokens) + kReplacement;
    run.clear();
  }
  return text + tokenizer.decode(run, skip_special_tokens);
}

}  // namespace tessel::data
