// Text <-> token ids for SFT data.
//
// Two implementations: ByteTokenizer (byte_tokenizer.h), used by the built-in
// tiny models and whenever a model directory has no usable tokenizer.json, and
// BpeTokenizer (bpe_tokenizer.h) for Hugging Face byte-level BPE tokenizer.json
// files (GPT-2, Llama-3, Qwen2/3). encode() never adds bos/eos: the dataset
// code decides where they go (data.add_bos / data.add_eos).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessel::data {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual std::vector<int64_t> encode(std::string_view text) const = 0;
  // Special ids render as their text (e.g. "<|endoftext|>") unless skipped.
  virtual std::string decode(const std::vector<int64_t>& ids,
                             bool skip_special_tokens = false) const = 0;

  virtual int64_t bos_id() const = 0;
  virtual int64_t eos_id() const = 0;
  virtual int64_t pad_id() const = 0;
  // One more than the largest id encode() can produce (and bos/eos/pad).
  virtual int64_t vocab_size() const = 0;
  // One line for logs: kind, vocab size and special ids.
  virtual std::string describe() const = 0;
};

// The tokenizer of a model: `model_dir_or_preset` is a directory holding
// tokenizer.json (byte-level BPE; see bpe_tokenizer.h for what is supported)
// or a built-in preset name. A preset, a directory without tokenizer.json or a
// tokenizer.json using unsupported features gives a ByteTokenizer, with an
// info line saying why. Throws tessel::UsageError when the tokenizer's ids do
// not fit `model_vocab_size` (the model's embedding rows), or when the path
// is neither a directory nor a preset-like name.
std::shared_ptr<Tokenizer> load_tokenizer(const std::string& model_dir_or_preset,
                                          int64_t model_vocab_size);

}  // namespace tessel::data
