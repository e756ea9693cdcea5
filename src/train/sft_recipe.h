// SFT as a recipe of the shared training loop (train/recipe.h, SPEC 6): the
// train and validation datasets (data.train, data.validation) tokenised up
// front, each step's rows picked by the distributed sampler and laid out as
// padded rows or, with policy.sequence_packing, packed ones; the objective is
// the next-token cross-entropy over the response tokens; validation is the
// same loss over the first sft.val_batches global batches of the validation
// set.
#pragma once

#include <memory>
#include <optional>

#include "data/collate.h"
#include "data/dataset.h"
#include "data/sampler.h"
#include "data/tokenizer.h"
#include "train/next_token_objective.h"
#include "train/recipe.h"
#include "train/train_options.h"

namespace tessel::train {

// How the examples of one micro batch become tensors: one padded example per
// row (data::collate), or with policy.sequence_packing rows of several
// documents (data::pack; train_options.h PackingOptions). Packing keeps the
// micro batch's examples (only their layout changes) and its loss masks:
// pack() never makes a document's first token a target, so no target crosses
// a document boundary and the valid-token count equals the padded layout's.
struct BatchLayout {
  data::CollateOptions collate;
  int64_t pack_capacity = 0;    // > 0: packed rows of at most this many tokens
  data::CollateOptions packed;  // collate, rows also rounded to sequence_length_round

  bool packing() const { return pack_capacity > 0; }
  data::Batch operator()(const data::Dataset& ds, const std::vector<int64_t>& indices) const;
};

// Synthetic token ids need no tokenizer, so a run on synthetic data alone
// loads none: its model directory may lack tokenizer.json and have a
// vocabulary too small for the byte-level fallback. Null then.
std::shared_ptr<data::Tokenizer> tokenizer_for(const TrainOptions& options, int64_t vocab);

// data.train / data.validation as tokenised examples.
data::Dataset load_split(const DatasetOptions& which, const TrainOptions& options, const data::Tokenizer* tokenizer,
                         int64_t vocab_size);

// The distributed sampler of a run's training data (policy.*_batch_size,
// data.shuffle, <algorithm>.seed) over `dataset_size` examples.
data::SamplerOptions train_sampler_options(const TrainOptions& options, const dist::DeviceMesh& mesh);

// Whether the config asks for validation at all (a validation set and a
// period, or validation at the start or end).
bool wants_validation(const TrainOptions& options);

// The validation rows: the first <algorithm>.val_batches global batches
// (all, when 0) of a set of `dataset_size` examples, in file order (the same
// rows every time, so values are comparable), cut like the training batches.
// UsageError when the batch sizes do not fit the set.
struct ValidationBatches {
  data::SamplerOptions sampler;
  int64_t num_batches = 0;
};
ValidationBatches validation_batches(const TrainOptions& options, const dist::DeviceMesh& mesh, int64_t dataset_size);

class SftRecipe : public Recipe {
 public:
  explicit SftRecipe(TrainOptions options) : options_(std::move(options)) {}

  std::string name() const override { return "sft"; }
  void setup(ShardedModel& model, const dist::DeviceMesh& mesh) override;
  std::vector<std::string> describe(const dist::DeviceMesh& mesh) const override;
  int64_t steps_per_epoch() const override { return sampler_->steps_per_epoch(); }
  std::vector<MicroBatch> next_step(ShardedModel& model, const dist::DeviceMesh& mesh, int64_t step) override;
  StepObjective& objective() override { return objective_; }
  bool validates() const override { return validation_.has_value(); }
  EvalResult validate(ShardedModel& model, const dist::DeviceMesh& mesh) override;
  data::SamplerState data_state() const override { return sampler_->state(); }
  void load_data_state(const data::SamplerState& state) override { sampler_->load_state(state); }

 private:
  struct Validation {
    data::Dataset dataset;
    ValidationBatches batches;
  };

  TrainOptions options_;
  std::shared_ptr<data::Tokenizer> tokenizer_;
  std::optional<data::Dataset> train_set_;
  std::optional<data::DistributedSampler> sampler_;
  BatchLayout layout_;
  std::optional<Validation> validation_;
  NextTokenObjective objective_;
  bool first_step_ = true;
};

}  // namespace tessel::train
