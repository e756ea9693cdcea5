// Learning-rate schedule: optional linear warmup, then constant, linear or
// cosine decay. A pure function of the step, so a resumed run recomputes the
// same rate from the restored step counter (no scheduler state to save).
//
// Semantics follow torch.optim.lr_scheduler as the reference recipes chain
// them (LinearLR warmup, then ConstantLR / CosineAnnealingLR): the rate used
// for optimizer step s (0-based) is
//   warmup (s < warmup_steps): base * (start + (1 - start) * s / warmup_steps)
//   constant: base
//   linear:   base * (1 - (1 - min_ratio) * d / decay_steps)
//   cosine:   base * (min_ratio + (1 - min_ratio) * (1 + cos(pi * d / decay_steps)) / 2)
// with d = min(s - warmup_steps, decay_steps).
#pragma once

#include <cstdint>
#include <string>

namespace tessel::optim {

enum class LrDecay { Constant, Linear, Cosine };

struct LrScheduleOptions {
  double base_lr = 5.0e-6;
  int64_t warmup_steps = 0;
  double warmup_start_factor = 1.0 / 3.0;  // reference recipe: LinearLR(start_factor=1/3)
  LrDecay decay = LrDecay::Constant;
  int64_t decay_steps = 0;    // steps after warmup over which to decay (linear/cosine)
  double min_lr_ratio = 0.0;  // final rate as a fraction of base_lr
};

// Throws UsageError for negative step counts, ratios outside [0, 1], or a
// decaying schedule without decay_steps.
void validate(const LrScheduleOptions& options);

double lr_at(const LrScheduleOptions& options, int64_t step);

// "constant" | "linear" | "cosine"; throws UsageError listing the choices.
LrDecay parse_lr_decay(const std::string& name);
const char* to_string(LrDecay decay);

}  // namespace tessel::optim
