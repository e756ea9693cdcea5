// GRPO's prompts with their reference answers (SPEC 11), tokenised up front.
//
// data.train.dataset_name / data.validation.dataset_name is one of
//   "demo_sft" (or "demo")  the demo tasks shipped in examples/data
//                           (demo_sft.jsonl for split "train",
//                           demo_sft_val.jsonl otherwise): addition,
//                           reversal, uppercasing, answers checkable exactly
//   a path to a .jsonl file, one JSON object per line:
//     {"input": "12+7=", "output": "19"}
//   (NeMo RL's ResponseDataset keys: the prompt and its reference answer;
//   the same files SFT trains on). Other fields are ignored, blank lines
//   skipped.
// A prompt is laid out as an SFT example's prompt part (sft_template.h):
// [bos] input (bos when data.add_bos), so a policy warmed up with SFT on the
// same task continues it. A prompt that leaves no room for a response within
// data.max_input_seq_length is an error naming the line; so is a missing or
// non-string field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/tokenizer.h"

namespace tessel::data {

struct PromptExample {
  std::vector<int64_t> tokens;  // the prompt, as the policy sees it
  std::string answer;           // the reference answer a verifier checks against
};

class PromptDataset {
 public:
  PromptDataset(std::string name, std::vector<PromptExample> prompts);

  const std::string& name() const { return name_; }
  int64_t size() const { return static_cast<int64_t>(prompts_.size()); }
  const PromptExample& operator[](int64_t index) const;

 private:
  std::string name_;
  std::vector<PromptExample> prompts_;
};

// `options.split` picks the demo file; options.sequence gives bos and the length bound.
PromptDataset load_prompt_dataset(const std::string& dataset_name, const Tokenizer& tokenizer,
                                  const DatasetOptions& options);

}  // namespace tessel::data
