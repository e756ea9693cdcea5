// Byte-level fallback tokenizer: one token per UTF-8 byte, token id = byte.
//
// Keeping id == byte makes a 256-row embedding enough, which is what the
// built-in tiny models have. Special ids depend on the model's vocabulary:
//   vocab >= 259: bos = 256, eos = 257, pad = 258 (ids no byte can produce);
//   vocab 256..258: the ASCII control bytes meant for this are reused:
//       bos = 0x02 (STX, start of text), eos = 0x03 (ETX, end of text),
//       pad = 0x00 (NUL). Text containing these bytes still round-trips, but
//       such a byte is then indistinguishable from bos/eos.
// Smaller vocabularies cannot hold every byte: construction throws.
#pragma once

#include "data/tokenizer.h"

namespace tessel::data {

class ByteTokenizer : public Tokenizer {
 public:
  explicit ByteTokenizer(int64_t model_vocab_size);

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids,
                     bool skip_special_tokens = false) const override;
  int64_t bos_id() const override { return bos_; }
  int64_t eos_id() const override { return eos_; }
  int64_t pad_id() const override { return pad_; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::string describe() const override;

 private:
  int64_t vocab_size_;
  int64_t bos_;
  int64_t eos_;
  int64_t pad_;
};

}  // namespace tessel::data
