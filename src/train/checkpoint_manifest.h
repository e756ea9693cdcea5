// Every file of a checkpoint step with its size and xxHash64, recorded in
// metadata.json ("files") when it is saved and checked before it is loaded:
// a step directory truncated or corrupted after a successful save (a full
// disk, a bad copy) fails with a UsageError naming the file and the remedy
// (resume from the previous checkpoint with checkpointing.resume_from)
// instead of training on damaged weights or failing deep inside a load.
// metadata.json itself is the save's commit marker, written last, so it is
// not in the list; a metadata.json that does not parse is reported the same
// way. Checkpoints saved before the list existed load unchecked.
// Every name in the list is a plain file name whose file lies inside the
// step directory (a link leading out is refused): all are checked before
// any file is opened (io/confined_file.h).
#pragma once

#include <filesystem>

#include "dist/communicator.h"
#include "train/checkpoint_metadata.h"  // CheckpointManifest, manifest_to_json

namespace tessel::train {

// Reads and checks every file of the manifest in this process.
void verify_checkpoint(const std::filesystem::path& step_dir);

// Collective over `world`: the files are split over the ranks (each read
// once), and every rank throws the same UsageError when any is damaged.
void verify_checkpoint(const std::filesystem::path& step_dir, dist::Communicator& world);

}  // namespace tessel::train
