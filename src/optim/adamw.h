// AdamW (decoupled weight decay, Loshchilov & Hutter) over a list of tensors.
//
// Works on whatever tensors it is given: full parameters in a single-process
// run, or the local fp32 shards of FSDP / tensor-parallel parameters. Each
// element's update depends only on that element's parameter, gradient and
// state, so running it on shards equals running it on the full tensor — the
// property every parity test relies on. State tensors have the shape of their
// parameter (sharded params give sharded state).
//
// The update matches torch.optim.AdamW (amsgrad=False, maximize=False):
//   p      *= 1 - lr * weight_decay
//   m       = beta1 * m + (1 - beta1) * g
//   v       = beta2 * v + (1 - beta2) * g^2
//   p      -= lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t) + eps)
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace tessel::optim {

struct AdamWOptions {
  // Defaults of the reference SFT recipe (NeMo RL sft.yaml).
  double lr = 5.0e-6;
  double weight_decay = 0.1;
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1.0e-5;
};

struct AdamWParamState {
  at::Tensor exp_avg;     // first moment, fp32, shape of the parameter
  at::Tensor exp_avg_sq;  // second moment, fp32, shape of the parameter
};

class AdamW {
 public:
  // `params` must be leaf tensors (requires_grad) whose storage the optimizer
  // may update in place. Throws if options are out of range.
  AdamW(std::vector<at::Tensor> params, AdamWOptions options);

  // One update of every parameter that has a gradient (params whose grad is
  // undefined are skipped, as in PyTorch). Uses options().lr unless set_lr().
  // `grad_scale` multiplies each gradient as the update reads it (the
  // clipping coefficient, grad_norm.h: the same result as scaling the
  // gradients first, in their dtype); the gradients are left as they are.
  void step(double grad_scale = 1.0);
  // The same, calling `updated(i)` as soon as parameter i is (updated or
  // skipped): for a caller that sends each updated parameter on while the
  // rest are still being updated (fsdp::FSDPParamGroup::gather_replica_parts).
  void step(double grad_scale, const std::function<void(size_t)>& updated);
  void zero_grad();  // sets every gradient to undefined (frees it)

  void set_lr(double lr) { options_.lr = lr; }
  const AdamWOptions& options() const { return options_; }
  int64_t step_count() const { return step_; }
  const std::vector<at::Tensor>& params() const { return params_; }

  // For checkpoints: state per parameter (undefined tensors before the first
  // step or allocate_state) and the step counter.
  const std::vector<AdamWParamState>& state() const { return state_; }
  // Makes the zero moments of every parameter that has none yet (the first
  // step would make them; the trainer calls this before it, train/trainer.cpp).
  void allocate_state();
  void load_state(std::vector<AdamWParamState> state, int64_t step);
  int64_t state_bytes() const;

 private:
  // Parameter i's update of the current step (step_ already counted).
  void update_one(size_t i, double grad_scale, double bias_correction2_sqrt, double step_size);

  std::vector<at::Tensor> params_;
  std::vector<AdamWParamState> state_;
  AdamWOptions options_;
  int64_t step_ = 0;
};

// Throws UsageError naming the offending option (e.g. "beta2 must be in [0, 1)").
void validate(const AdamWOptions& options);

}  // namespace tessel::optim
