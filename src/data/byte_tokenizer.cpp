#include "data/byte_tokenizer.h"

#include <fmt/format.h>

#include "core/error.h"

namespace tessel::data {

ByteTokenizer::ByteTokenizer(int64_t model_vocab_size) {
  if (model_vocab_size < 256) {
    throw UsageError(fmt::format(
        "the byte-level tokenizer needs a model vocabulary of at least 256 ids (one per byte), "
        "but the model has vocab_size {}; use a model with vocab_size >= 256 or give the model "
        "directory a tokenizer.json",
        model_vocab_size));
  }
  if (model_vocab_size >= 259) {
    vocab_size_ = 259;
    bos_ = 256;
    eos_ = 257;
    pad_ = 258;
  } else {
    vocab_size_ = 256;
    bos_ = 0x02;
    eos_ = 0x03;
    pad_ = 0x00;
  }
}

std::vector<int64_t> ByteTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  ids.reserve(text.size());
  for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  return ids;
}

std::string ByteTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::string text;
  text.reserve(ids.size());
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size_) {
      throw Error(fmt::format("byte tokenizer: cannot decode id {} (valid ids are 0..{})", id,
                              vocab_size_ - 1));
    }
    const bool special = id == bos_ || id == eos_ || id == pad_;
    if (special && skip_special_tokens) continue;
    if (id < 256) {
      text += static_cast<char>(static_cast<unsigned char>(id));
    } else {
      text += id == bos_ ? "<|bos|>" : id == eos_ ? "<|eos|>" : "<|pad|>";
    }
  }
  return text;
}

std::string ByteTokenizer::describe() const {
  return fmt::format("byte-level tokenizer (ids = bytes, vocab {}, bos {}, eos {}, pad {})",
                     vocab_size_, bos_, eos_, pad_);
}

}  // namespace tessel::data
