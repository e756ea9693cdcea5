#include "data/sampler.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <numeric>

#include "core/error.h"
#include "data/rng.h"

namespace tessel::data {

std::string SamplerState::to_json() const {
  return nlohmann::json{
      {"epoch", epoch}, {"position", position}, {"seed", seed}, {"dataset_size", dataset_size}}
      .dump();
}

SamplerState SamplerState::from_json(const std::string& text) {
  try {
    const auto j = nlohmann::json::parse(text);
    SamplerState s;
    s.epoch = j.at("epoch").get<int64_t>();
    s.position = j.at("position").get<int64_t>();
    s.seed = j.at("seed").get<uint64_t>();
    s.dataset_size = j.at("dataset_size").get<int64_t>();
    return s;
  } catch (const nlohmann::json::exception& e) {
    throw Error(
        fmt::format("data sampler state is malformed ({}): expected a JSON object with "
                    "epoch, position, seed and dataset_size; the checkpoint may be damaged",
                    e.what()));
  }
}

DistributedSampler::DistributedSampler(int64_t dataset_size, const SamplerOptions& options)
    : dataset_size_(dataset_size), options_(options) {
  const int64_t g = options.global_batch_size;
  const int64_t m = options.micro_batch_size;
  const int64_t d = options.dp_size;
  if (g <= 0 || m <= 0 || d <= 0) {
    throw UsageError(
        fmt::format("batch sizes must be positive: global batch {}, micro batch {}, "
                    "data-parallel size {}",
                    g, m, d));
  }
  if (g % (m * d) != 0) {
    throw UsageError(fmt::format(
        "global batch size {} is not a multiple of micro batch size {} x data-parallel size {} "
        "= {}: each step must give every dp rank the same whole number of micro batches. Set "
        "policy.train_global_batch_size to a multiple of {} (e.g. {}) or change "
        "train_micro_batch_size",
        g, m, d, m * d, m * d, std::max<int64_t>(1, g / (m * d)) * m * d));
  }
  TESSEL_CHECK(options.dp_rank >= 0 && options.dp_rank < d, "dp rank {} outside [0, {})",
               options.dp_rank, d);
  if (dataset_size < g) {
    throw UsageError(
        fmt::format("the dataset has {} examples, fewer than one global batch of {}; lower "
                    "policy.train_global_batch_size (or the validation batch size) or add data",
                    dataset_size, g));
  }
  accumulation_steps_ = g / (m * d);
  order_ = epoch_order(0);
}

std::vector<int64_t> DistributedSampler::epoch_order(int64_t epoch) const {
  std::vector<int64_t> order(static_cast<std::size_t>(dataset_size_));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (options_.shuffle) shuffle(order, derive_seed(options_.seed, static_cast<uint64_t>(epoch)));
  return order;
}

std::vector<int64_t> DistributedSampler::peek_global_batch() const {
  const auto begin = order_.begin() + position_;
  return std::vector<int64_t>(begin, begin + options_.global_batch_size);
}

std::vector<std::vector<int64_t>> DistributedSampler::next_step() {
  const std::vector<int64_t> global = peek_global_batch();
  const int64_t per_rank = options_.global_batch_size / options_.dp_size;
  const int64_t m = options_.micro_batch_size;
  std::vector<std::vector<int64_t>> micro_batches;
  for (int64_t a = 0; a < accumulation_steps_; ++a) {
    const auto begin = global.begin() + options_.dp_rank * per_rank + a * m;
    micro_batches.emplace_back(begin, begin + m);
  }
  position_ += options_.global_batch_size;
  roll_over_if_exhausted();
  return micro_batches;
}

void DistributedSampler::roll_over_if_exhausted() {
  if (position_ + options_.global_batch_size > dataset_size_) {
    ++epoch_;
    position_ = 0;
    order_ = epoch_order(epoch_);
  }
}

SamplerState DistributedSampler::state() const {
  return SamplerState{epoch_, position_, options_.seed, dataset_size_};
}

void DistributedSampler::load_state(const SamplerState& state) {
  if (state.seed != options_.seed || state.dataset_size != dataset_size_) {
    throw UsageError(fmt::format(
        "the checkpoint's data order came from {} examples with seed {}, but this run has {} "
        "examples with seed {}: resuming would repeat or skip rows. Resume with the same "
        "dataset and sft.seed, or start a new run",
        state.dataset_size, state.seed, dataset_size_, options_.seed));
  }
  TESSEL_CHECK(state.epoch >= 0 && state.position >= 0 && state.position <= dataset_size_,
               "sampler state out of range: epoch {}, position {} of {}", state.epoch,
               state.position, dataset_size_);
  epoch_ = state.epoch;
  position_ = state.position;
  order_ = epoch_order(epoch_);
  roll_over_if_exhausted();
}

}  // namespace tessel::data
