// Token ids given on the command line (`--tokens 3,10,17`) or in a .jsonl
// line (`{"tokens": [3, 10, 17]}`), for the commands that run a model on a
// sequence (`tessel logits`, `tessel logprobs`, `tessel generate`).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::cli {

// The comma-separated ids of `text` (blanks around each allowed).
// tessel::UsageError naming the item that is not an integer.
std::vector<int64_t> parse_token_list(const std::string& text);

// tessel::UsageError naming the first id outside [0, vocab_size) and its
// position; `what` names where the ids came from ("--tokens", "FILE:LINE").
void check_token_ids(const std::vector<int64_t>& ids, int64_t vocab_size, const std::string& what);

// The ids of a parsed .jsonl line `row`, {"tokens": [ids...]} with at least
// one id, each checked as above. tessel::UsageError naming `where`
// ("FILE:LINE") and, for a line of another shape, `expected` (what a line
// may hold).
std::vector<int64_t> json_token_ids(const nlohmann::json& row, int64_t vocab_size, const std::string& where,
                                    const std::string& expected);

}  // namespace tessel::cli
