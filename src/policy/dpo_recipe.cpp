#include "policy/dpo_recipe.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>

#include "data/collate.h"
#include "loss/cross_entropy.h"
#include "policy/logprobs.h"
#include "policy/policy_batch.h"

namespace tessel::policy {

namespace {

data::DatasetOptions dataset_options(const train::TrainOptions& o, const train::DatasetOptions& which) {
  data::DatasetOptions d;
  d.sequence.add_bos = o.add_bos;
  d.sequence.add_eos = o.add_eos;
  d.sequence.max_input_seq_length = o.max_input_seq_length;
  d.split = which.split.empty() ? "train" : which.split;
  return d;
}

}  // namespace

train::MicroBatch preference_micro_batch(const data::PreferenceDataset& pairs, const std::vector<int64_t>& indices,
                                         int64_t pad_id, int64_t divisible_by) {
  std::vector<data::Example> rows;
  rows.reserve(2 * indices.size());
  for (int64_t i : indices) {
    rows.push_back(pairs[i].chosen);
    rows.push_back(pairs[i].rejected);
  }
  std::vector<int64_t> order(rows.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(i);
  data::CollateOptions collate;
  collate.pad_id = pad_id;
  collate.divisible_by = divisible_by;
  const data::Batch b = data::collate(data::Dataset("pairs", std::move(rows)), order, collate);
  train::MicroBatch mb;
  mb.input_ids = b.input_ids;
  mb.labels = loss::next_token_labels(b.input_ids, b.loss_mask);
  mb.num_tokens = b.num_tokens;
  mb.attention_mask = b.attention_mask;
  mb.token_values[kTokenMask] = mb.labels.ne(loss::kIgnoreIndex).to(at::kFloat);
  mb.row_values[kSampleMask] = at::ones({b.input_ids.size(0)}, at::kFloat);
  add_whole_row_values(mb);
  return mb;
}

DpoRecipe::DpoRecipe(train::TrainOptions options, DpoOptions dpo)
    : options_(std::move(options)), dpo_(dpo), objective_(dpo) {}

void DpoRecipe::setup(train::ShardedModel& model, const dist::DeviceMesh& mesh) {
  objective_.set_fused_head(options_.fused_lm_head_loss, model);
  const int64_t vocab = model.model->config().vocab_size;
  tokenizer_ = data::load_tokenizer(options_.tokenizer, vocab);
  train_pairs_.emplace(
      data::load_preference_dataset(options_.train_data.name, *tokenizer_, dataset_options(options_, options_.train_data)));
  sampler_.emplace(train_pairs_->size(), train::train_sampler_options(options_, mesh));
  const train::TrainOptions& o = options_;
  if (train::wants_validation(o)) {
    data::PreferenceDataset pairs =
        data::load_preference_dataset(o.val_data->name, *tokenizer_, dataset_options(o, *o.val_data));
    const train::ValidationBatches batches = train::validation_batches(o, mesh, pairs.size());
    validation_.emplace(Validation{std::move(pairs), batches});
  }
  // The initial weights (before any resume replaces them with the
  // checkpoint's reference): this rank's copy of its shards.
  reference_ = std::make_unique<ReferencePolicy>(model);
}

std::vector<std::string> DpoRecipe::describe(const dist::DeviceMesh& mesh) const {
  return {
      fmt::format("tokenizer {}", tokenizer_->describe()),
      fmt::format("preference data '{}': {} pairs, {} steps per epoch; global batch {} pairs = micro batch {} pairs "
                  "({} rows, chosen and rejected interleaved) x accumulation {} x dp {}",
                  options_.train_data.name, train_pairs_->size(), sampler_->steps_per_epoch(),
                  options_.global_batch_size, options_.micro_batch_size, 2 * options_.micro_batch_size,
                  sampler_->accumulation_steps(), mesh.layout().dp_size()),
      fmt::format("DPO: beta (dpo.reference_policy_kl_penalty) {}, preference_loss_weight {}, sft_loss_weight {}, "
                  "average log-probs: preference {}, sft {}; reference policy: the initial weights, {:.1f} MiB of "
                  "shards per rank",
                  dpo_.reference_policy_kl_penalty, dpo_.preference_loss_weight, dpo_.sft_loss_weight,
                  dpo_.preference_average_log_probs, dpo_.sft_average_log_probs,
                  static_cast<double>(reference_->bytes()) / (1024.0 * 1024.0))};
}

std::vector<train::MicroBatch> DpoRecipe::batches_of(const data::PreferenceDataset& pairs,
                                                     const std::vector<std::vector<int64_t>>& micro_indices,
                                                     train::ShardedModel& model, const dist::DeviceMesh& mesh) {
  std::vector<train::MicroBatch> out;
  out.reserve(micro_indices.size());
  for (const auto& indices : micro_indices) {
    out.push_back(preference_micro_batch(pairs, indices, tokenizer_->pad_id(), options_.seq_len_divisible_by));
  }
  // One swap for the step: every micro batch's reference log-probs.
  reference_->with_reference_weights(model, mesh, [&] {
    for (auto& mb : out) {
      const at::Tensor lengths = mb.attention_mask.sum(1);
      mb.token_values[kReferenceLogprobs] = logprobs_aligned_with_labels(
          get_logprobs(model, mesh, mb.input_ids, lengths, 1.0, options_.fused_lm_head_loss));
    }
  });
  return out;
}

std::vector<train::MicroBatch> DpoRecipe::next_step(train::ShardedModel& model, const dist::DeviceMesh& mesh,
                                                    int64_t step) {
  return batches_of(*train_pairs_, sampler_->next_step(), model, mesh);
}

train::EvalResult DpoRecipe::validate(train::ShardedModel& model, const dist::DeviceMesh& mesh) {
  data::DistributedSampler sampler(validation_->pairs.size(), validation_->batches.sampler);
  std::vector<std::vector<int64_t>> micro_indices;
  for (int64_t b = 0; b < validation_->batches.num_batches; ++b) {
    for (auto& indices : sampler.next_step()) micro_indices.push_back(std::move(indices));
  }
  return train::evaluate(model, mesh, batches_of(validation_->pairs, micro_indices, model, mesh), objective_);
}

train::TrainResult train_dpo(const config::Config& config, const dist::DeviceMesh& mesh, const train::RunOptions& run) {
  const train::TrainOptions options = train::train_options_from(config, dpo_section());
  DpoRecipe recipe(options, dpo_options_from(config));
  return train::run_training(config, options, mesh, recipe, run);
}

}  // namespace tessel::policy
