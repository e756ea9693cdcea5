// One SFT example after tokenisation, and the options that shape it.
//
// loss_mask[t] = 1 says token t is a training target (predicted from tokens
// before it); prompts, chat headers and bos are 0, responses and their eos 1.
// This is the convention of loss::next_token_labels, which shifts the mask
// together with the tokens.
#pragma once

#include <cstdint>
#include <vector>

namespace tessel::data {

struct Example {
  std::vector<int64_t> tokens;
  std::vector<int64_t> loss_mask;  // same length as tokens, 0 or 1

  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  // Targets that next-token prediction can reach (token 0 has no predecessor).
  int64_t num_targets() const;
};

struct SequenceOptions {
  bool add_bos = true;  // bos before the prompt (text formats only)
  bool add_eos = true;  // eos after each response (text formats only), a target
  // Longer examples keep their first max_input_seq_length tokens (the tail of
  // the response, and its eos, are cut). 0 = no limit.
  int64_t max_input_seq_length = 0;
};

// Applies the truncation policy above. Returns false when the example has no
// reachable target left (the caller drops it: it would teach nothing).
bool truncate_example(Example& example, int64_t max_input_seq_length);

}  // namespace tessel::data
