// Which checkpoint a run resumes from, decided once for the whole job. Each
// rank listing checkpoint_dir itself could see a different newest step (a
// shared file system's caches, a save landing between two listings) and the
// ranks would then load different states or wait forever in mismatched
// collectives. World rank 0 chooses and broadcasts the step; every rank then
// loads that step_<N> directory.
#pragma once

#include <filesystem>
#include <optional>

#include "dist/communicator.h"
#include "train/train_options.h"

namespace tessel::train {

// Collective over `world`: rank 0's latest_checkpoint(dir), as the same
// step_<N> under `dir` on every rank; nullopt on every rank when rank 0 finds
// none.
std::optional<std::filesystem::path> agreed_latest_checkpoint(const std::filesystem::path& dir,
                                                              dist::Communicator& world);

// The step directory the run resumes from, the same on every rank (collective
// over `world`): checkpointing.resume_from when set (UsageError unless it is
// a complete checkpoint), else with checkpointing.enabled the agreed latest
// one, else none. Its files are checked (checkpoint_manifest.h) before it is
// returned. resume_from and checkpoint_dir are the user's (the config): they
// may be anywhere; what the checkpoint inside names is confined to it.
std::optional<std::filesystem::path> resume_point(const CheckpointOptions& options,
                                                  dist::Communicator& world);

}  // namespace tessel::train
