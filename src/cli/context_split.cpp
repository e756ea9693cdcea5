#include "cli/context_split.h"

#include <fmt/format.h>

#include "parallel/load_balanced_chunks.h"

namespace tessel::cli {

ContextSplit context_split(int cp, int64_t seq_len) {
  ContextSplit s;
  s.cp = cp;
  s.seq_len = seq_len;
  s.padded_seq_len = parallel::load_balanced_row_length(seq_len, cp);
  s.chunk_tokens = s.padded_seq_len / (2 * static_cast<int64_t>(cp));
  s.tokens_per_rank = cp > 1 ? 2 * s.chunk_tokens : seq_len;
  for (int r = 0; r < cp; ++r) {
    s.chunks_by_cp_rank.push_back({parallel::load_balanced_chunk(cp, r, 0), parallel::load_balanced_chunk(cp, r, 1)});
  }
  return s;
}

std::string describe(const ContextSplit& s) {
  if (s.cp <= 1) {
    return fmt::format("context parallel: none (context_parallel_size is 1); each rank holds whole rows of up to {} "
                       "tokens\n",
                       s.seq_len);
  }
  std::string out = fmt::format(
      "context parallel: cp {} cuts each row of up to {} tokens (policy.max_total_sequence_length{}) into {} chunks "
      "of {}; cp rank i holds chunks i and {}-i (one early, one late: equal causal work), {} tokens per rank; "
      "attention passes K/V around the cp ring\n",
      s.cp, s.seq_len, s.padded_seq_len != s.seq_len ? fmt::format(", padded to {}", s.padded_seq_len) : "",
      2 * s.cp, s.chunk_tokens, 2 * s.cp - 1, s.tokens_per_rank);
  for (int r = 0; r < s.cp; ++r) {
    const auto& c = s.chunks_by_cp_rank[static_cast<size_t>(r)];
    out += fmt::format("  cp rank {}: chunks {} and {}, tokens [{}, {}) and [{}, {})\n", r, c[0], c[1],
                       c[0] * s.chunk_tokens, (c[0] + 1) * s.chunk_tokens, c[1] * s.chunk_tokens,
                       (c[1] + 1) * s.chunk_tokens);
  }
  return out;
}

nlohmann::json to_json(const ContextSplit& s) {
  return {{"cp", s.cp},
          {"seq_len", s.seq_len},
          {"padded_seq_len", s.padded_seq_len},
          {"chunk_tokens", s.chunk_tokens},
          {"tokens_per_rank", s.tokens_per_rank},
          {"chunks_by_cp_rank", s.chunks_by_cp_rank}};
}

}  // namespace tessel::cli
