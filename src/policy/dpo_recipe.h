// DPO as a recipe of the shared training loop (train/recipe.h; `tessel dpo`,
// NeMo RL's DPO recipe layout: dpo.*, policy.*, data.*). The data are
// preference pairs (data/preference_dataset.h); policy.train_global_batch_size
// and train_micro_batch_size count pairs, so a micro batch holds 2 x
// train_micro_batch_size rows, chosen and rejected interleaved. Before each
// step the reference policy (policy/reference_policy.h: the initial weights,
// this rank's copy of its shards) gives the reference log-probs of the
// step's rows, swapped in once per step; the objective is the DPO loss
// (policy/dpo_loss.h) with dpo.* as NeMo RL names it. Validation is the same
// loss (and metrics) over the first dpo.val_batches global batches of
// data.validation. Checkpoints keep the reference, so a resumed run compares
// with the weights it started from.
#pragma once

#include <memory>
#include <optional>

#include "config/config.h"
#include "data/preference_dataset.h"
#include "data/sampler.h"
#include "data/tokenizer.h"
#include "policy/dpo_objective.h"
#include "policy/loss_options.h"
#include "policy/reference_policy.h"
#include "train/recipe.h"
#include "train/sft_recipe.h"
#include "train/trainer.h"

namespace tessel::policy {

class DpoRecipe : public train::Recipe {
 public:
  DpoRecipe(train::TrainOptions options, DpoOptions dpo);

  std::string name() const override { return "dpo"; }
  void setup(train::ShardedModel& model, const dist::DeviceMesh& mesh) override;
  std::vector<std::string> describe(const dist::DeviceMesh& mesh) const override;
  int64_t steps_per_epoch() const override { return sampler_->steps_per_epoch(); }
  std::vector<train::MicroBatch> next_step(train::ShardedModel& model, const dist::DeviceMesh& mesh,
                                           int64_t step) override;
  train::StepObjective& objective() override { return objective_; }
  bool validates() const override { return validation_.has_value(); }
  train::EvalResult validate(train::ShardedModel& model, const dist::DeviceMesh& mesh) override;
  data::SamplerState data_state() const override { return sampler_->state(); }
  void load_data_state(const data::SamplerState& state) override { sampler_->load_state(state); }
  train::ShardSets* checkpoint_shards() override { return &reference_->shard_sets(); }
  std::vector<std::string> shown_metrics() const override { return {"accuracy", "reward_margin"}; }

 private:
  struct Validation {
    data::PreferenceDataset pairs;
    train::ValidationBatches batches;
  };

  // The micro batches of these pairs' rows, with the reference's log-probs.
  std::vector<train::MicroBatch> batches_of(const data::PreferenceDataset& pairs,
                                            const std::vector<std::vector<int64_t>>& micro_indices,
                                            train::ShardedModel& model, const dist::DeviceMesh& mesh);

  train::TrainOptions options_;
  DpoOptions dpo_;
  std::shared_ptr<data::Tokenizer> tokenizer_;
  std::optional<data::PreferenceDataset> train_pairs_;
  std::optional<data::DistributedSampler> sampler_;
  std::optional<Validation> validation_;
  std::unique_ptr<ReferencePolicy> reference_;
  DpoObjective objective_;
};

// One DPO micro batch of `pairs`: rows chosen, rejected, chosen, ... padded
// with `pad_id` to a multiple of `divisible_by`, labels on the response
// tokens, token_mask, sample_mask and row_tokens (policy_batch.h). The
// reference log-probs are the caller's (DpoRecipe fills them).
train::MicroBatch preference_micro_batch(const data::PreferenceDataset& pairs, const std::vector<int64_t>& indices,
                                         int64_t pad_id, int64_t divisible_by);

// `tessel dpo`: the DPO recipe on the config's dpo.*, policy.* and data.*.
train::TrainResult train_dpo(const config::Config& config, const dist::DeviceMesh& mesh,
                             const train::RunOptions& run = {});

}  // namespace tessel::policy
