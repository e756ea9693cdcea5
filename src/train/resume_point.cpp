#include "train/resume_point.h"

#include <ATen/ATen.h>

#include "train/checkpoint.h"

namespace tessel::train {

std::optional<std::filesystem::path> agreed_latest_checkpoint(const std::filesystem::path& dir,
                                                              dist::Communicator& world) {
  int64_t step = -1;  // none
  if (world.rank() == 0) {
    if (const auto latest = latest_checkpoint(dir)) step = checkpoint_step(*latest);
  }
  at::Tensor chosen = at::full({1}, step, at::kLong);
  world.broadcast(chosen, 0);
  step = chosen.item<int64_t>();
  if (step < 0) return std::nullopt;
  return checkpoint_step_dir(dir, step);
}

}  // namespace tessel::train
