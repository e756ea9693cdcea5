#include "optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace tessel::optim {

void validate(const LrScheduleOptions& o) {
  if (o.base_lr < 0) throw UsageError(fmt::format("learning rate must be >= 0, got {}", o.base_lr));
  if (o.warmup_steps < 0)
    throw UsageError(fmt::format("warmup steps must be >= 0, got {}", o.warmup_steps));
  if (o.warmup_start_factor < 0 || o.warmup_start_factor > 1)
    throw UsageError(
        fmt::format("warmup start factor must be in [0, 1], got {}", o.warmup_start_factor));
  if (o.min_lr_ratio < 0 || o.min_lr_ratio > 1)
    throw UsageError(fmt::format("min_lr_ratio must be in [0, 1], got {}", o.min_lr_ratio));
  if (o.decay != LrDecay::Constant && o.decay_steps <= 0)
    throw UsageError(fmt::format("{} decay needs decay_steps > 0, got {}", to_string(o.decay),
                                 o.decay_steps));
}

double lr_at(const LrScheduleOptions& o, int64_t step) {
  if (step < o.warmup_steps) {
    const double t = static_cast<double>(step) / static_cast<double>(o.warmup_steps);
    return o.base_lr * (o.warmup_start_factor + (1.0 - o.warmup_start_factor) * t);
  }
  if (o.decay == LrDecay::Constant) return o.base_lr;
  const double d = static_cast<double>(std::min(step - o.warmup_steps, o.decay_steps)) /
                   static_cast<double>(o.decay_steps);
  if (o.decay == LrDecay::Linear) return o.base_lr * (1.0 - (1.0 - o.min_lr_ratio) * d);
  return o.base_lr * (o.min_lr_ratio + (1.0 - o.min_lr_ratio) * 0.5 * (1.0 + std::cos(M_PI * d)));
}

LrDecay parse_lr_decay(const std::string& name) {
  if (name == "constant") return LrDecay::Constant;
  if (name == "linear") return LrDecay::Linear;
  if (name == "cosine") return LrDecay::Cosine;
  throw UsageError(fmt::format("unknown lr decay '{}': choose one of constant, linear, cosine", name));
}

const char* to_string(LrDecay decay) {
  switch (decay) {
    case LrDecay::Constant: return "constant";
    case LrDecay::Linear: return "linear";
    case LrDecay::Cosine: return "cosine";
  }
  return "?";
}

}  // namespace tessel::optim
