// What one training step minimises over its micro batches: SFT's next-token
// cross-entropy (train/next_token_objective.h), or a policy loss (the
// clipped policy gradient, DPO; src/policy/). The step itself
// (train/train_step.h) is the same for all of them: forward and backward of
// each micro batch, gradient clipping, AdamW.
//
// Normalisation (SPEC 6, SPEC 11): begin() counts what the loss is divided
// by (valid tokens, valid sequences) over the whole global batch before any
// forward, all-reduced over dp, so every micro batch's backward uses the
// final divisor and the gradient does not depend on how the batch was split
// into ranks and micro batches. Each micro batch then contributes its part
// of the loss, already divided; the step's metrics are those parts summed
// over the micro batches and the dp_cp group (a contribution of whole rows,
// which every cp rank of the row knows, is counted by cp rank 0 only).
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dist/device_mesh.h"
#include "train/model_setup.h"
#include "train/train_step.h"

namespace tessel::train {

// Named values in a fixed order ("loss" first).
using Metrics = std::vector<std::pair<std::string, double>>;

// What begin() found in the global batch.
struct StepCounts {
  int64_t valid_tokens = 0;  // tokens the loss counts
  int64_t tokens = 0;        // real (non-padding) tokens, for throughput
};

// Named sums a loss keeps over a step's micro batches, in first-use order.
// A value may be a host number or a scalar tensor; tensors are summed where
// they are, in float64, and read in take() all at once: on a device each read
// waits for everything queued before it, and one wait per step is the least
// there can be (reading each micro batch's loss waited once per micro batch).
class MetricSums {
 public:
  // Adds `value` to the sum `name` (created at 0).
  void add(const std::string& name, double value);
  // Adds the scalar tensor `value` (detached, as float64 on its device).
  void add(const std::string& name, const at::Tensor& value);
  // The sums so far (host and tensor parts added); then empty again.
  Metrics take();

 private:
  struct Sum {
    std::string name;
    double host = 0.0;
    at::Tensor tensor;  // undefined until a tensor is added
  };
  Sum& sum_named(const std::string& name);
  std::vector<Sum> sums_;
};

class StepObjective {
 public:
  virtual ~StepObjective() = default;
  // Before any forward, from this rank's whole micro batches (every cp rank
  // of a dp rank passes the same rows). Collective over the mesh.
  virtual StepCounts begin(const dist::DeviceMesh& mesh, const std::vector<MicroBatch>& batches) = 0;
  // The differentiable part of the step's loss that `piece` (this rank's
  // rows of a micro batch, or its context-parallel chunks of them)
  // contributes, already normalised, from the model's logits for it (this
  // rank's vocabulary slice under tensor parallelism). Adds the piece's
  // metric contributions to sums().
  virtual at::Tensor micro_batch_loss(const ShardedModel& model, const dist::DeviceMesh& mesh,
                                      const at::Tensor& logits, const MicroBatch& piece) = 0;
  // policy.fused_lm_head_loss: when set, the step asks the model for the
  // next-token cross-entropy at each position of piece.labels instead of
  // the logits (CausalLM::forward_token_losses) and passes them to
  // micro_batch_loss_of_head. The whole vocabulary must be on each rank:
  // tessel::UsageError naming the setting when tensor parallelism splits
  // `model`'s lm_head.
  void set_fused_head(bool fused, const ShardedModel& model);
  bool fuses_head_loss() const { return fused_head_; }
  // As micro_batch_loss, from those losses, `token_losses` [rows, positions]
  // (0 where there is no label; the negated log-probabilities of the
  // labels). Only called when fuses_head_loss().
  virtual at::Tensor micro_batch_loss_of_head(const dist::DeviceMesh& mesh, const at::Tensor& token_losses,
                                              const MicroBatch& piece) = 0;
  // The temperature those losses are taken at (the logits divided by it
  // first): 1, or a policy's sampling temperature.
  virtual double head_loss_temperature() const { return 1.0; }
  // The step's metrics ("loss" first) from the sums of every rank's
  // contributions (the step reduces them over dp_cp in one collective, with
  // its own). By default the sums themselves: contributions already divided
  // by the global counts add up to the metric.
  virtual Metrics finish(const Metrics& global_sums) { return global_sums; }

  MetricSums& sums() { return sums_; }

 private:
  MetricSums sums_;
  bool fused_head_ = false;
};

// Each value summed over the dp_cp group in double precision: the
// communicator reduces no float64, and float32 sums would round differently
// per layout; gathering the doubles and adding them in rank order gives every
// rank the same, layout-independent result. Collective over the mesh.
std::vector<double> sum_over_dp_cp(const dist::DeviceMesh& mesh, const std::vector<double>& local);
Metrics sum_over_dp_cp(const dist::DeviceMesh& mesh, Metrics local);

// Each count summed over the dp group (one all-reduce).
std::vector<int64_t> sum_over_dp(const dist::DeviceMesh& mesh, const std::vector<int64_t>& local);

// The value of `name` in `metrics`; tessel::Error when absent.
double metric(const Metrics& metrics, const std::string& name);

}  // namespace tessel::train
