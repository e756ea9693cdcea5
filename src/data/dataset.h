// SFT datasets: every example tokenised up front, held in memory.
//
// data.train.dataset_name / data.validation.dataset_name is one of
//   "synthetic"          seeded random tokens (synthetic.h)
//   "demo_sft" ("demo")  the set shipped in examples/data (demo_sft.jsonl for
//                        split "train", demo_sft_val.jsonl otherwise), found
//                        via $TESSEL_SOURCE_DIR, the working directory or the
//                        directories above the running program
//   a path to a .jsonl file, one JSON object per line, each line one of
//     {"input": "...", "output": "..."}              prompt + response
//     {"messages": [{"role": ..., "content": ...}]}   chat (sft_template.h)
//     {"tokens": [1, 2, ...], "loss_mask": [0, 1, ...]}
//                                                     pre-tokenised; loss_mask
//                                                     optional (default all 1);
//                                                     bos/eos are not added
//   Blank lines are skipped. Formats may be mixed within one file.
// Examples that have no target left after truncation are dropped with one
// warning; a dataset with no examples is an error.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/example.h"
#include "data/tokenizer.h"

namespace tessel::data {

struct DatasetOptions {
  SequenceOptions sequence;
  std::string split = "train";  // picks the demo file and the synthetic stream
  uint64_t seed = 42;           // synthetic data only
  // The model's vocabulary: range of synthetic tokens, bound checked for
  // pre-tokenised files (0 = unchecked).
  int64_t vocab_size = 0;
  int64_t synthetic_num_examples = 1024;
  int64_t synthetic_sequence_length = 0;  // 0 = sequence.max_input_seq_length
};

class Dataset {
 public:
  Dataset(std::string name, std::vector<Example> examples);

  const std::string& name() const { return name_; }
  int64_t size() const { return static_cast<int64_t>(examples_.size()); }
  const Example& operator[](int64_t index) const;
  const std::vector<Example>& examples() const { return examples_; }

 private:
  std::string name_;
  std::vector<Example> examples_;
};

// `tokenizer` may be null for "synthetic" and token-only files; a text line
// without one throws.
Dataset load_dataset(const std::string& dataset_name, const Tokenizer* tokenizer,
                     const DatasetOptions& options);

// False only for "synthetic", whose token ids are drawn from the vocabulary
// directly: a run on it loads no tokenizer (its model directory may have none,
// and a vocabulary too small for the byte-level fallback). A file may hold
// text, so it needs one.
bool dataset_needs_tokenizer(const std::string& dataset_name);

// Reads one .jsonl file (formats above). Errors name file:line.
Dataset load_jsonl_dataset(const std::string& path, const Tokenizer* tokenizer,
                           const DatasetOptions& options);

// Absolute path of the shipped demo file for `split`; throws UsageError
// listing the places searched when it cannot be found.
std::string find_demo_dataset(const std::string& split);
// Absolute path of examples/data/<file_name>, searched as above.
std::string find_demo_file(const std::string& file_name);

}  // namespace tessel::data
