// policy.scheduler -> optim::LrScheduleOptions. The reference recipes write the
// schedule as torch.optim.lr_scheduler classes chained by SequentialLR:
//   scheduler:
//     - {name: torch.optim.lr_scheduler.LinearLR, kwargs: {start_factor, end_factor, total_iters}}
//     - {name: torch.optim.lr_scheduler.ConstantLR | CosineAnnealingLR | LinearLR, kwargs: ...}
//     - milestones: [N]
// The first entry before the milestone is the warmup, the second the decay.
// One scheduler alone (no milestones) is the whole schedule. Simpler forms:
//   scheduler: null                       constant at optimizer.kwargs.lr
//   scheduler: {warmup_steps, warmup_start_factor, decay: constant|linear|cosine,
//               decay_steps, min_lr_ratio}
// lr_schedule.h is a pure function of the step, so anything it cannot express
// (a warmup that does not end at the milestone, a warmup not ending at 1.0)
// is rejected here with the reason, rather than silently trained differently.
#pragma once

#include <string>
#include <vector>

#include "config/config.h"
#include "optim/lr_schedule.h"

namespace tessel::train {

// The keys of the mapping form; any other is an error.
const std::vector<std::string>& lr_schedule_mapping_keys();

// `scheduler` is the node at policy.scheduler (may be null); `base_lr` comes
// from policy.optimizer.kwargs.lr. Throws UsageError naming the entry.
optim::LrScheduleOptions lr_schedule_from(const config::Config& scheduler, double base_lr);

}  // namespace tessel::train
