#include "train/resume_point.h"

#include <ATen/ATen.h>

#include <fmt/format.h>

#include "core/error.h"
#include "train/checkpoint.h"
#include "train/checkpoint_manifest.h"

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

std::optional<std::filesystem::path> resume_point(const CheckpointOptions& options,
                                                  dist::Communicator& world) {
  std::optional<std::filesystem::path> chosen;
  if (!options.resume_from.empty()) {
    // Every rank reads the same config, so all take this branch alike.
    chosen = options.resume_from;
    if (!std::filesystem::is_regular_file(*chosen / "metadata.json")) {
      throw UsageError(fmt::format(
          "checkpointing.resume_from={}: not a complete checkpoint (no metadata.json in it); "
          "give a step_<N> directory under checkpointing.checkpoint_dir, or null to resume from "
          "the latest",
          chosen->string()));
    }
  } else if (options.enabled) {
    chosen = agreed_latest_checkpoint(options.dir, world);
  }
  if (chosen) verify_checkpoint(*chosen, world);
  return chosen;
}

}  // namespace tessel::train
