// What `tessel mesh` and `tessel plan` say about context parallelism: how a
// row of the configured length is padded and cut into 2·cp chunks, and which
// chunks each cp rank holds (parallel/load_balanced_chunks.h).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::cli {

struct ContextSplit {
  int cp = 1;
  int64_t seq_len = 0;         // policy.max_total_sequence_length
  int64_t padded_seq_len = 0;  // a multiple of 2·cp
  int64_t chunk_tokens = 0;
  int64_t tokens_per_rank = 0;
  std::vector<std::array<int64_t, 2>> chunks_by_cp_rank;
};

ContextSplit context_split(int cp, int64_t seq_len);

// "context parallel: cp 2 cuts each row of up to 64 tokens into 4 chunks of
// 16 ...", one line per cp rank after it.
std::string describe(const ContextSplit& split);
nlohmann::json to_json(const ContextSplit& split);

}  // namespace tessel::cli
