// Which dataset rows each rank trains on, step by step.
//
// Each epoch visits the dataset in one order: a shuffle of 0..N-1 seeded by
// (seed, epoch) (shuffle = false: 0..N-1). Step s of the epoch takes the next
// global_batch_size rows of that order; rows that do not fill a whole global
// batch at the end of an epoch are skipped (drop_last), so every step has the
// same size. The global batch is split over the data-parallel group only:
// dp rank d takes rows [d*G/D, (d+1)*G/D) of it; tensor- and
// context-parallel ranks pass their dp rank, so they get the same rows. A dp
// rank's rows are then cut into accumulation_steps() micro batches of
// micro_batch_size rows, in order.
//
// The state (epoch, position in the epoch's order) is all a checkpoint needs:
// restoring it continues with exactly the rows an uninterrupted run would
// have seen, for any dp size (position counts rows, not steps).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tessel::data {

struct SamplerOptions {
  int64_t global_batch_size = 0;  // policy.train_global_batch_size
  int64_t micro_batch_size = 0;   // policy.train_micro_batch_size
  int64_t dp_size = 1;
  int64_t dp_rank = 0;
  uint64_t seed = 42;   // sft.seed
  bool shuffle = true;  // data.shuffle
};

struct SamplerState {
  int64_t epoch = 0;     // completed epochs
  int64_t position = 0;  // rows of this epoch's order already consumed
  // Recorded so resuming against other data fails instead of silently
  // changing the order.
  uint64_t seed = 0;
  int64_t dataset_size = 0;

  std::string to_json() const;
  // Throws tessel::Error naming the missing or malformed field.
  static SamplerState from_json(const std::string& text);
};

class DistributedSampler {
 public:
  // Throws tessel::UsageError when global_batch_size is not a multiple of
  // micro_batch_size x dp_size, or the dataset holds less than one global
  // batch.
  DistributedSampler(int64_t dataset_size, const SamplerOptions& options);

  int64_t accumulation_steps() const { return accumulation_steps_; }
  int64_t steps_per_epoch() const { return dataset_size_ / options_.global_batch_size; }
  int64_t epoch() const { return epoch_; }

  // This dp rank's rows of the next step, as accumulation_steps() micro
  // batches of micro_batch_size dataset indices; advances the state.
  std::vector<std::vector<int64_t>> next_step();
  // All rows of the next step (every dp rank's, in dp-rank order), without
  // advancing.
  std::vector<int64_t> peek_global_batch() const;

  // The visiting order of `epoch`.
  std::vector<int64_t> epoch_order(int64_t epoch) const;

  SamplerState state() const;
  // Throws tessel::UsageError when the state came from another dataset size
  // or seed.
  void load_state(const SamplerState& state);

 private:
  void roll_over_if_exhausted();

  int64_t dataset_size_;
  SamplerOptions options_;
  int64_t accumulation_steps_ = 0;
  int64_t epoch_ = 0;
  int64_t position_ = 0;
  std::vector<int64_t> order_;  // epoch_order(epoch_)
};

}  // namespace tessel::data
