// Byte-level BPE tokenizer of a Hugging Face tokenizer.json (GPT-2, Llama-3,
// Qwen2/3 style).
//
// Supported: model.type "BPE" with vocab and merges (either "a b" strings or
// ["a", "b"] pairs), ignore_merges; pre_tokenizer ByteLevel (use_regex true =
// the GPT-2 split, add_prefix_space) or Sequence[Split(one of the regexes in
// pretokenize.h, behavior "Isolated"), ByteLevel(use_regex false)];
// normalizer null or NFC (NFC is NOT applied: input text is taken as already
// NFC, which ASCII and most stored text is); added_tokens are matched
// literally in the text before splitting (their lstrip/rstrip/normalized flags
// are ignored). The post_processor is ignored: bos/eos are added by the data
// pipeline. Everything else (byte_fallback, SentencePiece Metaspace,
// WordPiece, Unigram, other regexes, other normalizers) is reported as
// unsupported and load_tokenizer() falls back to bytes.
//
// Special ids: bos/eos/pad tokens from tokenizer_config.json beside the file,
// else bos_token_id/eos_token_id/pad_token_id from config.json; a missing bos
// or pad reuses eos.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/pretokenize.h"
#include "data/tokenizer.h"

namespace tessel::data {

struct AddedToken {
  int64_t id = 0;
  std::string content;
  bool special = false;
};

// What tokenizer.json (and its neighbours) say, in plain form.
struct BpeTokenizerSpec {
  std::unordered_map<std::string, int64_t> vocab;           // byte-level (GPT-2 mapped) strings
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  std::vector<AddedToken> added_tokens;
  std::optional<SplitPattern> split;  // nullopt: the whole text is one piece
  bool add_prefix_space = false;
  bool ignore_merges = false;
  int64_t bos = -1;
  int64_t eos = -1;
  int64_t pad = -1;
  std::string source;  // for messages: the tokenizer.json path
};

class BpeTokenizer : public Tokenizer {
 public:
  // Throws tessel::Error when a merge or special id refers to a missing token.
  explicit BpeTokenizer(BpeTokenizerSpec spec);

  std::vector<int64_t> encode(std::string_view text) const override;
  std::string decode(const std::vector<int64_t>& ids,
                     bool skip_special_tokens = false) const override;
  int64_t bos_id() const override { return spec_.bos; }
  int64_t eos_id() const override { return spec_.eos; }
  int64_t pad_id() const override { return spec_.pad; }
  int64_t vocab_size() const override { return vocab_size_; }
  std::string describe() const override;

 private:
  void encode_piece(std::string_view piece, std::vector<int64_t>& out) const;
  void encode_segment(std::string_view segment, std::vector<int64_t>& out) const;

  struct Merge {
    int64_t rank;
    int64_t merged;
  };
  BpeTokenizerSpec spec_;
  int64_t vocab_size_ = 0;
  std::unordered_map<int64_t, std::string> id_to_token_;
  std::unordered_map<int64_t, const AddedToken*> added_by_id_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> merge
  std::array<int64_t, 256> byte_ids_{};         // id of each single byte's symbol, -1 if none
  std::unordered_map<char32_t, unsigned char> unicode_to_byte_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
};

// Reads `dir`/tokenizer.json. Returns nullptr and sets `why_unsupported` when
// it uses a feature this reader does not implement; throws tessel::Error
// (with the file name) when a file is malformed or names unknown tokens.
std::shared_ptr<BpeTokenizer> read_bpe_tokenizer(const std::filesystem::path& dir,
                                                 std::string& why_unsupported);

}  // namespace tessel::data
