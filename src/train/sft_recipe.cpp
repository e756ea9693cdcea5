#include "train/sft_recipe.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "core/error.h"
#include "core/log.h"
#include "loss/cross_entropy.h"

namespace tessel::train {

namespace {

BatchLayout batch_layout(const TrainOptions& o, int64_t pad_id) {
  BatchLayout l;
  l.collate.pad_id = pad_id;
  l.collate.divisible_by = o.seq_len_divisible_by;
  if (o.packing.enabled) {
    l.pack_capacity = o.packing.train_mb_tokens;
    l.packed = l.collate;
    l.packed.divisible_by = std::lcm(o.seq_len_divisible_by, o.packing.sequence_length_round);
  }
  return l;
}

MicroBatch to_micro_batch(const data::Batch& b, bool packed) {
  MicroBatch mb;
  mb.input_ids = b.input_ids;
  mb.labels = loss::next_token_labels(b.input_ids, b.loss_mask);
  mb.num_tokens = b.num_tokens;
  mb.attention_mask = b.attention_mask;
  if (packed) {  // unpacked rows keep the default positions and plain causal mask
    mb.position_ids = b.position_ids;
    mb.document_ids = b.document_ids;
  }
  return mb;
}

std::vector<MicroBatch> collate_step(const data::Dataset& ds, const std::vector<std::vector<int64_t>>& micro_indices,
                                     const BatchLayout& layout) {
  std::vector<MicroBatch> out;
  out.reserve(micro_indices.size());
  for (const auto& idx : micro_indices) out.push_back(to_micro_batch(layout(ds, idx), layout.packing()));
  return out;
}

// One line on packing: the share of row slots holding real tokens in this
// rank's micro batches of one step, packed and as padded rows would be.
std::string packing_summary(const data::Dataset& ds, const std::vector<std::vector<int64_t>>& micro_indices,
                            const std::vector<MicroBatch>& batches, const BatchLayout& layout) {
  int64_t real = 0, packed_slots = 0, padded_slots = 0, rows = 0;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    real += batches[i].num_tokens;
    packed_slots += batches[i].input_ids.numel();
    rows += batches[i].input_ids.size(0);
    int64_t longest = 0;
    for (int64_t index : micro_indices[i]) longest = std::max(longest, ds[index].size());
    const int64_t d = layout.collate.divisible_by;
    padded_slots += static_cast<int64_t>(micro_indices[i].size()) * ((longest + d - 1) / d * d);
  }
  auto pct = [&](int64_t slots) {
    return slots > 0 ? 100.0 * static_cast<double>(real) / static_cast<double>(slots) : 0.0;
  };
  return fmt::format(
      "packing efficiency {:.1f}% ({} tokens in {} rows, {} slots; padded rows: {:.1f}% of {} "
      "slots)",
      pct(packed_slots), real, rows, packed_slots, pct(padded_slots), padded_slots);
}

}  // namespace

data::Batch BatchLayout::operator()(const data::Dataset& ds, const std::vector<int64_t>& indices) const {
  return packing() ? data::pack(ds, indices, pack_capacity, packed) : data::collate(ds, indices, collate);
}

std::shared_ptr<data::Tokenizer> tokenizer_for(const TrainOptions& o, int64_t vocab) {
  const bool needed = data::dataset_needs_tokenizer(o.train_data.name) ||
                      (o.val_data && data::dataset_needs_tokenizer(o.val_data->name));
  return needed ? data::load_tokenizer(o.tokenizer, vocab) : nullptr;
}

data::Dataset load_split(const DatasetOptions& which, const TrainOptions& o, const data::Tokenizer* tokenizer,
                         int64_t vocab_size) {
  data::DatasetOptions d;
  d.sequence.add_bos = o.add_bos;
  d.sequence.add_eos = o.add_eos;
  d.sequence.max_input_seq_length = o.max_input_seq_length;
  d.split = which.split.empty() ? "train" : which.split;
  d.seed = o.seed;
  d.vocab_size = vocab_size;
  return data::load_dataset(which.name, tokenizer, d);
}

