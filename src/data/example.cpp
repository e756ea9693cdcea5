#include "data/example.h"

namespace tessel::data {

int64_t Example::num_targets() const {
  int64_t n = 0;
  for (std::size_t t = 1; t < loss_mask.size(); ++t) n += loss_mask[t] != 0 ? 1 : 0;
  return n;
}

bool truncate_example(Example& example, int64_t max_input_seq_length) {
  if (max_input_seq_length > 0 && example.size() > max_input_seq_length) {
    example.tokens.resize(static_cast<std::size_t>(max_input_seq_length));
    example.loss_mask.resize(static_cast<std::size_t>(max_input_seq_length));
  }
  return example.num_targets() > 0;
}

}  // namespace tessel::data
