// DPO's preference data (SPEC 11): pairs of responses to one prompt, the
// preferred one first, tokenised up front.
//
// data.train.dataset_name / data.validation.dataset_name is one of
//   "demo_dpo"   the set shipped in examples/data (demo_dpo.jsonl for split
//                "train", demo_dpo_val.jsonl otherwise; found as demo_sft is)
//   a path to a .jsonl file, one JSON object per line:
//     {"prompt": "...", "chosen": "...", "rejected": "..."}
//   Each response becomes a row laid out as an SFT prompt/response example
//   (sft_template.h: [bos] prompt response [eos], the response and its eos
//   the targets). Other fields are ignored; blank lines are skipped.
// A pair whose row (prompt + the longer response, bos and eos included) is
// longer than data.max_input_seq_length is an error naming the line and both
// lengths: DPO compares whole responses, so cutting one would compare a
// response with part of another. So is a missing or non-string field.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/dataset.h"
#include "data/example.h"
#include "data/tokenizer.h"

namespace tessel::data {

struct PreferencePair {
  Example chosen;
  Example rejected;
};

class PreferenceDataset {
 public:
  PreferenceDataset(std::string name, std::vector<PreferencePair> pairs);

  const std::string& name() const { return name_; }
  int64_t size() const { return static_cast<int64_t>(pairs_.size()); }
  const PreferencePair& operator[](int64_t index) const;

 private:
  std::string name_;
  std::vector<PreferencePair> pairs_;
};

// `options.split` picks the demo file; options.sequence bounds the rows.
PreferenceDataset load_preference_dataset(const std::string& dataset_name, const Tokenizer& tokenizer,
                                          const DatasetOptions& options);

}  // namespace tessel::data
