// Token ids given on the command line (`--tokens 3,10,17`), for the commands
// that run a model on a sequence (`tessel logits`, `tessel logprobs`).
#pragma once

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

}  // namespace tessel::cli