data::SamplerOptions train_sampler_options(const TrainOptions& o, const dist::DeviceMesh& mesh) {
  data::SamplerOptions s;
  s.global_batch_size = o.global_batch_size;
  s.micro_batch_size = o.micro_batch_size;
  s.dp_size = mesh.layout().dp_size();
  s.dp_rank = mesh.coordinate("dp");
  s.seed = o.seed;
  s.shuffle = o.shuffle;
  return s;
}

bool wants_validation(const TrainOptions& o) {
  return o.val_data && (o.val_period > 0 || o.val_at_start || o.val_at_end);
}

ValidationBatches validation_batches(const TrainOptions& o, const dist::DeviceMesh& mesh, int64_t dataset_size) {
  ValidationBatches v;
  v.sampler.global_batch_size = o.val_global_batch_size;
  v.sampler.micro_batch_size = o.val_micro_batch_size;
  v.sampler.dp_size = mesh.layout().dp_size();
  v.sampler.dp_rank = mesh.coordinate("dp");
  v.sampler.seed = o.seed;
  v.sampler.shuffle = false;
  // Constructing checks the batch sizes against the set up front.
  const data::DistributedSampler probe(dataset_size, v.sampler);
  v.num_batches = o.val_batches > 0 ? std::min(o.val_batches, probe.steps_per_epoch()) : probe.steps_per_epoch();
  return v;
}

void SftRecipe::setup(ShardedModel& model, const dist::DeviceMesh& mesh) {
  const int64_t vocab = model.model->config().vocab_size;
  objective_.set_fused_head(options_.fused_lm_head_loss, model);
  tokenizer_ = tokenizer_for(options_, vocab);
  train_set_.emplace(load_split(options_.train_data, options_, tokenizer_.get(), vocab));
  // Without a tokenizer (synthetic data) padding is only rounding up to
  // make_sequence_length_divisible_by; padded positions are never targets,
  // so any id serves.
  layout_ = batch_layout(options_, tokenizer_ ? tokenizer_->pad_id() : 0);
  sampler_.emplace(train_set_->size(), train_sampler_options(options_, mesh));
  const TrainOptions& o = options_;
  if (wants_validation(o)) {
    data::Dataset set = load_split(*o.val_data, o, tokenizer_.get(), vocab);
    const ValidationBatches batches = validation_batches(o, mesh, set.size());
    validation_.emplace(Validation{std::move(set), batches});
  }
}

std::vector<std::string> SftRecipe::describe(const dist::DeviceMesh& mesh) const {
  std::vector<std::string> lines = {
      fmt::format("tokenizer {}", tokenizer_ ? tokenizer_->describe() : "none (synthetic token ids)"),
      fmt::format("data '{}': {} examples, {} steps per epoch; global batch {} = micro batch {} x accumulation {} x "
                  "dp {}",
                  options_.train_data.name, train_set_->size(), sampler_->steps_per_epoch(),
                  options_.global_batch_size, options_.micro_batch_size, sampler_->accumulation_steps(),
                  mesh.layout().dp_size())};
  if (layout_.packing()) {
    lines.push_back(fmt::format(
        "sequence packing on: each micro batch's examples are packed ({}, run as first-fit decreasing) into rows of "
        "at most {} tokens, padded to a multiple of {}; attention stays within each example",
        options_.packing.algorithm, layout_.pack_capacity, layout_.packed.divisible_by));
  }
  return lines;
}

std::vector<MicroBatch> SftRecipe::next_step(ShardedModel& model, const dist::DeviceMesh& mesh, int64_t step) {
  const auto micro_indices = sampler_->next_step();
  auto batches = collate_step(*train_set_, micro_indices, layout_);
  if (first_step_ && layout_.packing() && mesh.world()->rank() == 0) {
    log::info("step {} (rank 0's micro batches): {}", step + 1,
              packing_summary(*train_set_, micro_indices, batches, layout_));
  }
  first_step_ = false;
  return batches;
}

EvalResult SftRecipe::validate(ShardedModel& model, const dist::DeviceMesh& mesh) {
  data::DistributedSampler sampler(validation_->dataset.size(), validation_->batches.sampler);
  std::vector<MicroBatch> batches;
  for (int64_t b = 0; b < validation_->batches.num_batches; ++b) {
    for (auto& mb : collate_step(validation_->dataset, sampler.next_step(), layout_)) batches.push_back(std::move(mb));
  }
  return evaluate(model, mesh, batches, objective_);
}

}  // namespace tessel::train
