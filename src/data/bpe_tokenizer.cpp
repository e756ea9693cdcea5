#include "data/bpe_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "data/unicode.h"

namespace tessel::data {
namespace {

uint64_t pair_key(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right);
}

// The byte-level form of raw bytes (each byte as its GPT-2 code point).
std::string to_byte_level(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) append_utf8(out, byte_to_unicode()[static_cast<unsigned char>(c)]);
  return out;
}

}  // namespace

BpeTokenizer::BpeTokenizer(BpeTokenizerSpec spec) : spec_(std::move(spec)) {
  for (const auto& [token, id] : spec_.vocab) {
    TESSEL_CHECK(id >= 0 && id < std::numeric_limits<int32_t>::max(),
                 "{}: token '{}' has id {} outside [0, 2^31)", spec_.source, token, id);
    id_to_token_[id] = token;
    vocab_size_ = std::max(vocab_size_, id + 1);
  }
  for (const auto& added : spec_.added_tokens) vocab_size_ = std::max(vocab_size_, added.id + 1);
  // Longest first, so "<|im_start|>" wins over a shorter added token that is
  // its prefix.
  std::stable_sort(
      spec_.added_tokens.begin(), spec_.added_tokens.end(),
      [](const AddedToken& a, const AddedToken& b) { return a.content.size() > b.content.size(); });
  for (const auto& added : spec_.added_tokens) added_by_id_[added.id] = &added;

  auto id_of = [&](const std::string& token, std::size_t rank) {
    auto it = spec_.vocab.find(token);
    if (it == spec_.vocab.end()) {
      throw Error(
          fmt::format("{}: merge #{} uses '{}', which is not in model.vocab; the file is "
                      "inconsistent (re-download or re-export the tokenizer)",
                      spec_.source, rank, token));
    }
    return it->second;
  };
  for (std::size_t rank = 0; rank < spec_.merges.size(); ++rank) {
    const auto& [left, right] = spec_.merges[rank];
    const int64_t merged = id_of(left + right, rank);
    // The first (lowest-rank) occurrence of a pair wins, as in HF.
    merges_.emplace(pair_key(id_of(left, rank), id_of(right, rank)),
                    Merge{static_cast<int64_t>(rank), merged});
  }
  for (int b = 0; b < 256; ++b) {
    std::string symbol;
    append_utf8(symbol, byte_to_unicode()[static_cast<std::size_t>(b)]);
    auto it = spec_.vocab.find(symbol);
    byte_ids_[static_cast<std::size_t>(b)] = it == spec_.vocab.end() ? -1 : it->second;
    unicode_to_byte_[byte_to_unicode()[static_cast<std::size_t>(b)]] =
        static_cast<unsigned char>(b);
  }
  for (auto [name, id] :
       {std::pair{"bos", spec_.bos}, std::pair{"eos", spec_.eos}, std::pair{"pad", spec_.pad}}) {
    TESSEL_CHECK(id >= 0 && id < vocab_size_,
                 "{}: the {} token id {} is not a token of this tokenizer (vocab {})", spec_.source,
                 name, id, vocab_size_);
  }
}

std::vector<int64_t> BpeTokenizer::encode(std::string_view text) const {
  std::vector<int64_t> ids;
  std::size_t segment_start = 0;
  std::size_t i = 0;
  while (i < text.size()) {
    const AddedToken* match = nullptr;
    for (const auto& added : spec_.added_tokens) {
      if (!added.content.empty() && text.compare(i, added.content.size(), added.content) == 0) {
        match = &added;
        break;
      }
    }
    if (match == nullptr) {
      ++i;
      continue;
    }
    encode_segment(text.substr(segment_start, i - segment_start), ids);
    ids.push_back(match->id);
    i += match->content.size();
    segment_start = i;
  }
  encode_segment(text.substr(segment_start), ids);
  return ids;
}

void BpeTokenizer::encode_segment(std::string_view segment, std::vector<int64_t>& out) const {
  if (segment.empty()) return;
  std::string prefixed;
  if (spec_.add_prefix_space && segment.front() != ' ') {
    prefixed = " " + std::string(segment);
    segment = prefixed;
  }
  if (!spec_.split) {
    encode_piece(segment, out);
    return;
  }
  for (std::string_view piece : pretokenize(segment, *spec_.split)) encode_piece(piece, out);
}

void BpeTokenizer::encode_piece(std::string_view piece, std::vector<int64_t>& out) const {
  const std::string word = to_byte_level(piece);
  {
    std::lock_guard<std::mutex> lock(cache_mutex_);
    auto it = cache_.find(word);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<int64_t> symbols;
  auto whole = spec_.ignore_merges ? spec_.vocab.find(word) : spec_.vocab.end();
  if (whole != spec_.vocab.end()) {
    symbols.push_back(whole->second);
  } else {
    symbols.reserve(piece.size());
    for (char c : piece) {
      const int64_t id = byte_ids_[static_cast<unsigned char>(c)];
      if (id < 0) {
        throw Error(
            fmt::format("{}: byte 0x{:02x} has no token in model.vocab, so the text "
                        "cannot be encoded; this is not a complete byte-level vocabulary",
                        spec_.source, static_cast<unsigned char>(c)));
      }
      symbols.push_back(id);
    }
    // Repeatedly merge the adjacent pair of lowest rank (leftmost on ties).
    while (symbols.size() > 1) {
      int64_t best_rank = std::numeric_limits<int64_t>::max();
      std::size_t best = 0;
      int64_t best_merged = 0;
      for (std::size_t k = 0; k + 1 < symbols.size(); ++k) {
        auto it = merges_.find(pair_key(symbols[k], symbols[k + 1]));
        if (it != merges_.end() && it->second.rank < best_rank) {
          best_rank = it->second.rank;
          best = k;
          best_merged = it->second.merged;
        }
      }
      if (best_rank == std::numeric_limits<int64_t>::max()) break;
      symbols[best] = best_merged;
      symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best) + 1);
    }
  }
  out.insert(out.end(), symbols.begin(), symbols.end());
  std::lock_guard<std::mutex> lock(cache_mutex_);
  if (cache_.size() < 100000) cache_.emplace(word, std::move(symbols));
}

std::string BpeTokenizer::decode(const std::vector<int64_t>& ids, bool skip_special_tokens) const {
  std::string text;
  for (int64_t id : ids) {
    auto added = added_by_id_.find(id);
    if (added != added_by_id_.end()) {
      if (!(skip_special_tokens && added->second->special)) text += added->second->content;
      continue;
    }
    auto token = id_to_token_.find(id);
    if (token == id_to_token_.end()) {
      throw Error(fmt::format("{}: cannot decode id {}: no token has it (vocab {})", spec_.source,
                              id, vocab_size_));
    }
    if (skip_special_tokens && (id == spec_.bos || id == spec_.eos || id == spec_.pad)) continue;
    for (const CodePoint& cp : decode_utf8(token->second)) {
      auto byte = unicode_to_byte_.find(cp.value);
      if (byte != unicode_to_byte_.end()) {
        text += static_cast<char>(byte->second);
      } else {
        append_utf8(text, cp.value);
      }
    }
  }
  return text;
}

std::string BpeTokenizer::describe() const {
  return fmt::format(
      "byte-level BPE tokenizer from {} ({} split, vocab {}, {} merges, bos {}, "
      "eos {}, pad {})",
      spec_.source, spec_.split ? split_pattern_name(*spec_.split) : "no", vocab_size_,
      spec_.merges.size(), spec_.bos, spec_.eos, spec_.pad);
}

}  // namespace tessel::data
